"""Launch files for a stored plan (GET /v1/plans/{id}/launch, `srift plan --emit`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from srift.errors import Conflict
from srift.launch.emit import EmitFormat, EmittedFile, LaunchOptions, emit
from srift.launch.layout import LayoutError
from srift.services.plans import get_plan_for


def emit_document(plan: Mapping[str, Any], fmt: EmitFormat, options: LaunchOptions) -> list[EmittedFile]:
    """`plan` (a plan document) as launch files; Conflict when this plan cannot be launched so (e.g. a
    SkyPilot task for testbed VMs)."""
    try:
        return emit(plan, fmt, options)
    except LayoutError as exc:
        raise Conflict(
            f"cannot emit plan {plan.get('id')} as {fmt.value}: {exc}",
            hint="emit it in another format (torchrun works for every provider)",
            field="format",
        ) from exc


def emit_plan(
    *, session: Session, plan_id: int, viewer: str | None, fmt: EmitFormat, options: LaunchOptions
) -> list[EmittedFile]:
    """The launch files of stored plan `plan_id` that `viewer` may read (its own or everyone's); NotFound
    when there is none, or it is another owner's (the files spell out the plan)."""
    record = get_plan_for(session=session, plan_id=plan_id, viewer=viewer)
    return emit_document(record.document(), fmt, options)
