"""The stack and lifecycle rules: which offers a framework stack can run, one test per rule."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from srift.catalog.accelerators import accelerator_specs
from srift.catalog.support import (
    capability_range,
    compute_capability,
    lifecycle,
    parse_support,
    runnable_offers,
    support_facts,
)
from srift.domain import InstanceType, Interconnect, Market, Offer
from srift.domain.catalog import Lifecycle
from srift.domain.requests import DEFAULT_CUDA, DEFAULT_TORCH, FrameworkStack
from srift.errors import ConfigurationError, InvalidInput

GPUS = {"p2.xlarge": "K80", "g3.4xlarge": "M60", "p3.2xlarge": "V100", "g4dn.xlarge": "T4"}
GPUS |= {"p4d.24xlarge": "A100", "p5.48xlarge": "H100", "c5.large": None}


def _offer(name: str, *, as_of: date = date(2025, 5, 31), provider: str = "aws") -> Offer:
    gpu = GPUS[name]
    memory = {"K80": 12.0, "M60": 8.0, "V100": 16.0, "T4": 16.0, "A100": 40.0, "H100": 80.0}
    inst = InstanceType(
        provider=provider,
        name=name,
        gpu_model=gpu,
        gpu_count=1 if gpu else 0,
        gpu_memory_gib=memory.get(gpu or "", 0.0),
        vcpus=8,
        memory_gib=32.0,
        network_gbps=10.0,
        network_burst=False,
        interconnect=Interconnect.NONE,
        interconnect_gbps=0.0,
        efa=False,
    )
    return Offer(inst, "us-east-1", Market.SPOT, 1.0, "test", as_of)


def _kept(stack: FrameworkStack, *, include_retired: bool = True, names: list[str] | None = None) -> set[str]:
    offers = [_offer(n) for n in names or GPUS]
    return {
        o.instance.name for o in runnable_offers(offers, stack=stack, include_retired=include_retired).kept
    }


def test_every_shipped_gpu_has_a_compute_capability_with_its_source() -> None:
    for spec in accelerator_specs():
        assert spec.capability is not None, spec.name
        assert "developer.nvidia.com/cuda-gpus" in spec.compute_capability_source
    assert compute_capability(_offer("p2.xlarge").instance) == "3.7"
    assert compute_capability(_offer("c5.large").instance) == ""


def test_cuda_12_has_no_kepler_kernels() -> None:
    kept = _kept(FrameworkStack(torch="2.13", cuda="12.6"))
    assert "p2.xlarge" not in kept
    assert {"g3.4xlarge", "p3.2xlarge", "g4dn.xlarge", "p4d.24xlarge", "p5.48xlarge", "c5.large"} <= kept


def test_cuda_11_8_still_builds_for_kepler() -> None:
    assert "p2.xlarge" in _kept(FrameworkStack(torch="2.0", cuda="11.8"))


def test_cuda_before_11_8_has_no_hopper_kernels() -> None:
    kept = _kept(FrameworkStack(torch="1.13", cuda="11.7"))
    assert "p5.48xlarge" not in kept and "p4d.24xlarge" in kept


def test_pytorch_2_8_cuda_12_8_wheels_drop_maxwell_but_keep_volta() -> None:
    kept = _kept(FrameworkStack(torch="2.9", cuda="12.8"))
    assert "g3.4xlarge" not in kept and "p3.2xlarge" in kept


def test_pytorch_2_11_cuda_12_8_wheels_drop_volta() -> None:
    kept = _kept(FrameworkStack(torch="2.13", cuda="12.8"))
    assert "p3.2xlarge" not in kept and "g4dn.xlarge" in kept


def test_cuda_13_builds_for_turing_and_newer_only() -> None:
    kept = _kept(FrameworkStack(torch="2.10", cuda="13.0"))
    assert kept == {"g4dn.xlarge", "p4d.24xlarge", "p5.48xlarge", "c5.large"}


def test_the_default_stack_keeps_maxwell_and_volta() -> None:
    least, most, _ = capability_range(FrameworkStack())
    assert (DEFAULT_TORCH, DEFAULT_CUDA) == ("2.13", "12.6")
    assert least == (5, 0) and most == (9, 0)


def test_retired_families_are_left_out_unless_asked_for() -> None:
    stack = FrameworkStack(torch="2.0", cuda="11.8")
    assert "g3.4xlarge" not in _kept(stack, include_retired=False)
    assert "p2.xlarge" not in _kept(stack, include_retired=False)
    assert {"g3.4xlarge", "p2.xlarge"} <= _kept(stack, include_retired=True)
    status = lifecycle(_offer("p3.2xlarge").instance)
    assert status is not None and status.status is Lifecycle.PREVIOUS
    assert "p3.2xlarge" in _kept(stack, include_retired=False)


def test_a_family_is_judged_on_the_date_of_its_price() -> None:
    old = _offer("g3.4xlarge", as_of=date(2020, 8, 20))
    result = runnable_offers([old], stack=FrameworkStack(), include_retired=False)
    assert result.kept == (old,)
    other_cloud = _offer("g3.4xlarge", provider="testcloud")
    assert runnable_offers([other_cloud], stack=FrameworkStack(), include_retired=False).kept


def test_notes_name_what_was_left_out_and_why() -> None:
    offers = [_offer(n) for n in ("p2.xlarge", "g3.4xlarge", "g4dn.xlarge")]
    result = runnable_offers(offers, stack=FrameworkStack(), include_retired=False)
    assert [o.instance.name for o in result.kept] == ["g4dn.xlarge"]
    text = " ".join(result.notes)
    assert "p2.xlarge" in text and "compute capability 3.7" in text and "CUDA 12.6" in text
    assert "g3.4xlarge" in text and "retired" in text and "include_retired" in text


def test_naming_a_left_out_type_says_why() -> None:
    with pytest.raises(InvalidInput) as info:
        runnable_offers(
            [_offer("p2.xlarge")], stack=FrameworkStack(), include_retired=True, named=["p2.xlarge"]
        )
    assert info.value.field == "availability.p2.xlarge"
    assert "compute capability 3.7" in str(info.value)


@pytest.mark.parametrize(
    ("torch", "cuda", "field"),
    [("2.13", "twelve", "stack.cuda"), ("2", "12.6", "stack.torch"), ("2.13", "10.2", "stack.cuda")],
)
def test_bad_stacks_are_input_errors_on_their_field(torch: str, cuda: str, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        capability_range(FrameworkStack(torch=torch, cuda=cuda))
    assert info.value.field == field


def test_the_shipped_facts_cite_their_sources() -> None:
    facts = support_facts()
    assert facts.cuda and facts.wheels and facts.families
    for entry in (*facts.cuda, *facts.wheels, *facts.families):
        assert entry.source


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"format": "other"}, "format"),
        (
            {"cuda": [{"from": "12.0", "min_cc": "5.0", "max_cc": "9.0", "source": "nowhere"}]},
            "cuda[0].source",
        ),
        ({"cuda": [{"from": "x", "min_cc": "5.0", "max_cc": "9.0", "source": "s"}]}, "cuda[0].from"),
    ],
)
def test_parse_support_names_the_field_at_fault(change: dict[str, Any], field: str) -> None:
    document: dict[str, Any] = {
        "format": "srift-support/1",
        "sources": {"s": {"text": "a source", "as_of": "2025-01-01"}},
        "cuda": [{"from": "12.0", "min_cc": "5.0", "max_cc": "9.0", "source": "s"}],
    }
    with pytest.raises(ConfigurationError) as info:
        parse_support({**document, **change})
    assert info.value.field == field
