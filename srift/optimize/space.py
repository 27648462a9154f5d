"""The optimizer's search space: candidate (instance type, market) offers, per-VM batch options, reachability.

A configuration picks, for some candidates, a count `n ≤ cap` and ONE per-VM batch `b` (Srift §4.4 insight
(2): all VMs of one type get the same batch, since sharing a type's samples unequally is never faster),
so that Σ n·b = global_batch exactly. Every plan must run as given under DDP and `DistributedSampler`, which
give each GPU (rank) the same whole number of samples: so `b = devices · k` with a whole per-GPU batch
`1 ≤ k ≤ max_batch` (the profile's). Which per-GPU batches are allowed is the `BatchPolicy`:

- `pow2_split` (default): every group's per-GPU batch is a power of two, except the group of the LAST
  candidate present (in the canonical candidate order, sorted by instance type name then market), which may
  take any whole per-GPU batch in range: that group takes the exact split of what remains, so global batches
  that are not a sum of powers of two stay reachable.
- `pow2`: every per-GPU batch is a power of two.
- `any`: every whole per-GPU batch in range (small problems only: the space grows with max_batch).

Candidates are built by `build_candidates`, which applies the market rule (a type's cheaper allowed market;
spot wins ties) and the availability caps. When a request allows several locations (regions, providers),
each (location, type) is its own candidate.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from srift.domain import (
    Config,
    Constraints,
    FleetMember,
    InstanceType,
    MarketChoice,
    ModelProfile,
    Offer,
    Prediction,
)
from srift.domain.catalog import Market
from srift.domain.geo import Location
from srift.domain.planning import BatchPolicy as BatchPolicy
from srift.domain.planning import Choice
from srift.errors import Infeasible, InvalidInput, NotFound
from srift.optimize.spot import RunRates, SpotOffer, SpotPolicy, fleet_rates

Group = tuple[int, int, int]
"""(candidate index, count, per-VM batch)."""
Groups = tuple[Group, ...]


def is_pow2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True, slots=True)
class Candidate:
    """One (instance type, market[, location]) the search may rent, with its profile and availability cap.

    `location` is set when the problem spans locations; None keeps the single-region behaviour.
    """

    offer: Offer
    profile: ModelProfile
    cap: int
    location: Location | None = None
    interruptions_per_s: float = 0.0
    spot_offer: SpotOffer | None = field(default=None, compare=False)
    """Trace laws of a spot offer (srift.optimize.spot.SpotOffer); None: its band rate alone."""

    @property
    def sort_key(self) -> tuple[str, str, str]:
        """Canonical order: instance type name, market, location."""
        return (self.name, self.market.value, self.location.key if self.location else "")

    @property
    def instance(self) -> InstanceType:
        return self.offer.instance

    @property
    def name(self) -> str:
        return self.offer.instance.name

    @property
    def market(self) -> Market:
        return self.offer.market

    @property
    def devices(self) -> int:
        return self.offer.instance.devices

    @property
    def min_vm_batch(self) -> int:
        """Smallest per-VM batch: one sample per GPU."""
        return self.offer.instance.devices

    @property
    def max_vm_batch(self) -> int:
        """Largest per-VM batch: the profile's per-device max_batch on every GPU."""
        return self.profile.max_batch * self.offer.instance.devices

    @property
    def price_usd_per_s(self) -> float:
        return self.offer.price_usd_per_s

    def floor_s(self, vm_batch: int) -> float:
        """Forward + backward seconds at this per-VM batch (less a CPU quota's fresh-quota saving): a lower
        bound of any iteration using it."""
        return self.profile.compute_floor_s(vm_batch / self.offer.instance.devices)

    def per_gpu_options(self, policy: BatchPolicy, *, upto: int | None = None) -> tuple[int, ...]:
        """Whole per-GPU batches a non-final group may use, ascending (with `upto`, only those ≤ it)."""
        top = self.profile.max_batch if upto is None else min(self.profile.max_batch, upto)
        if policy is BatchPolicy.ANY:
            return tuple(range(1, top + 1))
        return tuple(1 << e for e in range(top.bit_length()) if 1 << e <= top)

    def batch_options(self, policy: BatchPolicy, *, upto: int | None = None) -> tuple[int, ...]:
        """Per-VM batches a non-final group may use, ascending (with `upto`, only those ≤ it): devices ×
        each per-GPU option."""
        d = self.devices
        per_gpu = None if upto is None else upto // d
        return tuple(d * k for k in self.per_gpu_options(policy, upto=per_gpu))

    def runnable(self, batch: int) -> bool:
        """Whether `batch` samples per VM give every GPU the same whole number of samples within max_batch."""
        d = self.devices
        return batch % d == 0 and 1 <= batch // d <= self.profile.max_batch

    def final_allowed(self, batch: int, policy: BatchPolicy) -> bool:
        """Whether the last group present may use `batch`."""
        if not self.runnable(batch):
            return False
        return policy is not BatchPolicy.POW2 or is_pow2(batch // self.devices)


@dataclass(frozen=True, slots=True)
class Problem:
    """Candidates in canonical order (name, market), the user's constraints and the batch policy."""

    candidates: tuple[Candidate, ...]
    constraints: Constraints
    batch_policy: BatchPolicy = BatchPolicy.POW2_SPLIT
    notes: tuple[str, ...] = field(default=())
    spot: SpotPolicy | None = None

    def __post_init__(self) -> None:
        keys = [c.sort_key for c in self.candidates]
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise ValueError("candidates must be unique and sorted by (instance type, market, location)")

    def config(self, groups: Groups) -> Config:
        return Config(
            tuple(
                Choice(
                    instance_type=self.candidates[i].name,
                    market=self.candidates[i].market,
                    count=n,
                    batch=b,
                    location=self.candidates[i].location,
                )
                for i, n, b in groups
            )
        )

    def fleet(self, groups: Groups) -> tuple[FleetMember, ...]:
        return tuple(
            FleetMember(
                instance=self.candidates[i].instance,
                count=n,
                batch=b,
                profile=self.candidates[i].profile,
                location=self.candidates[i].location,
            )
            for i, n, b in groups
        )

    def usd_per_s(self, groups: Groups) -> float:
        return sum(n * self.candidates[i].price_usd_per_s for i, n, _ in groups)

    def interruptions_per_s(self, groups: Groups) -> float:
        """Λ = Σ count·λ over the spot VMs of `groups` (0 when interruptions are not priced in); a group with
        trace laws adds its fleet's Λ(count) instead (srift.optimize.spot.SpotOffer)."""
        total = 0.0
        for i, n, _ in groups:
            c = self.candidates[i]
            offer = c.spot_offer if c.interruptions_per_s > 0 else None
            total += offer.interruptions_per_s(n) if offer is not None else n * c.interruptions_per_s
        return total

    def run_rates(
        self, groups: Groups, *, iteration_s: float, usd_per_s: float, egress_usd_per_iteration: float
    ) -> RunRates:
        """A run of `groups` as srift.optimize.spot.fleet_rates sees it: each group's count, band rate and
        trace laws (the laws only where interruptions are priced in, as in `interruptions_per_s`)."""
        members = []
        for i, n, _ in groups:
            c = self.candidates[i]
            members.append((n, c.interruptions_per_s, c.spot_offer if c.interruptions_per_s > 0 else None))
        return fleet_rates(
            iteration_s=iteration_s,
            usd_per_s=usd_per_s,
            egress_usd_per_iteration=egress_usd_per_iteration,
            members=members,
        )

    def priced_in(self, groups: Groups, prediction: Prediction) -> Prediction:
        """`prediction` with spot interruptions priced in (expected time and cost; srift.optimize.spot)."""
        lam = self.interruptions_per_s(groups)
        if self.spot is None or lam <= 0:
            return prediction
        from srift.optimize.spot import expected_run

        iterations = self.constraints.iterations
        egress_each = prediction.egress_usd / iterations
        usd_per_s = (
            (prediction.cost_usd - prediction.egress_usd) / prediction.total_time_s
            if prediction.total_time_s > 0
            else 0.0
        )
        rates = self.run_rates(
            groups,
            iteration_s=prediction.iteration_s,
            usd_per_s=usd_per_s,
            egress_usd_per_iteration=egress_each,
        )
        expected = expected_run(rates, iterations=iterations, policy=self.spot)
        return replace(
            prediction,
            total_time_s=expected.time_s,
            cost_usd=expected.cost_usd,
            egress_usd=expected.egress_usd,
            uninterrupted_time_s=prediction.total_time_s,
            uninterrupted_cost_usd=prediction.cost_usd,
        )

    def floor_s(self, groups: Groups) -> float:
        """Largest forward + backward time over the groups: the compute-only lower bound of t_iter."""
        return max(self.candidates[i].floor_s(b) for i, _, b in groups)

    def gpus(self, groups: Groups) -> int:
        """Devices (GPUs, or 1 per CPU-only VM) of a configuration."""
        return sum(n * self.candidates[i].devices for i, n, _ in groups)

    def within_caps(self, groups: Groups, constraints: Constraints | None = None) -> bool:
        """Whether a configuration respects max_gpus and max_vms (of `constraints`, default the problem's)."""
        c = constraints or self.constraints
        if c.max_vms is not None and sum(n for _, n, _ in groups) > c.max_vms:
            return False
        return c.max_gpus is None or self.gpus(groups) <= c.max_gpus

    def in_space(self, groups: Groups) -> bool:
        """Whether `groups` is a configuration of this problem's space (module docstring)."""
        if not groups:
            return False
        idx = [i for i, _, _ in groups]
        if idx != sorted(set(idx)):
            return False
        total = 0
        for pos, (i, n, b) in enumerate(groups):
            cand = self.candidates[i]
            if not 1 <= n <= cand.cap:
                return False
            last = pos == len(groups) - 1
            if last:
                if not cand.final_allowed(b, self.batch_policy):
                    return False
            elif b not in cand.batch_options(self.batch_policy, upto=b):
                return False
            total += n * b
        return total == self.constraints.global_batch and self.within_caps(groups)


def build_candidates(
    *,
    offers: Sequence[Offer],
    profiles: Sequence[ModelProfile],
    market: MarketChoice,
    availability: Mapping[str, int] | None,
    default_cap: int,
    excluded: Sequence[str] = (),
    located: bool = False,
) -> tuple[tuple[Candidate, ...], tuple[str, ...]]:
    """Turn priced offers into candidates, one per instance type (and location); returns them and notes.

    Rules, each of which cannot lose the optimum:
    - market: of a type's allowed markets, keep the cheaper offer (spot on ties). The two offers rent the
      same hardware, so the simulator predicts the same time; the cheaper one is never worse for either
      objective or limit, and availability caps apply to the type, not the market. (With spot
      interruptions priced in a spot fleet is no longer the same run as an on-demand one; the plans
      service then also searches on-demand offers alone and keeps the better of the two expectations.)
    - profiles: a type needs a profile whose accelerator it matches (the first such profile given is used).
    - availability: when given, only the named types, each at most its count (0 leaves it out); otherwise
      every offered type with a profile, at most `default_cap` each. Types in `excluded` are left out.
      With `located` (offers from several locations) each (location, type) is a candidate of its own: a
      plain type name caps it in every location, `provider/region/type` in one location only.
    Raises InvalidInput naming `availability.<type>` for a type that is not offered or has no profile,
    and Infeasible naming `availability` when it allows no VM at all (empty, or every count 0).
    """
    by_key: dict[tuple[str, Location | None], list[Offer]] = {}
    for offer in offers:
        if not market.allows(offer.market):
            continue
        where = Location(offer.instance.provider, offer.region) if located else None
        by_key.setdefault((offer.instance.name, where), []).append(offer)
    kept: dict[tuple[str, Location | None], list[Offer]] = {}
    for key, group in by_key.items():
        group.sort(key=lambda o: (o.price_usd_per_hr, o.market is not Market.SPOT))
        kept[key] = group[:1]
    names = {name for name, _ in kept}
    notes: list[str] = []
    wanted: dict[tuple[str, Location | None], int]
    if availability is not None:
        wanted = {}
        for raw, cap in availability.items():
            if cap < 0:
                raise InvalidInput(
                    f"{cap} is negative", hint="give a maximum count ≥ 0", field=f"availability.{raw}"
                )
            name, where = _availability_key(raw, located=located)
            keys = [k for k in kept if k[0] == name and (where is None or k[1] == where)]
            if not keys:
                close = difflib.get_close_matches(name, sorted(names), n=3)
                place = f" in {where.key}" if where is not None else " in this region"
                offered = "offer" if market is MarketChoice.ANY else f"{market.value} offer"
                raise NotFound(
                    f"unknown instance type {name!r} (no {offered}{place})",
                    hint=f"did you mean {', '.join(close)}?"
                    if close
                    else "list types with `srift catalog list`",
                    field=f"availability.{raw}",
                )
            for k in keys:
                if where is not None or k not in wanted:
                    wanted[k] = cap
        wanted = {k: v for k, v in wanted.items() if v > 0}
        if not wanted:  # a valid request with no answer (409, as when no fleet meets the limits)
            raise Infeasible(
                "availability allows no VM: it lists no type with a count above 0",
                hint="give at least one type a count of 1 or more, or leave availability out to use every "
                "offered type (at most max_count_per_type of each)",
                field="availability",
            )
    else:
        wanted = dict.fromkeys(kept, default_cap)
    skip = set(excluded)
    out: list[Candidate] = []
    # The first profile of each accelerator name, in order: the first profile a type matches is one of
    # these (a plan by model passes every stored run of the model, most of one accelerator).
    first_of: dict[str, ModelProfile] = {}
    for p in profiles:
        first_of.setdefault(p.accelerator, p)
    for key in sorted(wanted, key=lambda k: (k[0], k[1].key if k[1] else "")):
        name, where = key
        if name in skip:
            notes.append(f"{name} left out (interrupted earlier)")
            continue
        offer = kept[key][0]
        instance = offer.instance
        profile = next((p for a, p in first_of.items() if instance.matches_accelerator(a)), None)
        if profile is None:
            if availability is not None:
                raise InvalidInput(
                    f"no profile covers {name} (accelerator {instance.accelerator})",
                    hint=f"profile the model on {instance.accelerator} or leave {name} out",
                    field=f"availability.{name}",
                )
            continue
        out.append(Candidate(offer=offer, profile=profile, cap=wanted[key], location=where))
    out.sort(key=lambda c: c.sort_key)
    return tuple(out), tuple(notes)


def _availability_key(raw: str, *, located: bool) -> tuple[str, Location | None]:
    """`type` or, when located, `provider/region/type` (one location's pool)."""
    if "/" not in raw:
        return raw, None
    parts = raw.split("/")
    if not located or len(parts) != 3 or not all(parts):
        raise InvalidInput(
            f"{raw!r} is not an instance type"
            + ("" if located else " (a location prefix needs regions or providers in the request)"),
            hint="name a type (g4dn.xlarge), or provider/region/type when the plan may span locations",
            field=f"availability.{raw}",
        )
    return parts[2], Location(parts[0], parts[1])


def reachable(
    problem: Problem, *, deadline: float | None = None, clock: Callable[[], float] = time.perf_counter
) -> bool:
    """True when some configuration of the space sums to the global batch (limits aside).

    Quick check first (one homogeneous group), then a bitset of the sums reachable by non-final groups of
    the candidates before each one, tested against that candidate's possible final groups. Past `deadline`
    (`clock` seconds, perf_counter by default) the answer is True: unknown, and the search itself will
    find out.
    """
    g = problem.constraints.global_batch
    policy = problem.batch_policy
    for cand in problem.candidates:
        for n in range(1, cand.cap + 1):
            if g % n == 0 and cand.final_allowed(g // n, policy):
                return True
    mask = (1 << (g + 1)) - 1
    reach = 1
    for cand in problem.candidates:
        lo, hi, d = cand.min_vm_batch, cand.max_vm_batch, cand.devices
        finals = 0
        for n in range(1, cand.cap + 1):
            top = min(hi, g // n) // d * d
            if top < lo:
                break
            if policy is BatchPolicy.POW2:
                for b in cand.batch_options(policy, upto=top):
                    if b <= top:
                        finals |= 1 << (g - n * b)
            else:
                finals |= _progression(step=n * d, count=(top - lo) // d + 1) << (g - n * top)
        if reach & finals:
            return True
        grown = reach
        for b in cand.batch_options(policy, upto=g):
            if deadline is not None and clock() > deadline:
                return True
            for n in range(1, cand.cap + 1):
                if n * b >= g:
                    break
                grown |= (reach << (n * b)) & mask
        reach = grown
    return False


def _progression(*, step: int, count: int) -> int:
    """An int with `count` set bits at 0, step, 2·step, …, built by doubling."""
    bits, have = 1, 1
    while have < count:
        more = min(have, count - have)
        bits |= (bits & ((1 << (more * step)) - 1)) << (have * step)
        have += more
    return bits
