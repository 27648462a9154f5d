"""One served model: `POST /v1/predictions` and `srift validate`'s prediction step give the same p50."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from srift.bandwidth.registry import active_model
from srift.catalog.custom import import_document
from srift.catalog.store import get_instance_type
from srift.domain import FleetMember
from srift.domain.requests import NetworkQuery
from srift.services.network import network_spec
from srift.settings import Settings
from srift.validation.context import Effort
from srift.validation.steps import predict_members
from tests.sim.kit import profile

LAB: dict[str, Any] = {
    "provider": "lab",
    "snapshot": "lab-served",
    "source": "lab rate card (test)",
    "as_of": "2026-11-01",
    "instance_types": [
        {
            "name": "t4x1",
            "gpu_model": "T4",
            "gpu_count": 1,
            "gpu_memory_gib": 16,
            "vcpus": 4,
            "memory_gib": 16,
            "network_gbps": 5,
            "interconnect": "none",
            "interconnect_gbps": 0,
            "efa": False,
            "prices": {"lab-1": {"on_demand": 0.526}},
        }
    ],
}
# 60 layers of 2 MB ready through backward: DDP's buckets (1 MiB, then 25 MiB) group them, so the served
# exchange differs from the paper's per-layer one and the test tells the two apart.
PROFILE = profile(
    accelerator="T4", fw_s=0.05, bw_s=0.1, layers=[(2_000_000, (i + 1) / 60) for i in range(60)], cv=0.04
)


def test_post_predictions_and_the_validation_step_agree_on_p50(
    client: TestClient, session: Session, settings: Settings
) -> None:
    import_document(session=session, document=LAB, origin="test")
    session.commit()
    body = {
        "profiles": [PROFILE.to_dict()],
        "config": {"choices": [{"instance_type": "t4x1", "count": 4, "batch": 64}]},
        "iterations": 1000,
        "provider": "lab",
        "region": "lab-1",
    }
    answer = client.post("/v1/predictions", json=body)
    assert answer.status_code == 200, answer.text
    served = answer.json()["predicted"]

    bandwidth = active_model(
        session=session, settings=settings, network=network_spec(session=session, query=NetworkQuery())
    )
    members = [
        FleetMember(
            instance=get_instance_type(session=session, provider="lab", name="t4x1"),
            count=4,
            batch=64,
            profile=PROFILE,
        )
    ]
    validated = predict_members(members, bandwidth=bandwidth, seed=0, effort=Effort.quick())
    assert validated["iteration_s"] == pytest.approx(served["iteration_p50_s"], rel=1e-12)
    assert validated["unadapted_iteration_s"] == validated["iteration_s"]  # no quota, no co-location
    assert abs(validated["per_layer_iteration_s"] / validated["iteration_s"] - 1) > 0.01
    assert any(s.startswith("exchange:ddp_buckets(25 MiB") for s in answer.json()["sources"])


def test_a_request_may_ask_for_other_ddp_settings(client: TestClient, session: Session) -> None:
    import_document(session=session, document=LAB, origin="test")
    session.commit()
    body: dict[str, Any] = {
        "profiles": [PROFILE.to_dict()],
        "config": {"choices": [{"instance_type": "t4x1", "count": 4, "batch": 64}]},
        "iterations": 1000,
        "provider": "lab",
        "region": "lab-1",
    }
    answers = {}
    for name, extra in (
        ("served", {}),
        ("small buckets", {"bucket_cap_mb": 4}),
        ("per layer", {"exchange": "per_layer"}),
    ):
        got = client.post("/v1/predictions", json={**body, **extra})
        assert got.status_code == 200, got.text
        answers[name] = got.json()
    p50 = {k: v["predicted"]["iteration_p50_s"] for k, v in answers.items()}
    assert len(set(p50.values())) == 3
    assert "exchange:ddp_buckets(4 MiB, first 1 MiB)" in answers["small buckets"]["sources"]
    assert "exchange:per_layer" in answers["per layer"]["sources"]
    bad = client.post("/v1/predictions", json={**body, "bucket_cap_mb": 0})
    assert bad.status_code == 422
    assert bad.json()["field"] == "bucket_cap_mb"
