"""Per-profile arrays the simulator reuses across calls: ready fractions, expected bits, size classes.

A layer that runs with probability `exec_prob` < 1 (a conditional branch) contributes its *expected*
gradient, grad_bytes × exec_prob, to the exchange (Srift §4.1 samples the dataset for these probabilities);
its size class — what the bandwidth model is asked about — stays that of the full tensor, rounded up to a
power of two. Layers with no expected bytes are left out. Arrays are cached per profile object.

PyTorch DDP does not reduce layer by layer: it copies gradients into buckets (about 1 MiB for the first,
`bucket_cap_mb` = 25 MiB for the rest) and reduces a bucket once all of its gradients are ready. DDP first
assigns parameters to buckets in reverse registration order, then, after the first iteration, rebuilds the
buckets in the order their gradients became ready (`Reducer::rebuild_buckets`, torch/csrc/distributed/c10d/
reducer.cpp), with the same two caps; the steady state is what an iteration time measures, so buckets fill
in ready order. `bucket_groups` and `bucketed` turn a profile's layers into those buckets, for the served
configuration (`srift.domain.simulation.SERVED`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

from srift.domain import LayerGrad, ModelProfile
from srift.domain.simulation import DDP_BUCKET_CAP_MB, DDP_FIRST_BUCKET_BYTES
from srift.sim.network import pow2_ceil

_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class LayerArrays:
    """Kept layers in ready order: names, ready fractions, payload bits, class index into `sizes`."""

    names: tuple[str, ...]
    ready_frac: np.ndarray
    bits: np.ndarray
    klass: np.ndarray
    sizes: tuple[int, ...]
    bits_list: list[float]
    klass_list: list[int]

    def aligned_ready_frac(self, other: LayerArrays) -> np.ndarray:
        """`other`'s ready fractions in this layer order; this profile's own if the layer sets differ."""
        if other is self or other.names == self.names:
            return other.ready_frac
        if sorted(other.names) != sorted(self.names) or len(set(self.names)) != len(self.names):
            return self.ready_frac
        position = {name: i for i, name in enumerate(other.names)}
        return other.ready_frac[[position[name] for name in self.names]]


_cache: OrderedDict[int, tuple[ModelProfile, LayerArrays]] = OrderedDict()
_lock = threading.Lock()


def layer_arrays(profile: ModelProfile) -> LayerArrays:
    """The profile's LayerArrays (cached by object identity; profiles are frozen)."""
    with _lock:
        hit = _cache.get(id(profile))
        if hit is not None and hit[0] is profile:
            _cache.move_to_end(id(profile))
            return hit[1]
    kept = [x for x in profile.layers if x.grad_bytes > 0 and x.exec_prob > 0]
    kept.sort(key=lambda x: x.ready_frac)
    pow2 = [pow2_ceil(x.grad_bytes) for x in kept]
    sizes = tuple(sorted(set(pow2)))
    index = {s: i for i, s in enumerate(sizes)}
    bits = [8.0 * x.grad_bytes * x.exec_prob for x in kept]
    klass = [index[p] for p in pow2]
    arrays = LayerArrays(
        names=tuple(x.name for x in kept),
        ready_frac=np.array([x.ready_frac for x in kept], dtype=float),
        bits=np.array(bits, dtype=float),
        klass=np.array(klass, dtype=np.intp),
        sizes=sizes,
        bits_list=bits,
        klass_list=klass,
    )
    with _lock:
        _cache[id(profile)] = (profile, arrays)
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return arrays


# -- DDP gradient buckets ---------------------------------------------------------------------------------


_bucket_cache: OrderedDict[tuple[int, tuple[tuple[str, ...], ...]], tuple[ModelProfile, ModelProfile]] = (
    OrderedDict()
)


def bucket_groups(
    profile: ModelProfile, *, cap_bytes: int, first_cap_bytes: int = DDP_FIRST_BUCKET_BYTES
) -> tuple[tuple[str, ...], ...]:
    """Layer names per gradient bucket, as PyTorch DDP fills them: in ready order, a bucket closes once it
    holds at least its cap (the first bucket's cap is `first_cap_bytes`, later ones `cap_bytes`)."""
    groups: list[tuple[str, ...]] = []
    current: list[str] = []
    size = 0
    cap = first_cap_bytes
    for layer in sorted(profile.layers, key=lambda x: x.ready_frac):
        current.append(layer.name)
        size += layer.grad_bytes
        if size >= cap:
            groups.append(tuple(current))
            current, size, cap = [], 0, cap_bytes
    if current:
        groups.append(tuple(current))
    return tuple(groups)


def bucketed(profile: ModelProfile, groups: tuple[tuple[str, ...], ...]) -> ModelProfile:
    """`profile` with its layers merged into one transfer per bucket of `groups`.

    A bucket is reduced once its last gradient is ready (its ready_frac is its members' largest) and
    carries every member's full gradient (DDP reduces the whole bucket even when a conditional layer did not
    run), so exec_prob is 1. When the profile's layer names do not match `groups` (another model), its own
    grouping at DDP's default caps is used. Results are cached per profile object.
    """
    key = (id(profile), groups)
    with _lock:
        hit = _bucket_cache.get(key)
    if hit is not None and hit[0] is profile:
        return hit[1]
    by_name = {layer.name: layer for layer in profile.layers}
    if sorted(by_name) != sorted(name for g in groups for name in g) or len(by_name) != len(profile.layers):
        groups = bucket_groups(profile, cap_bytes=int(DDP_BUCKET_CAP_MB * 2**20))
    merged = tuple(
        LayerGrad(
            name=f"bucket{i}",
            grad_bytes=sum(by_name[n].grad_bytes for n in g),
            ready_frac=max(by_name[n].ready_frac for n in g),
            exec_prob=1.0,
        )
        for i, g in enumerate(groups)
    )
    out = replace(profile, layers=tuple(sorted(merged, key=lambda x: x.ready_frac)))
    with _lock:
        _bucket_cache[key] = (profile, out)
        if len(_bucket_cache) > _CACHE_SIZE:
            _bucket_cache.popitem(last=False)
    return out
