"""`srift run start|interrupt|show|amend|list` on the local database: a run that no plan fits after an
interruption waits in needs_input, says how to resume, and resumes after `srift run amend --time-limit`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from srift.bootstrap import bootstrap
from srift.cli import main
from srift.db.session import get_engine
from srift.optimize.synthetic import synthetic_profile
from srift.settings import Settings, get_settings


@pytest.fixture(scope="session")
def _ready_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local database as the first command leaves it (srift.bootstrap: migrated, catalog, bandwidth
    models and reference profiles loaded), made once: each test starts from a copy instead of loading the
    shipped data again (0.6 s a test). These tests are about runs, not about preparing a data folder."""
    folder = tmp_path_factory.mktemp("runcli")
    url = f"sqlite:///{folder}/cli.db"
    bootstrap(Settings(database_url=url, data_dir=folder))
    get_engine(url).dispose()
    return folder / "cli.db"


@pytest.fixture
def ready(local: None, tmp_path: Path, _ready_template: Path) -> None:
    """`local` (the commands' database in the test's folder), already prepared by a first command."""
    shutil.copy(_ready_template, tmp_path / "cli.db")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def _plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, **over: Any) -> dict[str, Any]:
    """`srift plan --json` of a synthetic ResNet-50 on T4 in aws/us-east-1, `over` changing the request."""
    request: dict[str, Any] = {
        "profiles": [synthetic_profile("resnet50", "T4").to_dict()],
        "global_batch": 256,
        "iterations": 50,
        "objective": "min_cost",
        "provider": "aws",
        "region": "us-east-1",
        **over,
    }
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request))
    code, out, err = run(capsys, "plan", str(path), "--json")
    assert code == 0, err
    plan: dict[str, Any] = json.loads(out)
    return plan


