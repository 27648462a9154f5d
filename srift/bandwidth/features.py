"""Feature encoding for the bus-bandwidth learner (Srift §4.2's hand-picked features) and the MTU split.

Features, in column order: provider, region, zone, instance type, GPU name and CPU name (categorical:
codes into a vocabulary learned at fit time, unknown → missing), CPU cores, memory GiB, rated network
Gbit/s, log2 buffer bytes, world size, nodes, ranks per node, concurrent async transfers.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from srift.bandwidth.records import ProbeRecord
from srift.domain.host import HostFacts

CATEGORICAL = ("provider", "region", "zone", "instance_type", "gpu_name", "cpu_name")
NUMERIC_HOST = ("cpu_cores", "memory_gib", "rated_gbps")
PER_REQUEST = ("log2_buffer_bytes", "world_size", "nodes", "ranks_per_node", "async_count")
FEATURE_NAMES: tuple[str, ...] = CATEGORICAL + NUMERIC_HOST + PER_REQUEST
SIZE_COLUMN = FEATURE_NAMES.index("log2_buffer_bytes")

# Largest packet, per provider: EC2 uses jumbo frames inside a VPC (9001 B) and the testbed mirrors it
# (its default spec MTU); loopback carries 65536 B; unknown providers get Ethernet's 1500 B. Sizes below
# the MTU go to the latency-bound model.
DEFAULT_MTU_BYTES: Mapping[str, int] = {"aws": 9001, "ec2": 9001, "testbed": 9001, "local": 65536}
FALLBACK_MTU_BYTES = 1500


def mtu_for(provider: str, mtu_bytes: Mapping[str, int], default: int) -> int:
    return int(mtu_bytes.get(provider.lower(), default))


def _mode(values: Sequence[str]) -> str:
    return Counter(values).most_common(1)[0][0]


def host_profiles(records: Sequence[ProbeRecord]) -> dict[tuple[str, str], HostFacts]:
    """One profile per (provider, instance type) in `records`."""
    groups: dict[tuple[str, str], list[ProbeRecord]] = {}
    for r in records:
        groups.setdefault((r.provider, r.instance_type), []).append(r)
    return {
        key: HostFacts(
            provider=key[0],
            instance_type=key[1],
            region=_mode([r.region for r in rs]),
            zone=_mode([r.zone for r in rs]),
            gpu_name=_mode([r.gpu_name for r in rs]),
            cpu_name=_mode([r.cpu_name for r in rs]),
            cpu_cores=float(statistics.median(r.cpu_cores for r in rs)),
            memory_gib=float(statistics.median(r.memory_gib for r in rs)),
            rated_gbps=float(statistics.median(r.rated_gbps for r in rs)),
        )
        for key, rs in groups.items()
    }


def build_vocabulary(records: Sequence[ProbeRecord]) -> dict[str, list[str]]:
    """Sorted distinct values of each categorical feature; a value's code is its index."""
    return {name: sorted({str(getattr(r, name)) for r in records}) for name in CATEGORICAL}


def _codes(vocabulary: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    return {name: {v: float(i) for i, v in enumerate(values)} for name, values in vocabulary.items()}


def feature_matrix(records: Sequence[ProbeRecord], vocabulary: Mapping[str, Sequence[str]]) -> np.ndarray:
    """Rows of FEATURE_NAMES for records; unknown categorical values are NaN (XGBoost: missing)."""
    codes = _codes(vocabulary)
    out = np.empty((len(records), len(FEATURE_NAMES)), dtype=np.float64)
    for i, r in enumerate(records):
        out[i, : len(CATEGORICAL)] = [
            codes[name].get(str(getattr(r, name)), math.nan) for name in CATEGORICAL
        ]
        out[i, len(CATEGORICAL) :] = [
            r.cpu_cores,
            r.memory_gib,
            r.rated_gbps,
            math.log2(r.buffer_bytes),
            r.world_size,
            r.nodes,
            r.ranks_per_node,
            r.async_count,
        ]
    return out


def host_rows(
    profile: HostFacts,
    vocabulary: Mapping[str, Sequence[str]],
    *,
    sizes: np.ndarray,
    world_size: int,
    nodes: int,
    async_count: int,
) -> np.ndarray:
    """Rows for one host profile and a vector of buffer sizes (the fast path behind predict)."""
    codes = _codes(vocabulary)
    row = [codes[name].get(str(getattr(profile, name)), math.nan) for name in CATEGORICAL]
    row += [profile.cpu_cores, profile.memory_gib, profile.rated_gbps]
    row += [0.0, world_size, nodes, max(1, world_size // max(nodes, 1)), async_count]
    out = np.tile(np.asarray(row, dtype=np.float64), (len(sizes), 1))
    out[:, SIZE_COLUMN] = np.log2(sizes)
    return out


def config_key(record: ProbeRecord) -> tuple[Any, ...]:
    """Everything the learner sees about a sample except the measurement: repeats share it."""
    return (
        record.provider,
        record.region,
        record.zone,
        record.instance_type,
        record.gpu_name,
        record.cpu_name,
        record.cpu_cores,
        record.memory_gib,
        record.rated_gbps,
        record.backend,
        record.buffer_bytes,
        record.world_size,
        record.nodes,
        record.ranks_per_node,
        record.async_count,
    )


SIZE_CLASS_LOG2 = 2
"""Residual spreads are reported per size class of 4× (2 powers of two): 4–15 B, 16–63 B, …"""


def size_class(buffer_bytes: int) -> int:
    """The size class of a buffer: floor(log2(bytes) / 2) · 2 (the log2 of the class's smallest size)."""
    return (max(int(buffer_bytes), 1).bit_length() - 1) // SIZE_CLASS_LOG2 * SIZE_CLASS_LOG2
