"""srift.catalog.accelerators: looking a shipped accelerator spec up by its exact name."""

from __future__ import annotations

import pytest

from srift.catalog.accelerators import accelerator_specs, spec_named
from srift.errors import NotFound


def test_a_spec_is_found_by_its_exact_name() -> None:
    spec = spec_named("H200-SXM-141GB")
    assert spec.name == "H200-SXM-141GB" and spec in accelerator_specs()


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("H200", ["H200-SXM-141GB"]),  # a short name: difflib's ratio alone rates the full name far
        ("h100", ["H100-PCIe-80GB", "H100-SXM5-80GB"]),  # case aside
        ("RTX4090", ["RTX-4090"]),  # punctuation aside
        ("A100-SXM4-80G", ["A100-SXM4-80GB"]),  # a typo
    ],
)
def test_an_unknown_name_is_not_found_and_the_message_names_the_close_specs(
    name: str, meant: list[str]
) -> None:
    """Not a bare KeyError: Srift's NotFound (a 404 at the API, exit 2 at the CLI) naming what was asked for,
    the specs it may have meant, and the "To fix:" hint."""
    with pytest.raises(NotFound) as caught:
        spec_named(name)
    message = str(caught.value)
    assert f"no accelerator spec is named {name!r}" in message
    fix = message.split("To fix: ", 1)[1]
    close = fix.split("spells it: ", 1)[1].rstrip(".").split(" or ")
    assert close[: len(meant)] == meant  # the likeliest first


def test_a_name_like_none_lists_every_spec() -> None:
    with pytest.raises(NotFound) as caught:
        spec_named("TPU-v5e")
    fix = str(caught.value).split("To fix: ", 1)[1]
    assert all(spec.name in fix for spec in accelerator_specs())
