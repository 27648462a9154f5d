"""CLI for tracked training runs: `srift run start|progress|interrupt|amend|show|list|corrections`.

A training run follows a stored plan (Srift §4.5): report progress, report lost spot VMs (the rest of the
run is re-planned), and amend its limits or objective, which resumes a run waiting in `needs_input`. `run`
is not `jobs`: `srift jobs` are probe and profile jobs. Each verb works on the local database, or on a
running server with --url (the REST paths under /v1/jobs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.options import ServerUrl, add_group, finite_number, in_cli_words
from srift.commands.remote import call_api, put_given
from srift.commands.tables import add_columns

if TYPE_CHECKING:
    from srift.domain.states import TrainingState

console = Console()


def _local_url() -> str:
    from srift.bootstrap import bootstrap
    from srift.settings import get_settings

    settings = get_settings()
    bootstrap(settings)
    return settings.resolved_database_url


def _run_document(run: Any) -> dict[str, Any]:
    from srift.api.schemas.launch import JobStartOut
    from srift.api.schemas.plans import TrainingJobOut

    schema = JobStartOut if getattr(run, "token", None) else TrainingJobOut
    return schema.model_validate(run, from_attributes=True).model_dump(mode="json")


def _plan_document(plan: Any) -> dict[str, Any]:
    from srift.api.schemas.plans import PlanOut

    return PlanOut.model_validate(plan.document()).model_dump(mode="json")


def _local(action: str, **kwargs: Any) -> dict[str, Any]:
    """Run one service call on the local database; the answer has the REST endpoint's shape."""
    from srift.db.session import transaction
    from srift.services import training_jobs as service
    from srift.settings import get_settings

    with transaction(_local_url()) as session:
        if action == "start":
            return _run_document(service.start_job(session=session, **kwargs))
        if action == "show":
            return _run_document(service.get_run(session=session, **kwargs))
        if action == "progress":
            return _run_document(service.record_progress(session=session, **kwargs))
        if action == "interrupt":
            run, plan = service.record_interruption(session=session, settings=get_settings(), **kwargs)
        else:
            run, plan = service.amend(session=session, settings=get_settings(), **kwargs)
        return {"job": _run_document(run), "plan": _plan_document(plan)}


_REPORTS = {
    "progress": ("progress", "progress"),
    "interrupt": ("interruptions", "interruption"),
    "amend": ("amendments", "amendment"),
}
"""Per report `_local` applies: the path under /v1/jobs/{id}/ that takes it, and the service's argument."""


def _report(
    action: str, job_id: int, body: dict[str, Any], *, url: str | None, token: str | None
) -> dict[str, Any]:
    """Send a run's report (`action`: progress, interrupt or amend) to the server at `url`, or validate it as
    that endpoint does and apply it to the local database; either way the answer has the endpoint's shape."""
    path, argument = _REPORTS[action]
    if url:
        answer: dict[str, Any] = call_api("POST", url, f"/v1/jobs/{job_id}/{path}", token=token, body=body)
        return answer
    from srift.api.schemas.plans import AmendmentIn, InterruptionIn, ProgressIn
    from srift.documents import validated

    schemas: dict[str, type[ProgressIn | InterruptionIn | AmendmentIn]] = {
        "progress": ProgressIn,
        "interrupt": InterruptionIn,
        "amend": AmendmentIn,
    }
    return _local(action, job_id=job_id, **{argument: validated(schemas[action], body).to_domain()})


def _correction_doc(doc: dict[str, Any]) -> dict[str, Any]:
    from srift.api.schemas.launch import CorrectionOut

    return CorrectionOut.model_validate(doc).model_dump(mode="json")


