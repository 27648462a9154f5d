"""A prediction of a fleet that cannot run (a VM batch its GPUs cannot share) is refused with the runnable
batches nearest to it, as plans never propose one."""

from __future__ import annotations

from fastapi.testclient import TestClient

from srift.catalog.shipped import load_shipped_catalog
from srift.settings import Settings

PROFILE = {
    "model": "split",
    "accelerator": "T4",
    "max_batch": 64,
    "forward": {"batches": [1, 64], "times_s": [0.004, 0.06]},
    "backward": {"batches": [1, 64], "times_s": [0.008, 0.12]},
    "layers": [{"name": "fc", "grad_bytes": 4_000_000, "ready_frac": 1.0}],
    "straggler_cv": 0.05,
}


def _predict(client: TestClient, batch: int, gpus: int | None = None) -> dict[str, object]:
    choice: dict[str, object] = {"instance_type": "g4dn.12xlarge", "count": 2, "batch": batch}
    if gpus is not None:
        choice["gpus"] = gpus
    r = client.post(
        "/v1/predictions",
        json={"profiles": [PROFILE], "iterations": 100, "config": {"choices": [choice]}},
    )
    return {"status": r.status_code, **r.json()}


def test_a_batch_four_gpus_cannot_share_is_refused_with_runnable_ones(
    settings: Settings, client: TestClient
) -> None:
    load_shipped_catalog(settings)
    refused = _predict(client, 6)
    assert refused["status"] == 422
    assert refused["field"] == "config.choices[0].batch"
    assert "1.5 per GPU" in str(refused["detail"])
    assert "4 or 8" in str(refused["hint"]) and "gpus: 3" in str(refused["hint"])
    assert _predict(client, 8)["status"] == 200
    assert _predict(client, 6, gpus=3)["status"] == 200
    assert _predict(client, 2)["status"] == 422
