"""A strict contract: every request body reads integers, numbers and booleans as JSON Schema does (3.0 is an
integer; `true`, `0` for a boolean and `"3"` are refused), and every model a body reaches is strict."""

from __future__ import annotations

import importlib
import types
import typing
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel

from srift.api.app import ROUTE_MODULES
from srift.documents import StrictModel


def _models(annotation: Any, seen: set[type[BaseModel]]) -> None:
    """Every pydantic model reachable from `annotation` (model fields, list items, unions, dict values)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return
        seen.add(annotation)
        for field in annotation.model_fields.values():
            _models(field.annotation, seen)
        return
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        _models(typing.get_args(annotation)[0], seen)
        return
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            _models(arg, seen)


def _request_models() -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    for name in (*ROUTE_MODULES, "training_runs", "bandwidth_curves"):
        for route in importlib.import_module(f"srift.api.routes.{name}").router.routes:
            if isinstance(route, APIRoute) and route.body_field is not None:
                _models(route.body_field.field_info.annotation, seen)
    return seen


def test_every_model_a_request_body_reaches_is_strict() -> None:
    models = _request_models()
    assert len(models) > 15
    lax = sorted(m.__name__ for m in models if not issubclass(m, StrictModel))
    assert lax == []


def _profile() -> dict[str, Any]:
    return {
        "model": "strict-mlp",
        "accelerator": "NVIDIA T4",
        "max_batch": 64,
        "forward": {"batches": [1, 64], "times_s": [0.002, 0.02]},
        "backward": {"batches": [1, 64], "times_s": [0.004, 0.04]},
        "layers": [{"name": "fc", "grad_bytes": 4096, "ready_frac": 1.0}],
        "straggler_cv": 0.05,
    }


@pytest.mark.parametrize(
    ("path", "change", "field"),
    [
        ("/v1/profiles", {"max_batch": True}, "max_batch"),
        ("/v1/profiles", {"max_batch": "64"}, "max_batch"),
        ("/v1/profiles", {"straggler_cv": False}, "straggler_cv"),
        ("/v1/profiles", {"straggler_cv": "0.05"}, "straggler_cv"),
        ("/v1/profiles", {"threads": 2.5}, "threads"),
        ("/v1/plans", {"fallback": 0}, "fallback"),
        ("/v1/plans", {"price_interruptions": "true"}, "price_interruptions"),
        ("/v1/plans", {"global_batch": "64"}, "global_batch"),
        ("/v1/plans", {"iterations": True}, "iterations"),
        ("/v1/plans", {"time_limit_s": False}, "time_limit_s"),
    ],
)
def test_lax_values_are_refused_with_their_field(
    client: TestClient, write_headers: dict[str, str], path: str, change: dict[str, Any], field: str
) -> None:
    body = _profile() if path == "/v1/profiles" else {"profiles": [_profile()], "global_batch": 64}
    if path == "/v1/plans":
        body["iterations"] = 100
    body.update(change)
    r = client.post(path, json=body, headers=write_headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_whole_floats_stay_integers(client: TestClient, write_headers: dict[str, str]) -> None:
    r = client.post("/v1/profiles", json={**_profile(), "max_batch": 64.0}, headers=write_headers)
    assert r.status_code == 201, r.text
    assert client.get(f"/v1/profiles/{r.json()['id']}", headers=write_headers).json()["max_batch"] == 64


def _work() -> dict[str, Any]:
    """One structure layer with every field (the largest form a client sends)."""
    one = {
        "matmul_flops": [0.0, 0.0],
        "matmul_bytes": [0.0, 0.0],
        "other_bytes": [0.0, 0.0],
        "kernels": 0,
        "conv_flops": [0.0, 0.0],
        "unaligned_flops": [0.0, 0.0],
    }
    return {"name": "layer", "forward": one, "backward": one, "backward_order": 0, "grad_bytes": 0}


def _sample(i: int) -> dict[str, Any]:
    return {
        "schema": "srift-probe/1",
        "run_id": "r",
        "provider": "local",
        "instance_type": "local",
        "backend": "gloo",
        "buffer_bytes": 1024,
        "world_size": 2,
        "nodes": 2,
        "ranks_per_node": 1,
        "time_s": 0.001,
        "algbw_gbps": 0.008192,
        "busbw_gbps": 0.008192,
        "async_count": 1,
        "repeat": i,
        "region": "",
        "zone": "",
        "gpu_name": "",
        "cpu_name": "",
        "cpu_cores": 0,
        "memory_gib": 0.0,
        "rated_gbps": 0.0,
    }


def test_over_long_lists_are_422_naming_the_list_not_413(
    client: TestClient, write_headers: dict[str, str]
) -> None:
    """One item more than a list's maximum, each item in its fullest form, still fits the body cap: the
    answer names the list (a 413 would say only that the body is large)."""
    from srift.limits import MAX_LAYERS_PER_PROFILE, MAX_PROBE_RESULTS_PER_BATCH, MAX_STRUCTURE_LAYERS

    layers = [{"name": f"l{i}", "grad_bytes": 0, "ready_frac": 1.0, "exec_prob": 1.0} for i in range(5001)]
    assert len(layers) == MAX_LAYERS_PER_PROFILE + 1
    structure = {
        "precision": "fp32",
        "method": "",
        "memory": {
            "parameter_bytes": 0,
            "gradient_bytes": 0,
            "optimizer_state_bytes": 0,
            "optimizer": "",
            "activation_bytes": [0.0, 0.0],
            "saved_bytes": [0.0, 0.0],
        },
        "update_bytes": 0,
        "update_kernels": 0,
        "layers": [_work() for _ in range(MAX_STRUCTURE_LAYERS + 1)],
    }
    cases = [
        ("/v1/profiles", {**_profile(), "layers": layers}, "layers"),
        ("/v1/profiles", {**_profile(), "structure": structure}, "structure.layers"),
        (
            "/v1/probe-results",
            {"samples": [_sample(i) for i in range(MAX_PROBE_RESULTS_PER_BATCH + 1)], "final": True},
            "samples",
        ),
    ]
    for path, body, field in cases:
        r = client.post(path, json=body, headers=write_headers)
        assert r.status_code == 422, (path, r.status_code, r.text[:300])
        assert r.json()["field"] == field
