"""What is known of a host: where it runs and what it has (the bandwidth learner's host features).

One definition for every place that carries host facts: probe records, nccl-tests imports, the learner's
per-type host profile and the facts a job reads from the catalog. Subclasses add what they measure; the
fields stay flat, so records keep their flat file and table formats.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class HostFacts:
    """A host's provider, type and location, its accelerator and CPU names, logical CPU count, RAM in GiB
    and the provider's rated network bandwidth in Gbit/s (0 or "" where unknown)."""

    provider: str
    instance_type: str
    region: str = ""
    zone: str = ""
    gpu_name: str = ""
    cpu_name: str = ""
    cpu_cores: float = 0
    memory_gib: float = 0.0
    rated_gbps: float = 0.0

    def host_facts(self) -> dict[str, Any]:
        """The host fields alone, as keyword arguments for another value that carries them."""
        return {f.name: getattr(self, f.name) for f in fields(HostFacts)}


HOST_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(HostFacts))
"""The names of HostFacts' fields, in order."""


__all__ = ["HOST_FIELDS", "HostFacts"]
