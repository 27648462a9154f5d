"""YAML text for launch files: keys in the order given, multi-line strings as literal blocks (`|`)."""

from __future__ import annotations

from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(data: Any) -> str:
    """`data` as block YAML that yaml.safe_load reads back equal."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)
