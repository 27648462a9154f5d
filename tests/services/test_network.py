"""srift.services.network: the errors a request's `network` can meet say how to fix it with commands that
exist."""

from __future__ import annotations

import re

import pytest
import typer

from srift.cli import build_app
from srift.domain.network import NetworkSpec, Transport
from srift.errors import InvalidInput
from srift.services.network import check_transport
from tests.optimize.helpers import instance

P3_8XLARGE = instance("p3.8xlarge", gpus=4, gpu_model="V100")  # no EFA


def _catalog_list_options() -> set[str]:
    root = typer.main.get_command(build_app())
    catalog = root.commands["catalog"].commands["list"]  # type: ignore[attr-defined]
    return {opt for param in catalog.params for opt in param.opts}


def test_efa_on_a_type_without_it_points_at_an_option_catalog_list_has() -> None:
    """The hint said `catalog list --efa`, an option `srift catalog list` does not have (click: "No such
    option: --efa"); every option the hint gives `srift catalog list` is one it accepts."""
    with pytest.raises(InvalidInput) as refused:
        check_transport(
            [("config.choices[0].instance_type", P3_8XLARGE)], NetworkSpec(transport=Transport.EFA)
        )
    assert refused.value.field == "config.choices[0].instance_type"
    commands = re.findall(r"catalog list((?: --[a-z-]+)+)", refused.value.hint)
    assert commands, refused.value.hint
    named = {opt for command in commands for opt in command.split()}
    assert named <= _catalog_list_options(), named - _catalog_list_options()
