"""POST /v1/predictions: one fleet's iteration time, total time, cost and stall breakdown (nothing stored)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from srift.api.auth import CallerIdentity, RequireRead
from srift.api.deps import SessionDep, SettingsDep
from srift.api.limits import error_response
from srift.api.schemas.predictions import PredictionOut, PredictionRequest, PredictionSweepOut
from srift.services import predictions as service

router = APIRouter(tags=["predictions"])


@router.post(
    "/predictions",
    response_model=PredictionOut | PredictionSweepOut,
    responses={
        404: error_response(
            "what the request names is not stored: a catalog snapshot, a provider or region (`provider`, "
            "`region`; the hint lists the known ones, as POST /v1/plans answers them), an instance type, a "
            "profile id, or any profile of `model` (`field` names it)"
            "; a probe job of `network.probe_job_ids`"
        ),
        409: error_response(
            "a valid request the stored data cannot answer: `profile_ids` name profiles of "
            "different models or precisions (or not in the asked `precision`), or no sharding strategy fits "
            "the fleet (error infeasible)"
            "; a probe job of `network.probe_job_ids` that stored no samples across two or more nodes"
        ),
        422: error_response(
            "invalid request; `field` names it (e.g. config.choices[0].batch above max_batch, "
            "an instance type without a profile for its accelerator, checkpointing without a strategy, "
            "mc_samples or comm parameter_server under a strategy other than ddp with checkpointing false)"
        ),
    },
)
def create_prediction(
    body: PredictionRequest,
    session: SessionDep,
    settings: SettingsDep,
    _: RequireRead,
    caller: CallerIdentity,
) -> Any:
    """Predict one fleet (`config`), or a sweep of fleets (`configs`, answered as `predictions` in order):
    mean and p10/p50/p90 iteration time, total time and cost for `iterations`.

    Each choice is `count` VMs of `instance_type` on `market`, each given `batch` samples per iteration
    (split over its GPUs). Compute comes from the profile of the type's accelerator, communication from the
    active bandwidth model (or the α-β prior), prices from the catalog (billed per second). The breakdown
    follows Stash: compute, straggler wait, exposed intra-node and network communication (they add up to
    iteration_s), plus granularity = compute / communication. `network` names the transport between nodes
    (default: TCP sockets, what plain PyTorch DDP uses), optional measured rates per type or probe job ids;
    the answer's `network` says what was assumed for each type and how to measure what rests on the prior.
    A choice's `gpus` uses only part of each VM's GPUs. `strategy` (and `checkpointing`), as in a plan
    request, predicts each fleet as a plan evaluates it under them: the fastest allowed setup that fits its
    GPUs' memory, said in the answer's `strategy` section (docs/sharding.md); left out, plain DDP.
    Read-only: it computes and stores nothing, so a read token suffices.
    """
    result = service.answer(session=session, settings=settings, query=body.to_domain(owner=caller.owner))
    if "predictions" in result:
        return PredictionSweepOut.model_validate(result)
    return PredictionOut.model_validate(result)
