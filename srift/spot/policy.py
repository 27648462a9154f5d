"""Deadline policies for a spot run, and the tick simulator that runs a job through availability timelines.

A job is `spot_work_s` of work on its spot fleet (the plan) or `od_work_s` on its on-demand fallback fleet,
each billed per second while it runs (restarts included). Time advances in ticks of `tick_s`; at each tick
the spot fleet can run or not (a timeline row: a trace window, or a draw from a FleetLaw). When the fleet
runs on spot and capacity goes, the work since the last checkpoint (every `checkpoint_s` of work) is lost.
Every start or switch (spot or on-demand) costs `restart_s` of billed time before training goes on; a
voluntary switch checkpoints first. After the timeline ends an unfinished run finishes on on-demand.

Policies (what to run at each tick), all four simulated by the same loop, row by row in numpy:

- `on_demand`: the fallback fleet from the start.
- `spot_only`: spot whenever there is capacity, waiting it out when there is none (Srift's restart-in-place
  model, the one the optimizer's closed form prices); no deadline rule.
- `spot_then_on_demand`: spot while it lasts; at the first interruption (or no capacity at the start), the
  fallback fleet to the end.
- `uniform_progress`: Can't Be Late's Uniform Progress (Wu et al., NSDI '24, §4): spot when there is
  capacity; without it, on-demand when progress is behind the uniform line t/D, else wait; on on-demand,
  back to spot (or to waiting) only once ahead of the line by 2 restarts (its hysteresis); and its safety
  net: on-demand whenever waiting one more tick could leave too little time to finish on on-demand.
- `srift`: Srift's plan-aware policy. It knows the plan's fitted FleetLaw (how long capacity lasts and how
  long it stays away, by the age of the current state) and both fleets' speeds and prices, and acts as the
  cheapest-in-expectation policy of a dynamic programme over (time, progress, capacity state and age,
  what runs); the same safety net makes every deadline it can meet on on-demand a deadline it meets.
  The programme sees the law through a coarse chain (age buckets, progress levels, half a checkpoint lost
  per preemption), so on some plans it is not the cheapest policy even under the law it was solved for:
  on the public traces' 1×p3.2xlarge us-east-2 12 h job at 2× slack its own Monte Carlo put it 5 % above
  Uniform Progress (it left spot for on-demand earlier than the line needed; docs/BENCHMARKS.md "spot on
  real traces", 2026-11-28). And the law is fitted on one stretch of a market that moves: on the public
  traces' 4-day fit/check folds a zone's mean capacity gap or up time changed several-fold between the
  halves (4×p3.2xlarge us-east-2a: capacity gaps of 7.4 h on the even blocks, 0.6 h on the odd). Where
  the programme bet on the fitted law, that cost it on the other half: 13 of 192 (plan, fold) pairs above
  Uniform Progress, up to +20 % (4×p3.2xlarge us-east-2, 12 h, 2×, 4-day blocks, fit even), where it left
  available capacity idle (its fitted shape < 1 said fresh capacity goes soon) and ran on-demand while
  ahead of the line. So Srift's policy is bounded twice:
  - within Uniform Progress's envelope: it runs on-demand only where Uniform Progress's rule (before its
    safety net) would, and takes spot wherever that rule would take the capacity; what the programme may
    still choose is to wait without capacity where the rule would pay for on-demand, and to leave
    on-demand sooner. Its bets are then all on capacity coming back, never against it.
  - kept only where robustly cheaper: plan_programme runs it and Uniform Progress through the same
    timelines (common random numbers) drawn from the law and from the two corners of what the law's fit
    allows (plausible_laws: capacity lasting longer and coming back sooner, and the reverse, each mean
    moved by UNCERTAINTY_STANDARD_ERRORS standard errors of its estimate from the fitted runs), and keeps
    the programme only where it is cheaper by more than the draws' noise (SELECTION_STANDARD_ERRORS) on
    all three, without meeting the deadline less often; elsewhere `srift` is Uniform Progress.
  Under the plan's law `srift` thus never costs more than Uniform Progress in expectation; on a real
  trace it can, where the market moved beyond what the fit allowed.

The safety net (for `uniform_progress` and `srift`): at a tick starting at t, keep or start spot, or wait,
only when D − (t + tick) ≥ (1 − p)·od_work_s + restart_s, p being the progress a preemption (spot) or the
wait would leave; else run on-demand. Once on on-demand at a point where this held, the run finishes by D.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import IntEnum, StrEnum

import numpy as np

from srift.errors import require_number
from srift.spot.model import DurationLaw, FleetLaw

HYSTERESIS_RESTARTS = 2.0
"""Uniform Progress leaves on-demand once ahead of the line by this many restarts (Can't Be Late §4)."""
DP_MAX_STEPS = 400
DP_PROGRESS_LEVELS = 200
DP_AGE_BUCKETS = 10
SELECTION_RUNS = 400
"""Timelines drawn from the law to choose between the programme and Uniform Progress (a choice: the cost
difference of two policies on the same draws has a standard error well under 1 % at this count)."""
SELECTION_SEED = 0x5E1EC7
SELECTION_STANDARD_ERRORS = 2.0
"""The programme is kept only where its mean cost on the draws is below Uniform Progress's by more than
this many standard errors of the paired difference (a choice: about 97.5 % one-sided confidence that it is
the cheaper under the law; on a tie within the draws' noise, Uniform Progress)."""
UNCERTAINTY_STANDARD_ERRORS = 2.0
"""How far the corners of plausible_laws lie from the fitted means, in standard errors of each mean's
estimate (a choice, the same two standard errors as SELECTION_STANDARD_ERRORS; not fitted to any check)."""
MISS_PENALTY = 10.0
"""In the dynamic programme, a run unfinished at the deadline costs (1 + this) × finishing it on on-demand:
a finite stand-in for "never", so that values near the edge of what can still be met stay comparable (the
safety net, not this penalty, is what keeps the deadline)."""


class DeadlinePolicy(StrEnum):
    """What a spot run does when capacity comes and goes (module docstring)."""

    ON_DEMAND = "on_demand"
    SPOT_ONLY = "spot_only"
    SPOT_THEN_ON_DEMAND = "spot_then_on_demand"
    UNIFORM_PROGRESS = "uniform_progress"
    SRIFT = "srift"


class Mode(IntEnum):
    """What runs during a tick."""

    IDLE = 0
    SPOT = 1
    ON_DEMAND = 2


_IDLE, _SPOT, _ON_DEMAND = int(Mode.IDLE), int(Mode.SPOT), int(Mode.ON_DEMAND)
"""Mode's values as plain ints for the per-tick code (`simulate` and the policies it asks every tick): on
Python 3.11 each `Mode.X` goes through EnumType.__getattr__, about a twelfth of tests/spot/test_policy.py's
time (py-spy) when the tick loop named them."""


TIE_PREFERENCE = (Mode.SPOT, Mode.IDLE, Mode.ON_DEMAND)
"""The dynamic programme's choice among actions whose expected costs are equal to rounding (_tie_tolerance).

Such ties are structural, not rare: where the chain says nothing can change before the step after, doing a
thing now or a step later costs the same. Without capacity and with too little time left to use spot
safely, waiting a step then running on-demand costs what on-demand now does; with capacity that the chain
says cannot end within the step (an empirical law with no run ending at that age), waiting a step then
running spot costs what spot now does. On the public traces' plans (the 720 programmes of "spot on real
traces" in docs/BENCHMARKS.md) a tenth of the decisions with more than one admissible action were exact
ties; of those within a relative 1e-9, 28 % were waiting against on-demand and 72 % waiting against spot.
The order (a choice):

- spot before waiting: the capacity in hand is the surer thing if the law is wrong (a run that went on is
  only further along), it keeps more slack, and it is what Uniform Progress does with capacity;
- waiting before on-demand: at equal cost under the law, waiting keeps for free the chance that capacity
  comes back sooner than the law says (the envelope takes it where Uniform Progress would), and the safety
  net keeps the deadline: the programme's bets stay on capacity coming back, never against it (module
  docstring);
- spot before on-demand: both run; spot is the cheaper fleet per second.

Before the tolerance (2026-12-07) the programme tried waiting, spot and on-demand in turn and kept the first
of exactly equal totals: the same order but for spot against waiting, and where rounding split a tie, the
rounding's choice."""


@dataclass(frozen=True, slots=True)
class SpotJob:
    """A run to place: its work and price on the spot fleet and on the on-demand fallback, its deadline."""

    spot_work_s: float
    spot_usd_per_s: float
    od_work_s: float
    od_usd_per_s: float
    deadline_s: float
    checkpoint_s: float
    restart_s: float

    def __post_init__(self) -> None:
        for name in ("spot_work_s", "od_work_s", "deadline_s", "checkpoint_s"):
            require_number(
                getattr(self, name), field=name, hint="give a positive time", positive=True, what=name
            )
        for name in ("spot_usd_per_s", "od_usd_per_s", "restart_s"):
            require_number(getattr(self, name), field=name, hint="give a number ≥ 0", what=name)

    @property
    def od_cost_usd(self) -> float:
        """What the run costs on on-demand from the start (one restart: the launch)."""
        return (self.od_work_s + self.restart_s) * self.od_usd_per_s

    @property
    def od_time_s(self) -> float:
        return self.od_work_s + self.restart_s

    @property
    def slack(self) -> float:
        """The deadline over the on-demand time (1.3: 30 % more time than on-demand needs)."""
        return self.deadline_s / self.od_time_s


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """Per run (row): when it finished, what it cost, whether it met the deadline, and how it ran."""

    finish_s: np.ndarray
    cost_usd: np.ndarray
    met: np.ndarray
    spot_s: np.ndarray
    od_s: np.ndarray
    preemptions: np.ndarray
    past_window: np.ndarray

    @property
    def runs(self) -> int:
        return int(self.finish_s.size)

    def summary(self) -> dict[str, float | int]:
        """Means, quantiles and shares over the rows (the figures replays and predictions report)."""
        f, c = self.finish_s, self.cost_usd
        return {
            "runs": self.runs,
            "p_meets_deadline": float(self.met.mean()),
            "deadline_misses": int((~self.met).sum()),
            "mean_cost_usd": float(c.mean()),
            "cost_p10_usd": float(np.quantile(c, 0.1)),
            "cost_p50_usd": float(np.quantile(c, 0.5)),
            "cost_p90_usd": float(np.quantile(c, 0.9)),
            "mean_finish_s": float(f.mean()),
            "finish_p10_s": float(np.quantile(f, 0.1)),
            "finish_p50_s": float(np.quantile(f, 0.5)),
            "finish_p90_s": float(np.quantile(f, 0.9)),
            "mean_preemptions": float(self.preemptions.mean()),
            "mean_spot_share": float(np.mean(self.spot_s / np.maximum(self.spot_s + self.od_s, 1e-9))),
            "past_window": int(self.past_window.sum()),
        }


@dataclass
class _State:
    now_s: float
    avail: np.ndarray
    age_s: np.ndarray
    progress: np.ndarray
    checkpointed: np.ndarray
    mode: np.ndarray
    interrupted: np.ndarray
    od_locked: np.ndarray


Decider = Callable[[SpotJob, _State, float], np.ndarray]


def _safe(job: SpotJob, state: _State, tick_s: float, base: np.ndarray) -> np.ndarray:
    """Whether waiting or running spot this tick keeps the deadline within on-demand's reach."""
    left = job.deadline_s - (state.now_s + tick_s)
    return left >= (1.0 - base) * job.od_work_s + job.restart_s - 1e-9


def _with_safety_net(
    job: SpotJob, state: _State, tick_s: float, want: np.ndarray, *, lock: bool
) -> np.ndarray:
    """`want`, with on-demand wherever waiting or spot would leave too little time; `lock`: once the net
    fired for a run, it stays on on-demand (Uniform Progress); else the net is asked again every tick."""
    spot_ok = _safe(job, state, tick_s, np.where(state.mode == _SPOT, state.checkpointed, state.progress))
    wait_ok = _safe(job, state, tick_s, state.progress)
    out = want.copy()
    out[(want == _SPOT) & ~spot_ok] = _ON_DEMAND
    out[(want == _IDLE) & ~wait_ok] = _ON_DEMAND
    if lock:
        state.od_locked |= (out == _ON_DEMAND) & (want != _ON_DEMAND)
        out[state.od_locked] = _ON_DEMAND
    return out


def _on_demand(job: SpotJob, state: _State, tick_s: float) -> np.ndarray:
    return np.full(state.avail.shape, _ON_DEMAND, dtype=np.int8)


def _spot_only(job: SpotJob, state: _State, tick_s: float) -> np.ndarray:
    return np.where(state.avail, _SPOT, _IDLE).astype(np.int8)


def _spot_then_on_demand(job: SpotJob, state: _State, tick_s: float) -> np.ndarray:
    gone = state.interrupted | ((state.mode == _IDLE) & ~state.avail)
    state.interrupted |= gone
    return np.where(gone, _ON_DEMAND, _SPOT).astype(np.int8)


def _uniform_progress(job: SpotJob, state: _State, tick_s: float) -> np.ndarray:
    return _with_safety_net(job, state, tick_s, _uniform_progress_want(job, state), lock=True)


def _uniform_progress_want(job: SpotJob, state: _State) -> np.ndarray:
    """What Uniform Progress's rule asks for in `state`, before its safety net."""
    line = state.now_s / job.deadline_s
    ahead = state.progress - line
    margin = HYSTERESIS_RESTARTS * job.restart_s / job.od_work_s
    on_od = state.mode == _ON_DEMAND
    behind = ahead < 0
    leave_od = ahead >= margin
    want = np.where(
        state.avail,
        np.where(on_od & ~leave_od, _ON_DEMAND, _SPOT),
        np.where(on_od, np.where(leave_od, _IDLE, _ON_DEMAND), np.where(behind, _ON_DEMAND, _IDLE)),
    ).astype(np.int8)
    return want


@dataclass(frozen=True)
class Programme:
    """Srift's policy for one job and law: the action per (step, progress level, capacity state, mode),
    applied within Uniform Progress's envelope, or Uniform Progress itself where the programme was not
    robustly the cheaper of the two on timelines drawn from the law and its plausible corners
    (`uses_programme` False; module docstring). `expected_cost_usd` is the programme's own value;
    `drawn_cost_usd` the mean cost of (programme, Uniform Progress) on the selection draws."""

    step_s: float
    levels: int
    edges_s: np.ndarray
    action: np.ndarray
    expected_cost_usd: float
    uses_programme: bool = True
    drawn_cost_usd: tuple[float, float] | None = None

    def decide(self, job: SpotJob, state: _State, tick_s: float) -> np.ndarray:
        if not self.uses_programme:
            return _uniform_progress(job, state, tick_s)
        return self._programme_decide(job, state, tick_s)

    def _programme_decide(self, job: SpotJob, state: _State, tick_s: float) -> np.ndarray:
        want = self.programme_want(state)
        # Within Uniform Progress's envelope (module docstring): on-demand only where its rule pays for
        # it too, and spot wherever its rule would take the capacity.
        up = _uniform_progress_want(job, state)
        outside = ((want == _ON_DEMAND) & (up != _ON_DEMAND)) | (
            (want == _IDLE) & state.avail & (up == _SPOT)
        )
        want[outside] = up[outside]
        return _with_safety_net(job, state, tick_s, want, lock=False)

    def programme_want(self, state: _State) -> np.ndarray:
        """What the programme's own table asks for in `state`, before the envelope and the safety net."""
        k = min(int(state.now_s // self.step_s), self.action.shape[0] - 1)
        j = np.clip(np.floor(state.progress * self.levels).astype(np.int64), 0, self.levels - 1)
        b = np.clip(np.searchsorted(self.edges_s, state.age_s, side="right") - 1, 0, self.edges_s.size - 1)
        s = np.where(state.avail, 0, 1) * self.edges_s.size + b
        want: np.ndarray = self.action[k, j, s, state.mode].astype(np.int8)
        want[(want == _SPOT) & ~state.avail] = _IDLE
        return want


def _age_chain(law: DurationLaw, step_s: float, buckets: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bucket edges (0, h, 2h, 4h, ...), the chance to leave the state during a step from each bucket,
    and the chance to move to the next bucket (staying): a semi-Markov run length as a Markov chain."""
    edges = np.concatenate(([0.0], step_s * 2.0 ** np.arange(buckets - 1)))
    width = np.diff(np.concatenate((edges, [np.inf])))
    age = np.where(np.isfinite(width), edges + np.minimum(width, step_s * 2**buckets) / 2.0, edges * 1.5)
    age[0] = 0.0
    leave = 1.0 - law.sf(age + step_s) / np.maximum(law.sf(age), 1e-300)
    advance = np.where(np.isfinite(width), np.minimum(step_s / width, 1.0), 0.0)
    return edges, np.clip(leave, 0.0, 1.0), advance


def plan_programme(
    job: SpotJob, law: FleetLaw, *, tick_s: float, selection_runs: int = SELECTION_RUNS
) -> Programme:
    """Srift's policy for `job` on the fleet `law` describes: backward induction over the deadline, kept
    only where it beats Uniform Progress on `selection_runs` timelines drawn from each of plausible_laws
    (module docstring; 0: keep it unchecked). `drawn_cost_usd`: the two policies' mean cost on the draws
    from the fitted law itself."""
    programme = _solve_programme(job, law, tick_s=tick_s)
    if selection_runs <= 0:
        return programme
    ticks = math.ceil(job.deadline_s / tick_s) + 1
    keep = True
    drawn_cost: tuple[float, float] | None = None
    for variant in plausible_laws(law):
        drawn = variant.timeline(
            np.random.default_rng(SELECTION_SEED), runs=selection_runs, ticks=ticks, tick_s=tick_s
        )
        mine = simulate(job, drawn, tick_s=tick_s, policy=DeadlinePolicy.SRIFT, law=law, programme=programme)
        theirs = simulate(job, drawn, tick_s=tick_s, policy=DeadlinePolicy.UNIFORM_PROGRESS, law=law)
        diff = mine.cost_usd - theirs.cost_usd
        margin = (
            SELECTION_STANDARD_ERRORS * float(diff.std(ddof=1)) / math.sqrt(diff.size)
            if diff.size > 1
            else 0.0
        )
        keep = keep and bool(float(diff.mean()) + margin < 0.0 and mine.met.mean() >= theirs.met.mean())
        if drawn_cost is None:
            drawn_cost = (float(mine.cost_usd.mean()), float(theirs.cost_usd.mean()))
        if not keep:
            break
    return replace(programme, uses_programme=keep, drawn_cost_usd=drawn_cost)


def _mean_standard_error(law: DurationLaw, runs: int) -> float:
    """The relative standard error of a law's mean fitted from `runs` runs: its coefficient of variation
    over √runs (the mean of n independent runs)."""
    mean = law.mean_s
    sd = math.sqrt(max(law.second_moment_s2 - mean * mean, 0.0))
    return sd / mean / math.sqrt(max(runs, 1))


def plausible_laws(law: FleetLaw) -> list[FleetLaw]:
    """The law, and the two corners of what its fit allows: capacity that lasts longer and comes back
    sooner (the optimistic corner), and the reverse, each mean moved by UNCERTAINTY_STANDARD_ERRORS of its
    estimate on a log scale (module docstring)."""
    k = UNCERTAINTY_STANDARD_ERRORS
    up = math.exp(k * _mean_standard_error(law.up, law.up_runs))
    gap = math.exp(k * _mean_standard_error(law.gap, law.gap_runs))
    out = [law]
    for f_up, f_gap in ((up, 1.0 / gap), (1.0 / up, gap)):
        u, g = law.up.scaled(f_up), law.gap.scaled(f_gap)
        out.append(replace(law, up=u, gap=g, availability=u.mean_s / (u.mean_s + g.mean_s), starts=None))
    return out


def _solve_programme(job: SpotJob, law: FleetLaw, *, tick_s: float) -> Programme:
    """The dynamic programme for `job` on `law` (module docstring), unchecked against Uniform Progress.

    At every (step, progress level, capacity state, last mode) it takes the cheapest admissible action in
    expectation; actions whose expected costs differ by no more than rounding can explain (_tie_tolerance)
    count as equal and go to TIE_PREFERENCE, so that a platform's rounding (another BLAS, another
    contraction order, an input moved by an ulp) cannot change the table."""
    step = max(tick_s, job.restart_s, job.deadline_s / DP_MAX_STEPS)
    steps = max(1, math.ceil(job.deadline_s / step))
    levels = DP_PROGRESS_LEVELS
    q = np.arange(levels + 1) / levels
    edges, trans = _capacity_chain(law, step)
    ns = trans.shape[0]
    up_state = np.arange(ns) < ns // 2
    rtol = _tie_tolerance(steps, ns)
    # Expected work lost to a preemption (half a checkpoint interval), and the most it can be (the net's).
    loss = min(job.checkpoint_s, job.spot_work_s) / 2.0 / job.spot_work_s
    worst = min(job.checkpoint_s, job.spot_work_s) / job.spot_work_s
    # V[j, s, m]: expected cost to go; m = what ran last step (idle/spot/od). After the last step the run
    # must have finished: anything left is a miss.
    unfinished = (1.0 + MISS_PENALTY) * job.od_usd_per_s * (job.restart_s + (1.0 - q) * job.od_work_s)
    v_next = np.repeat(np.repeat(unfinished[:, None, None], ns, axis=1), 3, axis=2)
    v_next[levels] = 0.0
    action = np.zeros((steps, levels, ns, 3), dtype=np.int8)
    # A step on a fleet from every level, with the restart a switch costs (over > 0) or without.
    runs = {
        (act, switch): _FleetStep.of(
            job, act, q, over=job.restart_s if switch else 0.0, step_s=step, loss=loss
        )
        for act in (Mode.SPOT, Mode.ON_DEMAND)
        for switch in (False, True)
    }
    for k in range(steps - 1, -1, -1):
        left = job.deadline_s - (k + 1) * step
        # Expected cost-to-go after the step, per next-state mode, as a function of progress (j, s_now,
        # m_next): a matmul batched over the levels (an einsum gives the same to rounding, ~14x slower).
        ev = trans @ v_next
        # Spot: capacity next step decides whether the run goes on (spot) or lost work (idle).
        ran = {
            key: run.total(ev[:, :, Mode.ON_DEMAND])
            if key[0] == Mode.ON_DEMAND
            else run.spot_total(v_next[:, :, Mode.SPOT], v_next[:, :, Mode.IDLE], trans, up_state)
            for key, run in runs.items()
        }
        totals = np.empty((len(TIE_PREFERENCE), levels + 1, ns, 3))
        ok = np.empty(totals.shape, dtype=bool)
        for i, act in enumerate(TIE_PREFERENCE):
            for m in Mode:
                if act == Mode.IDLE:
                    totals[i, :, :, m] = ev[:, :, Mode.IDLE]
                    safe = left >= (1.0 - q) * job.od_work_s + job.restart_s - 1e-9
                    ok[i, :, :, m] = safe[:, None]
                elif act == Mode.ON_DEMAND:
                    totals[i, :, :, m] = ran[act, m != act]
                    ok[i, :, :, m] = True
                else:
                    totals[i, :, :, m] = ran[act, m != act]
                    base = np.maximum(q - worst, 0.0) if m == Mode.SPOT else q
                    safe = left >= (1.0 - base) * job.od_work_s + job.restart_s - 1e-9
                    ok[i, :, :, m] = up_state[None, :] & safe[:, None]
        best, choice = _cheapest(totals, ok, rtol)
        best[levels] = 0.0
        v_next = best
        action[k] = choice[:levels]
    nb = ns // 2
    start_state = np.array(
        [law.model_availability] + [0.0] * (nb - 1) + [1 - law.model_availability] + [0.0] * (nb - 1)
    )
    expected = float(start_state @ v_next[0, :, Mode.IDLE])
    return Programme(step_s=step, levels=levels, edges_s=edges, action=action, expected_cost_usd=expected)


def _capacity_chain(law: FleetLaw, step_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The age-bucket edges and the transition matrix over capacity states of one step: index s =
    0..DP_AGE_BUCKETS-1 up (by age bucket), then the same buckets down (_age_chain per state)."""
    nb = DP_AGE_BUCKETS
    edges, up_leave, up_adv = _age_chain(law.up, step_s, nb)
    _, down_leave, down_adv = _age_chain(law.gap, step_s, nb)
    trans = np.zeros((2 * nb, 2 * nb))
    for b in range(nb):
        for off, leave, adv, other in ((0, up_leave, up_adv, nb), (nb, down_leave, down_adv, 0)):
            stay = 1.0 - leave[b]
            older = min(b + 1, nb - 1)
            trans[off + b, other] += leave[b]
            trans[off + b, off + older] += stay * adv[b]
            trans[off + b, off + b] += stay * (1.0 - adv[b])
    return edges, trans


def _tie_tolerance(steps: int, states: int) -> float:
    """The relative difference of two expected costs in the programme that rounding can explain.

    Every total is a sum of nonnegative terms (prices × seconds, and probabilities or interpolation weights
    times the next step's totals), so its relative rounding error is at most the unit roundoff (eps / 2)
    times the number of roundings on its longest chain of operations, to first order. A step adds at most
    2·states of them in its two contractions over the capacity states (the cost-to-go after the step, and
    spot's next-state mix), and a few more (≤ 8, generously) in the interpolation between levels, the
    step's own cost and the transition probabilities themselves; over `steps` steps of backward induction
    that is δ ≤ steps·(2·states + 8)·eps / 2. Two computations of the same totals (another BLAS, another
    summation order, an input moved by an ulp) then differ by at most 2δ, and this allows twice that:
    2·steps·(2·states + 8)·eps, 8.5e-12 at 400 steps and 20 states (a thousandth of a cent on $1,000). A
    worst-case bound: the einsum and matmul contractions give values 2.2e-15 apart at most (relative) on the
    public traces' plans. Differences above it are the law's, and then the cheaper action is taken as before.
    The tolerance moves the edge of a tie from 0, where a tenth of the decisions sit, to where few do (about
    0.07 % of them per decade of relative gap around 1e-11). On those 720 programmes no action moves when
    the contraction changes or a price or the law moves by a relative 1e-15; before, the contraction moved
    actions in 485 programmes, the on-demand price in 591, the spot price in 279."""
    return 2.0 * steps * (2 * states + 8) * float(np.finfo(np.float64).eps)


def _cheapest(totals: np.ndarray, ok: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Per state, the action to take and its total: among the admissible ones (`ok`) whose totals are within
    `rtol` (relative) of the lowest, the first in TIE_PREFERENCE (totals and ok: one row per action, in that
    order). Without a near-tie that is the cheapest; with one, the choice is the preference's, not the
    rounding's. The total kept is the chosen action's own, so that the values are the chosen policy's."""
    masked = np.where(ok, totals, np.inf)
    lowest = masked.min(axis=0)
    first = np.argmax(masked <= lowest * (1.0 + rtol), axis=0)
    best: np.ndarray = np.take_along_axis(masked, first[None], axis=0)[0]
    choice: np.ndarray = np.asarray(TIE_PREFERENCE, dtype=np.int8)[first]
    return best, choice


@dataclass(frozen=True)
class _Interp:
    """Linear interpolation of per-level values (len(x), n) at fixed points x_new along the first axis, per
    column; beyond the grid: the end. Indices and weights are found once, the values change every step."""

    idx: np.ndarray
    below: np.ndarray
    above: np.ndarray

    @classmethod
    def at(cls, x_new: np.ndarray, x: np.ndarray) -> _Interp:
        idx = np.clip(np.searchsorted(x, x_new, side="right") - 1, 0, x.size - 2)
        w = np.clip((x_new - x[idx]) / (x[idx + 1] - x[idx]), 0.0, 1.0)
        return cls(idx=idx, below=(1.0 - w)[:, None], above=w[:, None])

    def __call__(self, values: np.ndarray) -> np.ndarray:
        out: np.ndarray = values[self.idx] * self.below + values[self.idx + 1] * self.above
        return out


@dataclass(frozen=True)
class _FleetStep:
    """One programme step on a fleet (spot or on-demand) from every progress level q, `over` seconds of it
    spent restarting: its cost, whether it finishes the run, and where it leaves progress (and, on spot,
    where a preemption leaves it: `loss` of the work back)."""

    cost: np.ndarray
    finish: np.ndarray
    ahead: _Interp
    lost: _Interp

    @classmethod
    def of(
        cls, job: SpotJob, act: Mode, q: np.ndarray, *, over: float, step_s: float, loss: float
    ) -> _FleetStep:
        speed = 1.0 / (job.spot_work_s if act == Mode.SPOT else job.od_work_s)
        usd = job.spot_usd_per_s if act == Mode.SPOT else job.od_usd_per_s
        q_new = q + max(step_s - over, 0.0) * speed
        finish = q_new >= 1.0 - 1e-12
        cost = np.where(finish, (over + (1.0 - q) / speed) * usd, step_s * usd)
        return cls(
            cost=cost,
            finish=finish,
            ahead=_Interp.at(q_new, q),
            lost=_Interp.at(np.maximum(q_new - loss, 0.0), q),
        )

    def total(self, after: np.ndarray) -> np.ndarray:
        """The step's cost and, unless it finished the run, `after` (j, s) at the progress it reaches."""
        return self._plus(self.ahead(after))

    def spot_total(
        self, cont: np.ndarray, lost: np.ndarray, trans: np.ndarray, up_state: np.ndarray
    ) -> np.ndarray:
        """A spot step's total: the run goes on where capacity lasts into the next step (`cont`, the values on
        spot) and falls back by the lost work where it goes (`lost`, the values idle), mixed by `trans`."""
        nxt = np.where(up_state[None, :], self.ahead(cont), self.lost(lost))  # (j, s_next)
        return self._plus(nxt @ trans.T)

    def _plus(self, after: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.cost[:, None] + np.where(self.finish[:, None], 0.0, after)
        return out


def equilibrium_age_s(law: DurationLaw) -> float:
    """The mean age of a run seen at a random instant, E[X²] / (2 E[X]): what a run's age is taken to be
    when the policy starts and has not seen it begin."""
    return law.second_moment_s2 / (2.0 * law.mean_s)


def simulate(
    job: SpotJob,
    avail: np.ndarray,
    *,
    tick_s: float,
    policy: DeadlinePolicy,
    law: FleetLaw | None = None,
    programme: Programme | None = None,
) -> ReplayOutcome:
    """Run the job through every row of `avail` (runs × ticks, bool: the spot fleet can run) under `policy`.

    `srift` needs the fleet's `law` (or a `programme` made from it with plan_programme)."""
    if avail.ndim != 2 or avail.shape[1] < 1:
        raise ValueError("avail must be runs × ticks")
    runs, ticks = avail.shape
    if policy is DeadlinePolicy.SRIFT:
        if programme is None:
            if law is None:
                raise ValueError("the srift policy needs the fleet's law")
            programme = plan_programme(job, law, tick_s=tick_s)
        decide: Decider = programme.decide
    else:
        decide = {
            DeadlinePolicy.ON_DEMAND: _on_demand,
            DeadlinePolicy.SPOT_ONLY: _spot_only,
            DeadlinePolicy.SPOT_THEN_ON_DEMAND: _spot_then_on_demand,
            DeadlinePolicy.UNIFORM_PROGRESS: _uniform_progress,
        }[policy]
    up0 = equilibrium_age_s(law.up) if law is not None else 0.0
    down0 = equilibrium_age_s(law.gap) if law is not None else 0.0
    st = _State(
        now_s=0.0,
        avail=avail[:, 0].copy(),
        age_s=np.where(avail[:, 0], up0, down0),
        progress=np.zeros(runs),
        checkpointed=np.zeros(runs),
        mode=np.full(runs, _IDLE, dtype=np.int8),
        interrupted=np.zeros(runs, dtype=bool),
        od_locked=np.zeros(runs, dtype=bool),
    )
    over = np.zeros(runs)
    since = np.zeros(runs)
    cost = np.zeros(runs)
    finish = np.full(runs, np.nan)
    spot_s = np.zeros(runs)
    od_s = np.zeros(runs)
    preempt = np.zeros(runs, dtype=np.int64)
    done = np.zeros(runs, dtype=bool)
    w = np.array([np.inf, job.spot_work_s, job.od_work_s])
    price = np.array([0.0, job.spot_usd_per_s, job.od_usd_per_s])
    ckpt = job.checkpoint_s
    for t in range(ticks):
        if done.all():
            break
        now = t * tick_s
        a = avail[:, t]
        st.now_s = now
        if t:
            changed = a != st.avail
            st.age_s = np.where(changed, 0.0, st.age_s + tick_s)
        st.avail = a
        active = ~done
        lost = active & (st.mode == _SPOT) & ~a
        if lost.any():
            st.progress[lost] = st.checkpointed[lost]
            st.mode[lost] = _IDLE
            over[lost] = 0.0
            since[lost] = 0.0
            preempt[lost] += 1
            st.interrupted |= lost
        want = decide(job, st, tick_s)
        want = np.where((want == _SPOT) & ~a, _IDLE, want).astype(np.int8)
        switch = active & (want != st.mode)
        leave = switch & (st.mode != _IDLE)
        st.checkpointed[leave] = st.progress[leave]
        since[leave] = 0.0
        start = switch & (want != _IDLE)
        over[start] = job.restart_s
        over[switch & (want == _IDLE)] = 0.0
        st.mode = np.where(active, want, st.mode).astype(np.int8)
        run = active & (st.mode != _IDLE)
        r = 1.0 / w[st.mode]
        p = price[st.mode]
        eff = np.clip(tick_s - over, 0.0, tick_s)
        ends = run & (st.progress + eff * r >= 1.0 - 1e-12)
        t_fin = np.minimum(over, tick_s) + (1.0 - st.progress) / np.where(run, r, 1.0)
        spent = np.where(ends, t_fin, np.where(run, tick_s, 0.0))
        cost += p * spent
        spot_s += np.where(st.mode == _SPOT, spent, 0.0)
        od_s += np.where(st.mode == _ON_DEMAND, spent, 0.0)
        finish = np.where(ends, now + t_fin, finish)
        st.progress = np.where(run, np.minimum(st.progress + eff * r, 1.0), st.progress)
        over = np.maximum(over - tick_s, 0.0)
        since = np.where(run, since + eff, since)
        k = np.floor(since / ckpt)
        since = since - k * ckpt
        st.checkpointed = np.where(run & (k > 0), st.progress - since * r, st.checkpointed)
        done |= ends
    past = ~done
    if past.any():
        end = ticks * tick_s
        extra = np.where(st.mode == _ON_DEMAND, over, job.restart_s) + (1.0 - st.progress) * job.od_work_s
        extra = np.where(st.mode == _ON_DEMAND, extra, job.restart_s + (1.0 - st.progress) * job.od_work_s)
        cost = np.where(past, cost + extra * job.od_usd_per_s, cost)
        od_s = np.where(past, od_s + extra, od_s)
        finish = np.where(past, end + extra, finish)
    met = finish <= job.deadline_s * (1 + 1e-12)
    return ReplayOutcome(
        finish_s=finish,
        cost_usd=cost,
        met=met,
        spot_s=spot_s,
        od_s=od_s,
        preemptions=preempt,
        past_window=past,
    )