def _print_run(run: dict[str, Any], *, events: bool = False) -> None:
    limits = []
    if run.get("time_limit_s") is not None:
        limits.append(f"time limit {run['time_limit_s']:g} s")
    if run.get("budget_usd") is not None:
        limits.append(f"budget ${run['budget_usd']:g}")
    console.print(
        f"[bold]run {run['id']}[/]: {run['state']}, {run['iterations_done']}/{run['iterations_total']} "
        f"iterations, {run['elapsed_s']:g} s, ${run['spent_usd']:.2f} spent"
        + (f" ({'; '.join(limits)})" if limits else ""),
        highlight=False,
    )
    current = next((p for p in run["plans"] if p["id"] == run["current_plan_id"]), None)
    if current is not None:
        console.print(f"plan {current['id']}: {current['label']}", highlight=False)
    if run.get("excluded_types"):
        console.print(f"never launched again: {', '.join(run['excluded_types'])}", highlight=False)
    if run["state"] == "needs_input":
        last = next((e for e in reversed(run["events"]) if "error" in e["payload"]), None)
        if last is not None:
            err = last["payload"]["error"]
            console.print(
                f"[yellow]needs input:[/] {err.get('detail')}. To fix: {err.get('hint')}", highlight=False
            )
        console.print(f"resume with: srift run amend {run['id']} --time-limit SECONDS (or --budget USD)")
    if events:
        table = Table(title="events")
        for col in ("id", "kind", "when", "what"):
            table.add_column(col, overflow="fold")
        for e in run["events"]:
            p = e["payload"]
            what = ", ".join(
                f"{k}={v}"
                for k, v in p.items()
                if k not in ("error", "remaining") and not isinstance(v, dict)
            )
            if "error" in p:
                what += " (no plan fits)"
            table.add_row(str(e["id"]), e["kind"], str(e["created_at"])[:19], what)
        console.print(table)


def _print_started(run: dict[str, Any], url: str | None) -> None:
    _print_run(run)
    if run.get("token"):
        console.print(
            "the run's token (shown once); on node 0 of the run, for the helper's reporter:", highlight=False
        )
        typer.echo(f"export SRIFT_URL={url or 'http://SERVER:8000'} SRIFT_RUN_ID={run['id']}")
        typer.echo(f"export SRIFT_RUN_TOKEN={run['token']}")


def _print_replan(answer: dict[str, Any]) -> None:
    _print_run(answer["job"])
    plan = answer["plan"]
    p = plan["predicted"]
    console.print(
        f"new plan {plan['id']} for {plan['iterations']} iterations: {plan['label']}, "
        f"{p['total_time_s']:.1f} s, ${p['cost_usd']:.2f}",
        highlight=False,
    )


def _emit(answer: dict[str, Any], as_json: bool, printer: Any) -> None:
    if as_json:
        typer.echo(json.dumps(answer, indent=2))
    else:
        printer(answer)


_API_START = "POST /v1/jobs"
"""The REST way to start a run, which the service's hints name; the CLI's is `srift run start PLAN_ID`."""
_CLI_START = "`srift run start PLAN_ID` (`srift run list` shows the runs)"


