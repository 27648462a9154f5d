"""Launch files checked by the tools that read them: torchrun's own argument parser, SkyPilot's task and
resources JSON schemas (vendored from the skypilot wheel, see schemas/), and for Kubernetes the JobSet
models of kubeflow-trainer-api plus the strict batch/v1 Job schema of kubernetes-validate."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubeflow_trainer_api.models.jobset_v1alpha2_job_set import JobsetV1alpha2JobSet
from torch.distributed.run import get_args_parser

from srift.launch.emit import EmitFormat, LaunchOptions, emit
from srift.launch.layout import LayoutError, apportion, layout_of, split_evenly
from srift.launch.network import socket_split

SCHEMAS = json.loads((Path(__file__).parent / "schemas" / "skypilot-0.14.1.json").read_text())
K8S_VERSION = "1.33"


def _choice(name: str, count: int, batch: int, gpus: int, **extra: Any) -> dict[str, Any]:
    return {
        "instance_type": name,
        "market": extra.pop("market", "on_demand"),
        "count": count,
        "batch": batch,
        "gpus": max(gpus, 1),
        "per_gpu_batch": batch / max(gpus, 1),
        "price_usd_per_hr": 1.0,
        "instance_gpus": gpus,
        "location": extra.pop("location", None),
    }


def _plan(choices: list[dict[str, Any]], *, network: dict[str, Any], plan_id: int = 7) -> dict[str, Any]:
    flows = network.pop("flows", {})
    return {
        "id": plan_id,
        "choices": choices,
        "global_batch": sum(c["count"] * c["batch"] for c in choices),
        "iterations": 1000,
        "predicted": {"iteration_s": 0.42},
        "network": {
            "transport": network.get("transport", "tcp"),
            "library": "nccl",
            "placement_group": network.get("placement_group", False),
            "flows_per_peer": flows,
            "label": "tcp/nccl, no placement group",
        },
        "request": {"provider": "aws", "region": "us-east-1", "network": network},
    }


HOMOGENEOUS = _plan([_choice("g5.12xlarge", 2, 384, 4)], network={"flows": {"g5.12xlarge": 1}})
MIXED = _plan(
    [_choice("g5.12xlarge", 2, 96, 4), _choice("g4dn.12xlarge", 4, 40, 4, market="spot")],
    network={"ena_visible": True, "flows": {"g5.12xlarge": 16, "g4dn.12xlarge": 16}},
)
MULTI_REGION = _plan(
    [
        _choice("p4d.24xlarge", 1, 512, 8, location="aws/us-east-1"),
        _choice("p4d.24xlarge", 2, 256, 8, location="aws/eu-west-1", market="spot"),
    ],
    network={"transport": "efa", "placement_group": True},
)
PLANS = {"homogeneous": HOMOGENEOUS, "mixed": MIXED, "multi-region": MULTI_REGION}


def _torchrun_args(line: str) -> tuple[dict[str, str], Any]:
    """The environment and torchrun's parsed arguments of one emitted command line."""
    tokens = shlex.split(line)
    assert tokens[0] == "env"
    k = 1
    env = {}
    while "=" in tokens[k] and not tokens[k].startswith("-"):
        name, _, value = tokens[k].partition("=")
        env[name] = value
        k += 1
    assert tokens[k] == "torchrun"
    return env, get_args_parser().parse_args(tokens[k + 1 :])


def _check_network_env(env: dict[str, str], plan: dict[str, Any], instance_type: str) -> None:
    """The NCCL settings say what the plan's network assumed for this type."""
    network = plan["network"]
    if network["transport"] == "efa":
        assert env["FI_PROVIDER"] == "efa"
        assert "NCCL_NET" not in env
        return
    assert env["NCCL_NET"] == "Socket"
    flows = network["flows_per_peer"][instance_type]
    assert int(env["NCCL_SOCKET_NTHREADS"]) * int(env["NCCL_NSOCKS_PERTHREAD"]) == flows


@pytest.mark.parametrize("name", PLANS)
def test_torchrun_lines_parse_with_torchruns_own_parser_and_carry_the_plan(name: str) -> None:
    plan = PLANS[name]
    layout = layout_of(plan)
    [out] = emit(plan, EmitFormat.TORCHRUN, LaunchOptions(script="train.py", script_args=("--lr", "0.1")))
    commands = out.content
    lines = [ln for ln in out.text.splitlines() if ln.startswith("env ")]
    assert len(lines) == len(commands) == layout.nodes
    ranks = 0
    for node, line in enumerate(lines):
        env, args = _torchrun_args(line)
        part = layout.part_of_node(node)
        assert (args.nnodes, args.node_rank, args.nproc_per_node) == (
            str(layout.nodes),
            node,
            str(part.procs_per_node),
        )
        assert args.training_script == "train.py" and args.training_script_args == ["--lr", "0.1"]
        assert args.master_port == 29500
        assert env["SRIFT_PLAN"] == "7" and env["SRIFT_NODE_RANK"] == str(node)
        assert layout.first_rank_of_node(node) == ranks
        ranks += part.procs_per_node
        _check_network_env(env, plan, part.instance_type)
    assert ranks == layout.world_size
    assert sum(layout.rank_batches()) == plan["global_batch"]


def test_the_master_address_is_left_to_the_shell_until_given() -> None:
    [out] = emit(HOMOGENEOUS, EmitFormat.TORCHRUN)
    _, args = _torchrun_args(out.content[0].line())
    assert args.master_addr.startswith("${SRIFT_MASTER_ADDR:?")
    [given] = emit(HOMOGENEOUS, EmitFormat.TORCHRUN, LaunchOptions(master_addr="10.0.0.5"))
    assert _torchrun_args(given.content[1].line())[1].master_addr == "10.0.0.5"


