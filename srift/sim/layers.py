"""Per-profile arrays the simulator reuses across calls: ready fractions, expected bits, size classes.

A layer that runs with probability `exec_prob` < 1 (a conditional branch) contributes its *expected*
gradient, grad_bytes × exec_prob, to the exchange (Srift §4.1 samples the dataset for these probabilities);
its size class — what the bandwidth model is asked about — stays that of the full tensor, rounded up to a
power of two. Layers with no expected bytes are left out. Arrays are cached per profile object.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from srift.domain import ModelProfile
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