def _in_cli_words(options: Mapping[str, str]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A `srift run` command whose errors name `options` (request field: option) and start runs the CLI
    way (see `in_cli_words`)."""
    return in_cli_words(options, phrases={_API_START: _CLI_START})


_REPORT_OPTIONS = {"iterations_done": "--iterations", "elapsed_s": "--elapsed", "spent_usd": "--spent"}
"""The progress figures `srift run progress` and `srift run interrupt` take, by their request field."""


RunToken = Annotated[
    str | None,
    typer.Option("--token", envvar="SRIFT_TOKEN", help="API write token for --url (env SRIFT_TOKEN)"),
]
AnswerJson = Annotated[bool, typer.Option("--json", help="print the answer as JSON")]
RunId = Annotated[int, typer.Argument(min=1, help="the run")]
_NOT_NEGATIVE = (0.0, math.inf)
"""The range of a count of seconds or dollars (typer ignores min= on an option with a parser)."""
_ITERATIONS = typer.Option("--iterations", min=0, help="iterations done so far")
_ELAPSED = typer.Option(
    "--elapsed", parser=finite_number("--elapsed", within=_NOT_NEGATIVE), help="seconds since the run started"
)
_SPENT = typer.Option(
    "--spent", parser=finite_number("--spent", within=_NOT_NEGATIVE), help="USD spent so far"
)
LaunchOverhead = Annotated[
    float,
    typer.Option(
        "--launch-overhead",
        parser=finite_number("--launch-overhead", within=_NOT_NEGATIVE),
        help="seconds to boot VMs",
    ),
]


@_in_cli_words({})
def start(
    plan_id: Annotated[int, typer.Argument(min=1, help="the stored plan being run")],
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """Start tracking a run of plan PLAN_ID.

    Example: srift run start 12
    """
    if url:
        answer = call_api("POST", url, "/v1/jobs", token=token, body={"plan_id": plan_id})
    else:
        answer = _local("start", plan_id=plan_id)
    _emit(answer, as_json, lambda r: _print_started(r, url))


@_in_cli_words(_REPORT_OPTIONS)
def progress(
    job_id: RunId,
    iterations: Annotated[int, _ITERATIONS],
    elapsed: Annotated[float, _ELAPSED],
    spent: Annotated[float, _SPENT],
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """Report progress.

    Example: srift run progress 3 --iterations 200 --elapsed 1800 --spent 4.20
    """
    body = {"iterations_done": iterations, "elapsed_s": elapsed, "spent_usd": spent}
    answer = _report("progress", job_id, body, url=url, token=token)
    _emit(answer, as_json, _print_run)


@_in_cli_words(
    {
        **_REPORT_OPTIONS,
        "instance_type": "--type",
        "count": "--count",
        "launch_overhead_s": "--launch-overhead",
    }
)
def interrupt(
    job_id: RunId,
    instance_type: Annotated[str, typer.Option("--type", help="the instance type that lost VMs")],
    count: Annotated[int, typer.Option("--count", min=1, help="VMs lost")] = 1,
    iterations: Annotated[int | None, _ITERATIONS] = None,
    elapsed: Annotated[float | None, _ELAPSED] = None,
    spent: Annotated[float | None, _SPENT] = None,
    launch_overhead: LaunchOverhead = 150.0,
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """Report lost spot VMs; the rest of the run is re-planned within what is left of its limits.

    When nothing fits the run waits in needs_input (exit 2) until `srift run amend` raises a limit.
    Example: srift run interrupt 3 --type g4dn.12xlarge --count 2 --iterations 200 --elapsed 1800
    """
    body: dict[str, Any] = {
        "instance_type": instance_type,
        "count": count,
        "iterations_done": iterations,
        "elapsed_s": elapsed,
        "spent_usd": spent,
        "launch_overhead_s": launch_overhead,
    }
    answer = _report("interrupt", job_id, body, url=url, token=token)
    _emit(answer, as_json, _print_replan)


@_in_cli_words(
    {
        "time_limit_s": "--time-limit",
        "budget_usd": "--budget",
        "objective": "--objective",
        "launch_overhead_s": "--launch-overhead",
    }
)
def amend(
    job_id: RunId,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            parser=finite_number("--time-limit", within=_NOT_NEGATIVE),
            help="the run's whole deadline in seconds, from its start",
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            parser=finite_number("--budget", within=_NOT_NEGATIVE),
            help="the run's whole budget in USD",
        ),
    ] = None,
    objective: Annotated[str | None, typer.Option("--objective", help="min_cost or min_time")] = None,
    launch_overhead: LaunchOverhead = 150.0,
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """Change a run's limits or objective and re-plan the rest: resumes a run in needs_input.

    Example: srift run amend 3 --time-limit 7200
    """
    body: dict[str, Any] = {}
    put_given(body, time_limit_s=time_limit, budget_usd=budget, objective=objective)
    body["launch_overhead_s"] = launch_overhead
    answer = _report("amend", job_id, body, url=url, token=token)
    _emit(answer, as_json, _print_replan)


def corrections(
    model: Annotated[str | None, typer.Option("--model", help="only this model's corrections")] = None,
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """Corrections learned from measured runs, per model, instance type and network setting.

    Each scales the compute and communication terms of later predictions and plans for that model on
    that type ("calibrated on N runs"); it starts at no correction and gains weight with every run.
    Example: srift run corrections --model resnet50
    """
    if url:
        query = "/v1/corrections" + (f"?model={model}" if model else "")
        answer = call_api("GET", url, query, token=token)
    else:
        from srift.services import calibration

        answer = _local_corrections(
            lambda session: calibration.list_corrections(session=session, model=model)
        )
    _emit(answer, as_json, _print_corrections)


def reset_correction(
    model: Annotated[str, typer.Argument(help="the model")],
    instance_type: Annotated[str, typer.Argument(help="the instance type")],
    network: Annotated[
        str | None,
        typer.Option("--network", help="only this network setting (as `srift run corrections` lists it)"),
    ] = None,
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """Forget what runs taught a correction: later predictions start again from no correction.

    Example: srift run reset-correction resnet50 g5.12xlarge
    """
    body = {"model": model, "instance_type": instance_type, "network_key": network}
    if url:
        answer = call_api("POST", url, "/v1/corrections/reset", token=token, body=body)
    else:
        from srift.services import calibration

        answer = _local_corrections(
            lambda session: calibration.reset_correction(
                session=session, model=model, instance_type=instance_type, network_key=network
            )
        )
    _emit(answer, as_json, _print_resets)


def _local_corrections(query: Callable[[Any], list[Any]]) -> dict[str, Any]:
    """`{"corrections": [...]}` as GET /v1/corrections answers, from `query(session)` on the local
    database."""
    from srift.db.session import transaction

    with transaction(_local_url()) as session:
        return {"corrections": [_correction_doc(e.document()) for e in query(session)]}


def _print_corrections(answer: dict[str, Any]) -> None:
    table = Table(title=f"corrections ({len(answer['corrections'])})")
    add_columns(
        table,
        ("model", "instance type", "network", "runs", "compute ×", "communication ×"),
        left=("model", "instance type", "network"),
    )
    for c in answer["corrections"]:
        table.add_row(
            c["model"],
            c["instance_type"],
            c["network_key"],
            str(c["runs"]),
            f"{c['compute_factor']:.3g}",
            f"{c['comm_factor']:.3g}",
        )
    console.print(table)


def _print_resets(answer: dict[str, Any]) -> None:
    for c in answer["corrections"]:
        console.print(
            f"reset: {c['model']} on {c['instance_type']} ({c['network_key']}); runs after now count",
            highlight=False,
        )


@_in_cli_words({})
def show(
    job_id: RunId,
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """A run: its state, plans and every event.

    Example: srift run show 3
    """
    answer = call_api("GET", url, f"/v1/jobs/{job_id}", token=token) if url else _local("show", job_id=job_id)
    _emit(answer, as_json, lambda r: _print_run(r, events=True))


def list_(
    state: Annotated[str | None, typer.Option("--state", help="running, completed or needs_input")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
    url: ServerUrl = None,
    token: RunToken = None,
    as_json: AnswerJson = False,
) -> None:
    """Tracked training runs, newest first.

    Example: srift run list --state needs_input
    """
    from srift.domain.states import TrainingState
    from srift.errors import parse_choice

    state_v = parse_choice(TrainingState, state, what="state", field="state") if state else None
    if url:
        query = f"/v1/jobs?limit={limit}" + (f"&state={state}" if state else "")
        answer = call_api("GET", url, query, token=token)
    else:
        answer = _local_runs(state_v, limit)
    _emit(answer, as_json, _print_runs)


def _local_runs(state: TrainingState | None, limit: int) -> dict[str, Any]:
    """`{"runs": [...], "total": N}` as GET /v1/jobs answers, from the local database."""
    from srift.api.schemas.dashboard import TrainingRunSummary
    from srift.db.session import transaction
    from srift.services import dashboard

    with transaction(_local_url()) as session:
        runs, total = dashboard.list_training_runs(session=session, state=state, limit=limit)
        return {
            "runs": [
                TrainingRunSummary.model_validate(r, from_attributes=True).model_dump(mode="json")
                for r in runs
            ],
            "total": total,
        }


def _print_runs(answer: dict[str, Any]) -> None:
    table = Table(title=f"training runs ({answer['total']})")
    add_columns(
        table,
        ("id", "plan", "state", "iterations", "elapsed", "spent", "interrupted", "re-planned"),
        left=("state",),
    )
    for r in answer["runs"]:
        table.add_row(
            str(r["id"]),
            str(r["current_plan_id"]),
            r["state"],
            str(r["iterations_done"]),
            f"{r['elapsed_s']:g} s",
            f"${r['spent_usd']:.2f}",
            str(r["interruptions"]),
            str(r["replans"]),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add the `run` group."""
    add_group(
        app,
        "run",
        help=(
            "Tracked training runs of a plan: start one, report progress and lost spot VMs (the rest is "
            "re-planned), amend limits to resume a run in needs_input. (`srift jobs` are probe/profile jobs.)"
        ),
        commands={
            "start": start,
            "progress": progress,
            "interrupt": interrupt,
            "amend": amend,
            "corrections": corrections,
            "reset-correction": reset_correction,
            "show": show,
            "list": list_,
        },
    )
