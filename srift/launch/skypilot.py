"""SkyPilot tasks for a plan: one task per homogeneous part (instance type, market, location).

SkyPilot launches one cluster per task, so a mixed fleet is several tasks joined by one torchrun rendezvous:
part 0's head node hosts it, and each later part is launched with `--env SRIFT_MASTER_ADDR=<that address>`
(`sky status --ip <part 0's cluster>`). A part's node rank is its offset in the plan plus SkyPilot's
SKYPILOT_NODE_RANK. Field names follow SkyPilot's task schema (skypilot 0.14.1, sky/utils/schemas.py:
get_task_schema, get_resources_schema); `network_tier: best` is what makes SkyPilot attach EFA on AWS
(sky/clouds/aws.py, make_deploy_resources_variables).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from srift.launch.layout import FleetPart, Layout, LayoutError
from srift.launch.network import env_lines, network_settings, placement
from srift.launch.torchrun import DEFAULT_PORT, DEFAULT_SETUP
from srift.launch.yamltext import dump

SKYPILOT_CLOUDS = frozenset({"aws", "gcp", "azure", "lambda", "oci", "ibm", "runpod", "nebius", "kubernetes"})
"""Providers SkyPilot launches (skypilot 0.14.1 sky/skylet/constants.py ALL_CLOUDS, those Srift's catalog
names); a plan on another provider (the testbed) cannot be a SkyPilot task."""


@dataclass(frozen=True, slots=True)
class TaskFile:
    """One emitted file: its suggested name, the task as data, and the text with its comments."""

    name: str
    task: dict[str, Any]
    text: str


def _provider(layout: Layout, part: FleetPart) -> tuple[str, str | None]:
    return (part.provider or layout.provider, part.region or layout.region)


def tasks(
    layout: Layout,
    *,
    script: str,
    script_args: Sequence[str] = (),
    plan_ref: str,
    setup: str = DEFAULT_SETUP,
    master_port: int = DEFAULT_PORT,
) -> tuple[TaskFile, ...]:
    """The SkyPilot tasks of a plan, part 0 first."""
    plan_name = layout.launch_name
    out = []
    head_cluster = f"{plan_name}-0"
    for part in layout.parts:
        provider, region = _provider(layout, part)
        if provider not in SKYPILOT_CLOUDS:
            raise LayoutError(
                f"SkyPilot cannot launch {provider} VMs ({part.instance_type}); emit torchrun commands"
            )
        settings = network_settings(layout, part)
        resources: dict[str, Any] = {
            "infra": f"{provider}/{region}" if region else provider,
            "instance_type": part.instance_type,
            "use_spot": part.market == "spot",
        }
        if layout.network.get("transport") == "efa":
            resources["network_tier"] = "best"
        envs: dict[str, str | None] = {
            "SRIFT_PLAN": plan_ref,
            "SRIFT_NODE_OFFSET": str(part.first_node),
            "SRIFT_NNODES": str(layout.nodes),
            **{s.name: s.value for s in settings},
        }
        if part.index > 0:
            envs["SRIFT_MASTER_ADDR"] = None
        args = " ".join([script, *script_args])
        run = "\n".join(
            [
                "set -e",
                "export SRIFT_NODE_RANK=$((SRIFT_NODE_OFFSET + SKYPILOT_NODE_RANK))",
                'MASTER_ADDR="${SRIFT_MASTER_ADDR:-$(echo "$SKYPILOT_NODE_IPS" | head -n1)}"',
                f"torchrun --nnodes=$SRIFT_NNODES --node-rank=$SRIFT_NODE_RANK "
                f"--nproc-per-node={part.procs_per_node} --master-addr=$MASTER_ADDR "
                f"--master-port={master_port} {args}",
            ]
        )
        task: dict[str, Any] = {
            "name": f"{plan_name}-{part.index}",
            "num_nodes": part.count,
            "resources": resources,
            "envs": envs,
            "setup": setup,
            "run": run + "\n",
        }
        where = f" [{part.location}]" if part.location else ""
        header = [
            f"# {plan_name}, part {part.index + 1} of {len(layout.parts)}: {part.count} × "
            f"{part.instance_type} ({part.market}){where} @ {part.batch} per VM "
            f"({' + '.join(map(str, part.rank_batches))} per rank), nodes {part.first_node}–"
            f"{part.first_node + part.count - 1} of {layout.nodes}",
            f"# network the plan was priced under: {layout.network.get('label') or 'not recorded'}",
            *env_lines(settings),
            f"# placement: {placement(layout).text}"
            + ("; SkyPilot's task has no placement-group field" if placement(layout).required else ""),
        ]
        if part.index == 0:
            header.append(f"# launch first: sky launch -c {head_cluster} {plan_name}-0.yaml")
        else:
            header.append(
                f"# launch after part 1: sky launch -c {plan_name}-{part.index} "
                f"{plan_name}-{part.index}.yaml "
                f"--env SRIFT_MASTER_ADDR=$(sky status --ip {head_cluster})"
            )
        text = "\n".join(header) + "\n" + dump(task)
        out.append(TaskFile(f"{plan_name}-{part.index}.yaml", task, text))
    return tuple(out)
