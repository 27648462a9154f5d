"""Transport as a fact of predictions and plans, measured rates (given or from probe jobs), sweeps of
fleets in one call, and fleets that use part of each VM's GPUs."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from srift.api.schemas.plans import parse_plan_request
from srift.api.schemas.predictions import parse_prediction_request
from srift.bandwidth.prior import EFA, NCCL_DEFAULT_FLOWS, TCP_NIC_EFFICIENCY
from srift.bandwidth.samples import ProbeRecord, busbw_gbps, store_samples
from srift.catalog.custom import import_document
from srift.db.tables import Job
from srift.domain.requests import PredictionQuery
from srift.errors import Conflict, Infeasible, InvalidInput, NotFound
from srift.services.network import probe_rates
from srift.services.plans import create_plan
from srift.services.predictions import answer
from srift.settings import Settings

from .test_predictions import LAB, PROFILE

EFA_LAB = {
    **LAB,
    "snapshot": "lab-efa",
    "instance_types": [
        *LAB["instance_types"],  # type: ignore[list-item]
        {
            "name": "v100x8e",
            "gpu_model": "V100",
            "gpu_count": 8,
            "gpu_memory_gib": 32,
            "vcpus": 96,
            "memory_gib": 768,
            "network_gbps": 100,
            "interconnect": "nvlink",
            "interconnect_gbps": 1200,
            "efa": True,
            "prices": {"lab-1": {"on_demand": 31.2}},
        },
    ],
}


@pytest.fixture
def lab(session: Session) -> Session:
    import_document(session=session, document=EFA_LAB, origin="test")
    session.commit()
    return session


def _request(**over: Any) -> PredictionQuery:
    doc: dict[str, Any] = {
        "profiles": [PROFILE.to_dict()],
        "config": {"choices": [{"instance_type": "v100x1", "count": 4, "batch": 64}]},
        "iterations": 1000,
        "provider": "lab",
        "region": "lab-1",
        "snapshot": "lab-efa",
    }
    doc.update(over)
    return parse_prediction_request(doc).to_domain()


def test_predictions_name_the_transport_and_a_measured_rate_replaces_the_prior(
    lab: Session, settings: Settings
) -> None:
    out = answer(session=lab, settings=settings, query=_request())
    net = out["network"]
    assert net["transport"] == "tcp" and net["library"] == "nccl" and not net["placement_group"]
    assert net["flows_per_peer"] == {"v100x1": NCCL_DEFAULT_FLOWS}
    (rate,) = net["rates"]
    assert rate["source"] == "prior:alpha-beta" and rate["gbps"] == pytest.approx(TCP_NIC_EFFICIENCY * 10)
    assert "srift probe run --quick --instance-type v100x1" in net["recommendation"]

    slow = answer(session=lab, settings=settings, query=_request(network={"measured_gbps": {"v100x1": 1.0}}))
    assert slow["network"]["rates"][0] == {
        "instance_type": "v100x1",
        "gbps": 1.0,
        "high_gbps": None,
        "limit": "measured (given in the request)",
        "source": "measured",
    }
    assert slow["network"]["recommendation"] is None
    assert slow["breakdown"]["exposed_network_s"] > out["breakdown"]["exposed_network_s"]
    assert slow["predicted"]["iteration_s"] > out["predicted"]["iteration_s"]

    single = answer(
        session=lab,
        settings=settings,
        query=_request(config={"choices": [{"instance_type": "v100x1", "count": 1, "batch": 64}]}),
    )
    assert single["network"]["recommendation"] is None


def test_efa_is_refused_for_a_type_without_it_and_used_where_it_exists(
    lab: Session, settings: Settings
) -> None:
    with pytest.raises(InvalidInput) as caught:
        answer(session=lab, settings=settings, query=_request(network={"transport": "efa"}))
    assert caught.value.field == "config.choices[0].instance_type" and "EFA" in caught.value.detail
    config = {"choices": [{"instance_type": "v100x8e", "count": 2, "batch": 512}]}
    tcp = answer(session=lab, settings=settings, query=_request(config=config))
    efa = answer(session=lab, settings=settings, query=_request(config=config, network={"transport": "efa"}))
    assert efa["network"]["transport"] == "efa" and "EFA" in efa["network"]["rates"][0]["limit"]
    assert efa["network"]["rates"][0]["gbps"] == pytest.approx(EFA.efficiency * 100)
    assert tcp["network"]["rates"][0]["gbps"] == pytest.approx(TCP_NIC_EFFICIENCY * 100)


def test_a_sweep_answers_each_fleet_as_its_own_prediction_would(lab: Session, settings: Settings) -> None:
    fleets = [{"choices": [{"instance_type": "v100x1", "count": n, "batch": 64}]} for n in (1, 2, 4)] + [
        {"choices": [{"instance_type": "v100x4", "count": 2, "batch": 128, "gpus": 2}]}
    ]
    sweep = answer(session=lab, settings=settings, query=_request(config=None, configs=fleets))
    assert sweep["count"] == 4 and len(sweep["predictions"]) == 4 and sweep["elapsed_s"] > 0
    for fleet, got in zip(fleets, sweep["predictions"], strict=True):
        alone = answer(session=lab, settings=settings, query=_request(config=fleet))
        assert got["predicted"] == alone["predicted"] and got["label"] == alone["label"]
    assert [p["label"] for p in sweep["predictions"]][-1] == "2×v100x4[2gpu]@128 (od)"
    assert {r["instance_type"] for r in sweep["network"]["rates"]} == {"v100x1", "v100x4"}

    bad = [*fleets[:1], {"choices": [{"instance_type": "v100x1", "count": 1, "batch": 65}]}]
    with pytest.raises(InvalidInput) as caught:
        answer(session=lab, settings=settings, query=_request(config=None, configs=bad))
    assert caught.value.field == "configs[1].choices[0].batch"
    with pytest.raises(InvalidInput) as caught:
        answer(session=lab, settings=settings, query=_request(configs=fleets))
    assert caught.value.field == "config" and "exactly one" in caught.value.detail


def test_part_of_a_vms_gpus_changes_the_per_gpu_batch_and_the_ring_not_the_price(
    lab: Session, settings: Settings
) -> None:
    whole = answer(
        session=lab,
        settings=settings,
        query=_request(config={"choices": [{"instance_type": "v100x4", "count": 1, "batch": 128}]}),
    )
    half = answer(
        session=lab,
        settings=settings,
        query=_request(
            config={"choices": [{"instance_type": "v100x4", "count": 1, "batch": 128, "gpus": 2}]}
        ),
    )
    assert whole["choices"][0]["gpus"] == 4 and half["choices"][0]["gpus"] == 2
    assert half["choices"][0]["instance_gpus"] == 4 and half["choices"][0]["per_gpu_batch"] == 64
    assert half["usd_per_hr"] == whole["usd_per_hr"] == pytest.approx(12.24)
    assert half["breakdown"]["compute_s"] > whole["breakdown"]["compute_s"]
    choice = {"instance_type": "v100x4", "count": 1, "batch": 128, "gpus": 5}
    with pytest.raises(InvalidInput) as caught:
        answer(session=lab, settings=settings, query=_request(config={"choices": [choice]}))
    assert caught.value.field == "config.choices[0].gpus" and "fewer than the 5" in caught.value.detail
    with pytest.raises(InvalidInput) as caught:
        answer(
            session=lab,
            settings=settings,
            query=_request(
                config={"choices": [{"instance_type": "v100x1", "count": 1, "batch": 8, "gpus": 2}]}
            ),
        )
    assert caught.value.field == "config.choices[0].gpus"


def _job_with_samples(session: Session, *, rate_gbps: float, sizes: tuple[int, ...]) -> int:
    job = Job(kind="probe", provider="local", state="succeeded", request={})
    session.add(job)
    session.flush()
    records = []
    for k, size in enumerate(sizes):
        busbw = rate_gbps  # two ranks on two nodes: busbw is the node rate
        time_s = size * 8 * 2 * (1 / 2) / (busbw * 1e9)
        records.append(
            ProbeRecord(
                run_id=f"quick-{job.id}",
                provider="lab",
                instance_type="v100x1",
                backend="nccl",
                buffer_bytes=size,
                world_size=2,
                nodes=2,
                ranks_per_node=1,
                time_s=time_s,
                algbw_gbps=size * 8 / time_s / 1e9,
                busbw_gbps=busbw_gbps(buffer_bytes=size, world_size=2, time_s=time_s),
                repeat=k,
            )
        )
    store_samples(session=session, records=records, origin="job", job_id=job.id)
    session.flush()
    return job.id


def test_probe_jobs_give_measured_rates_and_bad_ids_name_the_field(lab: Session, settings: Settings) -> None:
    job_id = _job_with_samples(lab, rate_gbps=3.0, sizes=(1 << 20, 16 << 20, 64 << 20))
    rates = probe_rates(session=lab, job_ids=[job_id])
    assert rates["v100x1"][0] == pytest.approx(3.0)
    assert f"probe job {job_id}" in rates["v100x1"][1] and "≥ 16 MiB" in rates["v100x1"][1]
    out = answer(session=lab, settings=settings, query=_request(network={"probe_job_ids": [job_id]}))
    (rate,) = out["network"]["rates"]
    assert rate["source"] == "measured" and rate["gbps"] == pytest.approx(3.0)
    # A missing id is 404 like every other missing id (docs/limits.md); a job that measured no two nodes
    # exists but cannot answer: 409.
    for ids, error in (
        ([job_id + 100], NotFound),
        ([_job_with_samples(lab, rate_gbps=1.0, sizes=())], Conflict),
    ):
        with pytest.raises(error) as caught:
            answer(session=lab, settings=settings, query=_request(network={"probe_job_ids": ids}))
        assert caught.value.field == "network.probe_job_ids[0]"


def test_plans_report_the_network_and_efa_keeps_only_efa_types(lab: Session, settings: Settings) -> None:
    base = {
        "profiles": [PROFILE.to_dict()],
        "global_batch": 512,
        "iterations": 1000,
        "provider": "lab",
        "region": "lab-1",
        "snapshot": "lab-efa",
        "market": "on_demand",
        "availability": {"v100x1": 8, "v100x8e": 2},
    }
    plan = create_plan(session=lab, settings=settings, query=parse_plan_request(base).to_domain()).result
    assert plan["network"]["transport"] == "tcp"
    efa = create_plan(
        session=lab,
        settings=settings,
        query=parse_plan_request({**base, "network": {"transport": "efa"}}).to_domain(),
    ).result
    assert efa["network"]["transport"] == "efa"
    assert {c["instance_type"] for c in efa["choices"]} == {"v100x8e"}
    assert any("without EFA" in w for w in efa["warnings"])
    with pytest.raises(Infeasible) as caught:
        create_plan(
            session=lab,
            settings=settings,
            query=parse_plan_request(
                {**base, "availability": {"v100x1": 8}, "network": {"transport": "efa"}}
            ).to_domain(),
        )
    assert caught.value.field == "network.transport"


def test_the_api_answers_sweeps_and_states_the_network_rules(
    client: TestClient, lab: Session, write_headers: dict[str, str]
) -> None:
    body = {
        "profiles": [PROFILE.to_dict()],
        "configs": [{"choices": [{"instance_type": "v100x1", "count": n, "batch": 64}]} for n in (2, 3)],
        "iterations": 10,
        "provider": "lab",
        "region": "lab-1",
        "snapshot": "lab-efa",
        "network": {"library": "gloo", "placement_group": True},
    }
    reply = client.post("/v1/predictions", json=body, headers=write_headers)
    assert reply.status_code == 200, reply.text
    got = reply.json()
    assert got["count"] == 2 and [p["label"] for p in got["predictions"]] == [
        "2×v100x1@64 (od)",
        "3×v100x1@64 (od)",
    ]
    assert got["network"]["library"] == "gloo" and got["network"]["placement_group"] is True
    bad = client.post(
        "/v1/predictions", json={**body, "network": {"flows_per_peer": 65}}, headers=write_headers
    )
    assert bad.status_code == 422 and "flows_per_peer" in bad.text
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    flows = schema["NetworkIn"]["properties"]["flows_per_peer"]
    assert any(option.get("maximum") == 64 for option in flows.get("anyOf", [flows]))
    assert "gpus" in schema["FleetChoiceIn"]["properties"]


def test_plans_on_the_aws_prior_state_its_flows_rate_and_fast_end_and_recommend_a_quick_probe() -> None:
    from srift.bandwidth.prior import TCP_FLOW_EFFICIENCY, AlphaBetaPrior
    from srift.catalog.shipped import shipped_files, shipped_snapshot
    from srift.domain.network import NetworkSpec
    from srift.services.network import network_view

    path = next(p for p in shipped_files() if p.name == "aws.yaml")
    g4dn = next(t.instance for t in shipped_snapshot(path).types if t.instance.name == "g4dn.12xlarge")
    view = network_view(NetworkSpec(), instances=[g4dn], model=AlphaBetaPrior(), multi_node=True)
    assert view["flows_per_peer"] == {"g4dn.12xlarge": 1}
    (rate,) = view["rates"]
    assert rate["gbps"] == pytest.approx(TCP_FLOW_EFFICIENCY * 5) and rate["high_gbps"] > 5 * rate["gbps"]
    advice = view["recommendation"]
    assert "1 flow(s) × 5 Gbit/s" in advice and "fallback" in advice and "fast end" in advice
    assert "srift probe run --quick --instance-type g4dn.12xlarge" in advice and "ena_visible" in advice
    seen = network_view(
        NetworkSpec(ena_visible=True), instances=[g4dn], model=AlphaBetaPrior(), multi_node=True
    )
    assert seen["flows_per_peer"] == {"g4dn.12xlarge": 16} and seen["rates"][0]["high_gbps"] is None
    assert "ena_visible" not in seen["recommendation"] and "probe run --quick" in seen["recommendation"]


def test_requests_take_ena_visible_and_the_schema_states_it() -> None:
    query = _request(network={"ena_visible": True})
    assert query.network.ena_visible is True
    assert _request().network.ena_visible is None
    with pytest.raises(InvalidInput) as bad:
        _request(network={"ena_visible": "sometimes"})
    assert "ena_visible" in str(bad.value.field)