@pytest.mark.parametrize("name", PLANS)
def test_skypilot_tasks_validate_against_skypilots_task_and_resources_schemas(name: str) -> None:
    plan = PLANS[name]
    layout = layout_of(plan)
    files = emit(plan, EmitFormat.SKYPILOT)
    assert len(files) == len(layout.parts)
    for part, f in zip(layout.parts, files, strict=True):
        task = yaml.safe_load(f.text)
        assert task == f.content
        jsonschema.Draft202012Validator(SCHEMAS["task"]).validate(task)
        jsonschema.Draft202012Validator(SCHEMAS["resources"]).validate(task["resources"])
        res = task["resources"]
        assert res["instance_type"] == part.instance_type and task["num_nodes"] == part.count
        assert res["use_spot"] is (part.market == "spot")
        region = part.region or "us-east-1"
        assert res["infra"] == f"aws/{region}"
        assert (res.get("network_tier") == "best") is (plan["network"]["transport"] == "efa")
        envs = {k: v for k, v in task["envs"].items() if v is not None}
        _check_network_env(envs, plan, part.instance_type)
        assert ("SRIFT_MASTER_ADDR" in task["envs"]) is (part.index > 0)
        run_line = next(ln for ln in task["run"].splitlines() if ln.startswith("torchrun"))
        expanded = run_line.replace("$SRIFT_NNODES", str(layout.nodes)).replace("$SRIFT_NODE_RANK", "0")
        args = get_args_parser().parse_args(shlex.split(expanded.replace("$MASTER_ADDR", "10.0.0.1"))[1:])
        assert args.nproc_per_node == str(part.procs_per_node)


def test_a_task_the_schema_refuses_is_refused() -> None:
    """The vendored schema is strict: the check above can fail."""
    [f] = emit(HOMOGENEOUS, EmitFormat.SKYPILOT)
    bad = copy.deepcopy(f.content)
    bad["resources"]["instance_typ"] = "g5.12xlarge"
    with pytest.raises(jsonschema.ValidationError) as caught:
        jsonschema.Draft202012Validator(SCHEMAS["resources"]).validate(bad["resources"])
    assert "instance_typ" in str(caught.value)


@pytest.mark.parametrize("name", PLANS)
def test_kubernetes_jobsets_validate_as_jobset_and_strict_batch_v1_jobs(name: str) -> None:
    plan = PLANS[name]
    layout = layout_of(plan)
    files = emit(plan, EmitFormat.KUBERNETES, LaunchOptions(image="example.com/train:1"))
    assert len(files) == len(layout.locations)
    seen_parts = []
    for f in files:
        doc = yaml.safe_load(f.text)
        assert doc == f.content
        model = JobsetV1alpha2JobSet.from_dict(doc)
        assert model is not None and model.to_dict() == doc, "a field the JobSet API does not know"
        for rjob in doc["spec"]["replicatedJobs"]:
            job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": rjob["name"]}}
            kubernetes_validate.validate({**job, **rjob["template"]}, K8S_VERSION, strict=True)
            part = layout.parts[
                int(rjob["template"]["spec"]["template"]["metadata"]["labels"]["srift.dev/part"])
            ]
            seen_parts.append(part.index)
            spec = rjob["template"]["spec"]
            assert spec["completions"] == spec["parallelism"] == part.count
            pod = spec["template"]["spec"]
            assert pod["nodeSelector"]["node.kubernetes.io/instance-type"] == part.instance_type
            container = pod["containers"][0]
            env = {e["name"]: e["value"] for e in container["env"]}
            _check_network_env(env, plan, part.instance_type)
            assert env["SRIFT_NODE_OFFSET"] == str(part.first_node)
            assert container["resources"]["limits"]["nvidia.com/gpu"] == str(part.gpus_per_node)
            efa = plan["network"]["transport"] == "efa"
            assert ("vpc.amazonaws.com/efa" in container["resources"]["limits"]) is efa
            assert pod.get("hostNetwork", False) is bool(plan["request"]["network"].get("ena_visible"))
    assert sorted(seen_parts) == [p.index for p in layout.parts]


def test_a_manifest_kubernetes_refuses_is_refused() -> None:
    [f] = emit(HOMOGENEOUS, EmitFormat.KUBERNETES)
    spec = copy.deepcopy(f.content["spec"]["replicatedJobs"][0]["template"]["spec"])
    spec["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": spec}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_skypilot_cannot_launch_testbed_types() -> None:
    plan = copy.deepcopy(HOMOGENEOUS)
    plan["request"]["provider"] = "testbed"
    with pytest.raises(LayoutError, match="torchrun"):
        emit(plan, EmitFormat.SKYPILOT)


def test_batches_split_evenly_and_in_proportion() -> None:
    assert split_evenly(97, 4) == (25, 24, 24, 24)
    assert apportion(10, (96, 96, 40)) == (4, 4, 2)
    assert sum(apportion(7, (3, 1, 1))) == 7
    assert socket_split(16) == (2, 8)
    assert socket_split(1) == (1, 1)
    threads, socks = socket_split(12)
    assert threads * socks == 12


def test_a_plan_whose_batches_do_not_add_up_is_refused() -> None:
    plan = copy.deepcopy(MIXED)
    plan["global_batch"] += 1
    with pytest.raises(LayoutError, match="global batch"):
        layout_of(plan)
