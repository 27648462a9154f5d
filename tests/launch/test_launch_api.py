"""Launch files of a stored plan over the API and the CLI (`srift plan --emit`), from a real plan."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from services.test_plans import _request, _seed
from torch.distributed.run import get_args_parser
from typer.testing import CliRunner

from srift.cli import build_app


def _plan(client: TestClient, db_url: str, headers: dict[str, str]) -> dict[str, Any]:
    ids = _seed(db_url, "resnet50")
    body = _request(ids, **{"global_batch": 1024, "time_limit_s": None, "network": {"ena_visible": True}})
    r = client.post("/v1/plans", json=body, headers=headers)
    assert r.status_code == 201, r.text
    plan: dict[str, Any] = r.json()
    return plan


def test_a_stored_plan_comes_back_as_each_launch_format(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    plan = _plan(client, db_url, write_headers)
    r = client.get(
        f"/v1/plans/{plan['id']}/launch",
        params={"format": "torchrun", "master_addr": "10.0.0.9"},
        headers=write_headers,
    )
    assert r.status_code == 200, r.text
    [f] = r.json()["files"]
    lines = [ln for ln in f["text"].splitlines() if ln.startswith("env ")]
    assert len(lines) == sum(c["count"] for c in plan["choices"])
    tokens = shlex.split(lines[0])
    start = tokens.index("torchrun")
    env = dict(t.split("=", 1) for t in tokens[1:start])
    args = get_args_parser().parse_args(tokens[start + 1 :])
    assert args.master_addr == "10.0.0.9" and args.node_rank == 0
    flows = plan["network"]["flows_per_peer"][plan["choices"][0]["instance_type"]]
    assert int(env["NCCL_SOCKET_NTHREADS"]) * int(env["NCCL_NSOCKS_PERTHREAD"]) == flows
    sky = client.get(f"/v1/plans/{plan['id']}/launch", params={"format": "skypilot"}, headers=write_headers)
    assert sky.status_code == 409 and sky.json()["field"] == "format"  # testcloud is no SkyPilot cloud
    k8s = client.get(
        f"/v1/plans/{plan['id']}/launch",
        params={"format": "kubernetes", "image": "x/y:1"},
        headers=write_headers,
    )
    assert k8s.status_code == 200, k8s.text
    doc = yaml.safe_load(k8s.json()["files"][0]["text"])
    assert doc["kind"] == "JobSet"
    assert client.get("/v1/plans/999/launch").status_code == 404
    slurm = client.get(f"/v1/plans/{plan['id']}/launch", params={"format": "slurm"}, headers=write_headers)
    assert slurm.status_code == 422


def test_srift_plan_emit_writes_the_files_and_the_plan_for_the_helper(
    client: TestClient,
    db_url: str,
    write_headers: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = _plan(client, db_url, write_headers)
    monkeypatch.setenv("SRIFT_DATABASE_URL", db_url)
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path / "data"))
    from srift.settings import get_settings

    get_settings.cache_clear()
    out = tmp_path / "launch"
    result = CliRunner().invoke(
        build_app(),
        ["plan", "--plan-id", str(plan["id"]), "--emit", "torchrun", "--out", str(out), "--script", "t.py"],
    )
    get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    saved = json.loads((out / f"plan-{plan['id']}.json").read_text())
    assert saved["choices"] == plan["choices"]
    plan_file = out / f"plan-{plan['id']}.json"
    script = (out / f"plan-{plan['id']}-torchrun.sh").read_text()
    assert f"SRIFT_PLAN={plan_file}" in script
    bad = CliRunner().invoke(build_app(), ["plan", "--plan-id", str(plan["id"]), "--emit", "slurm"])
    assert bad.exit_code != 0 and "use torchrun, skypilot or kubernetes" in str(bad.exception)


def test_a_line_break_or_nul_in_a_one_line_launch_option_is_refused_naming_it(
    client: TestClient, db_url: str, write_headers: dict[str, str]
) -> None:
    """`script=train.py%0A` (a pasted trailing newline) split each VM's one torchrun line in two, and a NUL
    in `master_addr` went into the shell script; both are 422 naming the option. A setup command may still
    span lines."""
    plan = _plan(client, db_url, write_headers)
    url = f"/v1/plans/{plan['id']}/launch"
    for name, value in (("script", "train.py\n"), ("master_addr", "10.0.0.5\x00"), ("image", "x/y:1\r")):
        r = client.get(url, params={"format": "kubernetes", name: value}, headers=write_headers)
        assert r.status_code == 422 and r.json()["field"] == name, r.text
        assert r.json()["detail"] == f"{name} holds a line break or another control character"
    setup = {"format": "kubernetes", "image": "x/y:1", "setup": "pip install -r req.txt\necho ready"}
    assert client.get(url, params=setup, headers=write_headers).status_code == 200
    r = client.get(url, params={**setup, "setup": "echo \x00"}, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "setup", r.text
