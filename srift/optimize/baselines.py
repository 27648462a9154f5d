"""The static policies of Srift §5.2: CAP (cost-aware) and TAP (throughput-aware), for comparison with a plan.

Both rank the candidate types, CAP by price per VM-hour (cheapest first) and TAP by per-VM throughput at the
full per-VM batch (fastest first); both load every VM with its maximum batch (max_batch on every GPU) and take
VMs in rank order, up to each type's cap, until the global batch is allocated. The last VM takes the
remainder, so a type may appear twice (full VMs and one partly loaded VM).
"""

from __future__ import annotations

from enum import StrEnum

from srift.domain import BaselineResult
from srift.optimize.evaluate import Evaluations
from srift.optimize.space import Group, Groups, Problem


class Policy(StrEnum):
    CAP = "cap"
    TAP = "tap"


def baseline_groups(problem: Problem, policy: Policy) -> Groups | None:
    """The policy's configuration, or None when the available VMs cannot hold the global batch."""
    cands = problem.candidates
    if policy is Policy.CAP:
        order = sorted(range(len(cands)), key=lambda i: (cands[i].offer.price_usd_per_hr, cands[i].name))
    else:
        order = sorted(
            range(len(cands)),
            key=lambda i: (-cands[i].max_vm_batch / cands[i].floor_s(cands[i].max_vm_batch), cands[i].name),
        )
    remaining = problem.constraints.global_batch
    groups: list[Group] = []
    for i in order:
        if remaining == 0:
            break
        cand = cands[i]
        full = min(cand.cap, remaining // cand.max_vm_batch)
        if full:
            groups.append((i, full, cand.max_vm_batch))
            remaining -= full * cand.max_vm_batch
        if 0 < remaining < cand.max_vm_batch and full < cand.cap:
            groups.append((i, 1, remaining))
            remaining = 0
    return tuple(groups) if remaining == 0 else None


def baselines(problem: Problem, evals: Evaluations) -> dict[str, BaselineResult | None]:
    """CAP and TAP with Srift's predictions for them (None where the policy cannot allocate the batch)."""
    out: dict[str, BaselineResult | None] = {}
    for policy in Policy:
        groups = baseline_groups(problem, policy)
        if groups is None:
            out[policy.value] = None
            continue
        item = evals.banded(groups)
        out[policy.value] = BaselineResult(
            policy=policy.value,
            config=problem.config(groups),
            prediction=item.prediction,
            feasible=item.feasible,
        )
    return out
