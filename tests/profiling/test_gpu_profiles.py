"""Profiles that `srift profile measure --device cuda` wrote on an NVIDIA H200 (the GPU check of 2026-11-27,
shipped in srift/refmodels/data/measured/) read back as the server reads an upload: a GPU profile, labelled
with the GPU the catalog knows, with curves that plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srift.catalog.accelerators import spec_for_accelerator
from srift.domain.devices import measured_on_cpu
from srift.domain.profile_document import read_profile

GPU_PROFILES = sorted(
    (Path(__file__).resolve().parents[2] / "srift" / "refmodels" / "data" / "measured").glob(
        "h200-profile-*.json"
    )
)


def test_the_gpu_check_left_its_profiles() -> None:
    assert len(GPU_PROFILES) >= 4


@pytest.mark.parametrize("path", GPU_PROFILES, ids=lambda p: p.stem)
def test_a_profile_measured_on_a_gpu_reads_back_as_one(path: Path) -> None:
    profile = read_profile(json.loads(path.read_text()))
    precision = path.stem.rsplit("-", 1)[-1]
    assert profile.precision.value == precision
    assert not measured_on_cpu(profile)
    spec = spec_for_accelerator(profile.accelerator)
    assert spec is not None and spec.name == "H200-SXM-141GB"
    batches = profile.forward.batches
    assert batches[0] == 1 and batches[-1] == profile.max_batch
    assert 0 < profile.compute_s(1) < profile.compute_s(profile.max_batch)
