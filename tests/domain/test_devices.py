"""A profile that `srift profile` measured on a CPU does not stand for a GPU type unless asked, and then
the answer marks it."""

from __future__ import annotations

import dataclasses

import pytest

from srift.domain.catalog import InstanceType, Interconnect
from srift.domain.devices import check_devices, cpu_profile_for_gpu, measured_on_cpu
from srift.domain.profile import ComputeCurve, EstimateInfo, LayerGrad, ModelProfile
from srift.errors import InvalidInput


def _instance(name: str, gpus: int) -> InstanceType:
    return InstanceType(
        provider="aws",
        name=name,
        gpu_model="V100" if gpus else None,
        gpu_count=gpus,
        gpu_memory_gib=16.0 if gpus else 0.0,
        vcpus=8,
        memory_gib=61.0,
        network_gbps=10.0,
        network_burst=False,
        interconnect=Interconnect.NONE,
        interconnect_gbps=0.0,
        efa=False,
    )


P3 = _instance("p3.2xlarge", 1)
C5 = _instance("c5.2xlarge", 0)
PROFILE = ModelProfile(
    model="cnn",
    accelerator="p3.2xlarge",
    max_batch=64,
    forward=ComputeCurve((1, 64), (0.01, 0.1)),
    backward=ComputeCurve((1, 64), (0.02, 0.2)),
    layers=(LayerGrad("fc", 4096, 1.0),),
    straggler_cv=0.0,
    device="cpu",
    extra={"profiler": "srift.profiling"},
)


def test_a_cpu_profile_labelled_with_a_gpu_type_is_refused_with_a_hint() -> None:
    assert measured_on_cpu(PROFILE) and cpu_profile_for_gpu(PROFILE, P3)
    with pytest.raises(InvalidInput) as err:
        check_devices([(PROFILE, P3)], allow_cpu_profiles=False, field="profile_ids[0]")
    assert err.value.field == "profile_ids[0]"
    assert "measured on cpu" in err.value.detail and "allow_cpu_profiles" in err.value.hint


def test_asked_for_it_is_used_and_marked() -> None:
    notes = check_devices([(PROFILE, P3), (PROFILE, P3)], allow_cpu_profiles=True, field="x")
    assert len(notes) == 1 and "stand-in" in notes[0] and notes[0].startswith("p3.2xlarge")


@pytest.mark.parametrize(
    "profile",
    [
        dataclasses.replace(PROFILE, device="cuda:0"),
        dataclasses.replace(PROFILE, extra={}),
        dataclasses.replace(PROFILE, estimate=EstimateInfo(method="roofline", spread=0.2, calibration="c")),
    ],
)
def test_gpu_profiles_other_tools_documents_and_estimates_pass(profile: ModelProfile) -> None:
    assert check_devices([(profile, P3)], allow_cpu_profiles=False, field="x") == ()


def test_a_cpu_type_takes_a_cpu_profile() -> None:
    assert check_devices([(PROFILE, C5)], allow_cpu_profiles=False, field="x") == ()
