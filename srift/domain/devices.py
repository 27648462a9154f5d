"""Where a profile was measured, and whether it may stand for an accelerator it was not measured on.

`srift profile` records the torch device it ran on. A profile measured on a CPU but labelled with a GPU
instance type (a laptop's `--accelerator p3.2xlarge`, or a profile job that ran on the host's CPU) times
the wrong hardware: plans and predictions refuse it unless the request says to use it anyway
(`allow_cpu_profiles`), and then the answer marks it.
"""

from __future__ import annotations

from collections.abc import Iterable

from srift.domain.catalog import InstanceType
from srift.domain.profile import ModelProfile
from srift.errors import InvalidInput

PROFILER_FACT = "profiler"
"""`extra["profiler"]`: set by `srift profile`, which always records the device it ran on. Documents made
by other tools may omit `device` (it then reads "cpu"), so only profiler-made ones are judged by it."""


def measured_on_cpu(profile: ModelProfile) -> bool:
    """A measured profile that `srift profile` made on a CPU device."""
    return (
        not profile.is_estimate
        and PROFILER_FACT in (profile.extra or {})
        and profile.device.strip().lower().startswith("cpu")
    )


def cpu_profile_for_gpu(profile: ModelProfile, instance: InstanceType) -> bool:
    """Whether `profile` would stand for `instance`'s GPUs although it was measured on a CPU."""
    return instance.gpu_count > 0 and measured_on_cpu(profile)


def stand_in_note(profile: ModelProfile, instance_type: str) -> str:
    return (
        f"{instance_type}: compute measured on the CPU (profile of {profile.model} labelled "
        f"{profile.accelerator}), used as a stand-in for its GPUs (allow_cpu_profiles)"
    )


def check_devices(
    pairs: Iterable[tuple[ModelProfile, InstanceType]], *, allow_cpu_profiles: bool, field: str
) -> tuple[str, ...]:
    """Notes marking CPU profiles used for GPU types when `allow_cpu_profiles`; InvalidInput naming
    `field` for the first such pair otherwise."""
    notes: list[str] = []
    for profile, instance in pairs:
        if not cpu_profile_for_gpu(profile, instance):
            continue
        if not allow_cpu_profiles:
            raise InvalidInput(
                f"the profile of {profile.model} labelled {profile.accelerator} was measured on "
                f"{profile.device}, but {instance.name} trains on {instance.gpu_count} × "
                f"{instance.accelerator} GPU(s)",
                hint="profile on the GPU (`srift profile --device cuda`, or a profile job for "
                f"{instance.name}), or set allow_cpu_profiles: true to use it as a stand-in (the answer "
                "then says so)",
                field=field,
            )
        note = stand_in_note(profile, instance.name)
        if note not in notes:
            notes.append(note)
    return tuple(notes)


__all__ = ["check_devices", "cpu_profile_for_gpu", "measured_on_cpu", "stand_in_note"]
