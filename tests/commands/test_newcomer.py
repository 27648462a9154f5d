"""The newcomer's dead ends: `srift --version`, `srift profile upload FILE`, and a hint for an unsplittable
global batch that names batches that split."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.cli import main
from srift.settings import Settings

PROFILE = {
    "model": "newcomer-cnn",
    "accelerator": "T4",
    "max_batch": 64,
    "forward": {"batches": [1, 64], "times_s": [0.004, 0.06]},
    "backward": {"batches": [1, 64], "times_s": [0.008, 0.12]},
    "layers": [{"name": "fc", "grad_bytes": 4_000_000, "ready_frac": 1.0}],
    "straggler_cv": 0.05,
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and out.strip() == f"srift {importlib.metadata.version('srift')}"


def test_profile_upload_stores_existing_files_as_the_tokens_own(
    live_server_url: str,
    write_headers: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "cnn.json"
    path.write_text(json.dumps(PROFILE))
    code, _, err = _run(["profile", "upload", str(path), "--url", live_server_url], capsys)
    assert code == 2 and "--token" in " ".join(err.split())
    monkeypatch.setenv("SRIFT_TOKEN", write_headers["Authorization"].removeprefix("Bearer "))
    code, out, err = _run(["profile", "upload", str(path), "--url", live_server_url], capsys)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "stored as profile" in flat and "newcomer-cnn on T4" in flat
    code, out, _ = _run(["profile", "upload", str(path), "--url", live_server_url, "--json"], capsys)
    (answer,) = json.loads(out)
    assert answer["created"] is False and answer["file"] == str(path)
    stored = httpx.get(f"{live_server_url}/v1/profiles/{answer['id']}", headers=write_headers)
    assert stored.status_code == 200 and stored.json()["model"] == "newcomer-cnn"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**PROFILE, "max_batch": 8}))
    code, _, err = _run(["profile", "upload", str(bad), "--url", live_server_url], capsys)
    assert code != 0 and "forward.batches[1]" in err and "max_batch 8" in err


def test_an_unsplittable_global_batch_is_told_batches_that_split(
    settings: Settings, client: TestClient, write_headers: dict[str, str]
) -> None:
    load_shipped_catalog(settings)
    body = {
        "profiles": [PROFILE],
        "global_batch": 1002,
        "iterations": 100,
        "availability": {"g4dn.12xlarge": 4},
        "market": "on_demand",
    }
    r = client.post("/v1/plans", json=body, headers=write_headers)
    assert r.status_code == 422 and r.json()["field"] == "global_batch"
    hint = r.json()["hint"]
    assert "power of two" not in hint and "992 or 1008" in hint
    for splits in (992, 1008):
        ok = client.post("/v1/plans", json={**body, "global_batch": splits}, headers=write_headers)
        assert ok.status_code == 201, ok.text


def test_a_plan_has_one_p_deadline() -> None:
    """The band's and the spot runs' chances are one figure: the lower (both must hold), never rounded up
    to a certainty (the issue's plan read 98 % in its header and 100.0 % in its spot line)."""
    from srift.commands.plan import chance_text, chances

    plan = {
        "probability": {"meets_time_limit": 0.98, "within_budget": None},
        "spot": {"p_meets_time_limit": 1.0, "p_within_budget": None},
    }
    assert chances(plan) == (0.98, None)
    assert chance_text(plan) == "P(deadline) 98 %"
    plan["spot"]["p_meets_time_limit"] = 0.9
    assert chance_text(plan) == "P(deadline) 90 %"
    assert chance_text({"probability": {"meets_time_limit": 0.996}}) == "P(deadline) >99 %"