def test_a_run_waits_in_needs_input_and_resumes_after_amend(
    ready: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request: dict[str, Any] = {
        "profiles": [synthetic_profile("resnet50", "T4").to_dict()],
        "global_batch": 256,
        "iterations": 1000,
        "objective": "min_cost",
        "time_limit_s": 3600,
        "provider": "aws",
        "region": "us-east-1",
        "market": "spot",
        "availability": {"g4dn.xlarge": 16, "g4dn.12xlarge": 4},
    }
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request))
    code, out, err = run(capsys, "plan", str(path), "--json")
    assert code == 0, err
    plan = json.loads(out)
    code, out, err = run(capsys, "run", "start", str(plan["id"]), "--json")
    assert code == 0, err
    job_id = json.loads(out)["id"]
    lost = plan["choices"][0]["instance_type"]
    code, out, err = run(
        capsys, "run", "interrupt", str(job_id), "--type", lost, "--iterations", "500", "--elapsed", "3500"
    )
    assert code == 2 and "time_limit_s" in err and "To fix" in err, err
    code, out, err = run(capsys, "run", "show", str(job_id))
    assert code == 0, err
    assert "needs_input" in out and f"srift run amend {job_id} --time-limit" in out
    code, out, err = run(capsys, "run", "amend", str(job_id), "--time-limit", "3640")
    assert code == 2 and "time_limit_s" in err and "To fix" in err, err
    code, out, err = run(capsys, "run", "show", str(job_id), "--json")
    refused = json.loads(out)  # the refused amendment left nothing behind
    assert refused["state"] == "needs_input" and refused["time_limit_s"] == 3600
    assert [e["kind"] for e in refused["events"]] == ["started", "interruption"]
    code, out, err = run(capsys, "run", "amend", str(job_id), "--time-limit", "20000", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["job"]["state"] == "running" and answer["job"]["time_limit_s"] == 20000
    assert answer["plan"]["iterations"] == 500 and answer["job"]["current_plan_id"] == answer["plan"]["id"]
    code, out, err = run(capsys, "run", "list", "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert listed["total"] == 1 and listed["runs"][0]["state"] == "running"
    code, out, err = run(capsys, "run", "list", "--state", "paused")
    assert code == 2 and "needs_input" in err


def test_run_start_prints_the_runs_token_once_and_corrections_list_and_reset(
    ready: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _plan(capsys, tmp_path, market="on_demand", availability={"g4dn.xlarge": 8})
    code, out, err = run(capsys, "run", "start", str(plan["id"]))
    assert code == 0, err
    assert "export SRIFT_RUN_TOKEN=srift_run_" in out and "SRIFT_RUN_ID=1" in out
    code, out, err = run(capsys, "run", "show", "1", "--json")
    assert "token" not in json.loads(out)

    from srift.db.session import transaction
    from srift.domain.requests import IterationReport
    from srift.services.training_jobs import report_iterations

    steps = tuple((k, 0.5 + 0.001 * (k % 3)) for k in range(50))
    with transaction(get_settings().resolved_database_url) as session:
        answer = report_iterations(session=session, job_id=1, report=IterationReport(steps=steps))
    assert answer["state"] == "completed" and answer["observation"] is not None
    code, out, err = run(capsys, "run", "corrections", "--json")
    assert code == 0, err
    [entry] = json.loads(out)["corrections"]
    assert entry["model"] == "resnet50" and entry["instance_type"] == "g4dn.xlarge" and entry["runs"] == 1
    code, out, err = run(capsys, "run", "corrections")
    assert "g4dn.xlarge" in out
    code, out, err = run(capsys, "run", "reset-correction", "resnet50", "g4dn.xlarge")
    assert code == 0, err
    assert "reset: resnet50 on g4dn.xlarge" in out
    code, out, err = run(capsys, "run", "reset-correction", "resnet50", "p3.2xlarge")
    assert code != 0 and "no correction" in err


@pytest.mark.parametrize(
    ("verb", "field"),
    [
        (("progress", "--iterations", "10", "--elapsed", "inf", "--spent", "0"), "--elapsed"),
        (("progress", "--iterations", "10", "--elapsed", "5", "--spent", "1e12"), "--spent"),
        (("interrupt", "--type", "g4dn.xlarge", "--elapsed", "inf"), "--elapsed"),
        (("interrupt", "--type", "g4dn.xlarge", "--launch-overhead", "inf"), "--launch-overhead"),
    ],
)
def test_a_report_the_api_would_refuse_is_refused_locally_and_stores_nothing(
    ready: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: tuple[str, ...], field: str
) -> None:
    """`srift run progress 1 --elapsed inf` on the local database stored elapsed_s = inf (POST
    /v1/jobs/{id}/progress refuses it: at most 1e9 s), after which every report was 'below the last
    report (inf)'. The local verbs read their reports as the API does, so nothing is stored."""
    plan = _plan(capsys, tmp_path, global_batch=64, iterations=100, availability={"g4dn.xlarge": 2})
    code, out, err = run(capsys, "run", "start", str(plan["id"]), "--json")
    assert code == 0, err
    job_id = str(json.loads(out)["id"])
    code, _, err = run(capsys, "run", verb[0], job_id, *verb[1:])
    assert code == 2 and err.startswith(f"error: {field}: ") and "To fix" in err, err
    code, out, err = run(capsys, "run", "show", job_id, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["elapsed_s"] == 0 and shown["spent_usd"] == 0
    assert [e["kind"] for e in shown["events"]] == ["started"]


def test_run_errors_name_the_commands_options_not_the_apis_fields(
    ready: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`srift run show 77` hinted "start one with POST /v1/jobs" and `srift run amend 1` with nothing to
    amend "give time_limit_s, budget_usd or objective": the service's words for the API. The CLI says its
    own: `srift run start PLAN_ID`, and --time-limit, --budget or --objective."""
    code, out, err = run(capsys, "run", "show", "77")
    assert code == 2 and out == "", err
    assert "POST /v1/jobs" not in err and "To fix: start one with `srift run start PLAN_ID`" in err, err
    plan = _plan(capsys, tmp_path, global_batch=64, iterations=100, availability={"g4dn.xlarge": 2})
    code, out, err = run(capsys, "run", "start", str(plan["id"]), "--json")
    job_id = str(json.loads(out)["id"])
    code, out, err = run(capsys, "run", "amend", job_id)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    fix = "To fix: give --time-limit, --budget or --objective."
    assert err.startswith(f"error: --time-limit: nothing to amend. {fix}"), err
    assert "time_limit_s" not in err and "budget_usd" not in err, err
    code, out, err = run(capsys, "run", "show", job_id, "--json")
    assert [e["kind"] for e in json.loads(out)["events"]] == ["started"]
