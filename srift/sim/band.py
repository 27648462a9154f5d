"""Prediction bands: how far a run's measured mean iteration time may fall from the prediction.

Every input of a prediction carries a measured spread, and each becomes a term of the band:

* **compute** — each member's profile at its batch (`ModelProfile.compute_spread`: the host's drift
  between timing passes net of their sampling noise, over the runs a measured mean averages, plus the
  curve's error as a mean of passes; else the spread of the profile's own samples; else what an estimated
  profile declares: its `estimate.spread`, the estimator's error leaving one accelerator out);
* **network** — the bandwidth model's out-of-fold error spread for each size it is asked about
  (`BandwidthEstimate.residual_at`; the α-β prior's calibration spread);
* **stragglers** — the spread of one iteration (straggler draws, and with Monte Carlo the exchange per
  draw), which a run's mean over N iterations divides by √N;
* **terms** of the model measured by a probe (`extra_terms`, e.g. the overlap slowdown), each with the
  spread its probe measured.

A source's term is what it does to the prediction: the simulator runs again with that input one spread
slower (all members' compute at once: on one machine or one cloud their drifts go together) and the term
is ln(T_slower / T). Hidden compute or a link that is not the bottleneck thus adds little, as it should.
The terms are independent, so the band is log-normal with sigma = √Σ term² (`srift.domain.Band`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from srift.domain import (
    Band,
    BandwidthEstimate,
    BusBandwidthModel,
    ComputeCurve,
    FleetMember,
    ModelProfile,
    SpreadTerm,
)
from srift.domain.bandwidth import BusbwQuery, Collective, WrappedBandwidth

Z90 = 1.2815515655446004
"""Φ⁻¹(0.9): p10 and p90 of a normal lie this many standard deviations from its mean."""


class SlowerBandwidth(WrappedBandwidth):
    """A bandwidth model that answers exp(−spread) of the wrapped model's bus bandwidth, size by size:
    the model's answer one error spread too optimistic. `largest_spread` is the largest spread it applied."""

    def __init__(self, model: BusBandwidthModel) -> None:
        super().__init__(model)
        self.largest_spread = 0.0

    def answer(self, query: BusbwQuery) -> BandwidthEstimate:
        return self._slower(super().answer(query))

    def answer_collective(self, collective: Collective, query: BusbwQuery) -> BandwidthEstimate:
        """The same for any collective (sharded data parallelism, srift.bandwidth.collectives)."""
        return self._slower(super().answer_collective(collective, query))

    def _slower(self, est: BandwidthEstimate) -> BandwidthEstimate:
        spreads = [est.residual_at(i) for i in range(len(est.busbw_gbps))]
        self.largest_spread = max([self.largest_spread, *spreads])
        slower = tuple(b * math.exp(-x) for b, x in zip(est.busbw_gbps, spreads, strict=True))
        return replace(est, busbw_gbps=slower)


def communicates(fleet: Sequence[FleetMember]) -> bool:
    """Whether the fleet exchanges gradients at all (two or more VMs, or a VM with several GPUs)."""
    return sum(m.count for m in fleet) >= 2 or any(m.instance.devices >= 2 for m in fleet)


def scaled_profile(profile: ModelProfile, factor: float) -> ModelProfile:
    """The profile with forward, backward and the optimizer step `factor` times slower."""
    return replace(
        profile,
        forward=ComputeCurve(profile.forward.batches, tuple(t * factor for t in profile.forward.times_s)),
        backward=ComputeCurve(profile.backward.batches, tuple(t * factor for t in profile.backward.times_s)),
        update_s=profile.update_s * factor,
    )


def band_for(
    fleet: Sequence[FleetMember],
    *,
    bandwidth: BusBandwidthModel,
    iteration_s: float,
    iteration_sd_s: float,
    iterations: int,
    run: Callable[[Sequence[FleetMember], BusBandwidthModel], float],
    extra_terms: Sequence[SpreadTerm] = (),
    runs: int = 1,
) -> Band:
    """The band of a prediction of `iteration_s` (see the module docstring). `run(fleet, bandwidth)` is the
    simulator's mean iteration time for other inputs; `iteration_sd_s` the spread of one iteration;
    `iterations` how many iterations the measured mean averages, over `runs` runs taken at independent
    times (a validation case's repeats; 1 for a user's job)."""
    if iteration_s <= 0:
        return Band()
    terms: list[SpreadTerm] = []
    spreads = [m.profile.compute_spread(m.per_device_batch, runs=runs) for m in fleet]
    if any(s > 0 for s in spreads):
        slower = [
            replace(m, profile=scaled_profile(m.profile, math.exp(s))) if s > 0 else m
            for m, s in zip(fleet, spreads, strict=True)
        ]
        terms.append(
            SpreadTerm(
                "compute",
                max(spreads),
                max(0.0, math.log(run(slower, bandwidth) / iteration_s)),
                "the profiles' drift between timing passes at the batch, net of their sampling noise "
                f"(over {runs} run{'s' if runs != 1 else ''}; else the spread between repeats)"
                if not any(m.profile.estimate is not None for m in fleet)
                else "the estimated profiles' error, measured leaving one accelerator out (srift.estimate)",
            )
        )
    if communicates(fleet):
        slower_bw = SlowerBandwidth(bandwidth)
        t_slower = run(fleet, slower_bw)
        if slower_bw.largest_spread > 0:
            terms.append(
                SpreadTerm(
                    "network",
                    slower_bw.largest_spread,
                    max(0.0, math.log(t_slower / iteration_s)),
                    "the bandwidth model's out-of-fold error spread per size class",
                )
            )
    if iteration_sd_s > 0:
        one = iteration_sd_s / iteration_s
        terms.append(
            SpreadTerm(
                "stragglers",
                one,
                one / math.sqrt(max(iterations, 1)),
                f"the spread of one iteration (profiles' straggler_cv), over {iterations} iterations",
            )
        )
    terms.extend(extra_terms)
    return Band.of(tuple(terms))
