"""Kubernetes manifests for a plan: a JobSet (jobset.x-k8s.io/v1alpha2), one replicated job per instance type.

Kubeflow's PyTorchJob has one pod template for all workers, so it cannot place a mixed fleet; JobSet (the
API Kubeflow Trainer builds on) holds one Job template per part of the plan, each selecting its nodes by
the well-known label node.kubernetes.io/instance-type. Each part is an Indexed Job of `count` pods; a pod's
node rank is its part's offset plus JOB_COMPLETION_INDEX, and the rendezvous is pod 0 of part 0 by its
JobSet DNS name (<jobset>-<job>-0-0.<jobset>, spec.network.enableDNSHostnames). A plan across locations
becomes one JobSet per location (one cluster each); the later ones need SRIFT_MASTER_ADDR set to an address
of the first one's pod 0 that they can reach.

The network assumption travels as environment variables (srift.launch.network) and, where it changes how
pods are placed, as pod fields: NCCL sees the ENA only on the host's network (hostNetwork), EFA needs the
EFA device plugin's resource vpc.amazonaws.com/efa.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from srift.launch.layout import FleetPart, Layout
from srift.launch.network import env_lines, network_settings, placement
from srift.launch.torchrun import DEFAULT_PORT, DEFAULT_SETUP
from srift.launch.yamltext import dump

DEFAULT_IMAGE = "pytorch/pytorch:latest"

SPOT_LABELS = {
    "aws": ("eks.amazonaws.com/capacityType", {"spot": "SPOT", "on_demand": "ON_DEMAND"}),
    "gcp": ("cloud.google.com/gke-spot", {"spot": "true"}),
}
"""Node labels of the managed node groups that say the market: EKS managed node groups and GKE spot VMs."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """One JobSet: its suggested file name, the object, and its YAML text with a comment header."""

    name: str
    jobset: dict[str, Any]
    text: str


def _dns(name: str) -> str:
    """A DNS-1035 label from free text (instance types have dots)."""
    out = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    return out[:40] or "x"


def manifests(
    layout: Layout,
    *,
    script: str,
    script_args: Sequence[str] = (),
    plan_ref: str,
    image: str = DEFAULT_IMAGE,
    setup: str = DEFAULT_SETUP,
    master_port: int = DEFAULT_PORT,
) -> tuple[Manifest, ...]:
    """One JobSet per location of the plan, the rendezvous's first."""
    base = layout.launch_name
    locations = layout.locations
    head_part = layout.parts[0]
    out = []
    for k, location in enumerate(locations):
        name = base if len(locations) == 1 else f"{base}-{k}"
        parts = [p for p in layout.parts if p.location == location]
        master = f"{base if len(locations) == 1 else base + '-0'}-{_job_name(head_part)}-0-0." + (
            base if len(locations) == 1 else f"{base}-0"
        )
        jobs = [
            _replicated_job(
                layout,
                part,
                script=script,
                script_args=script_args,
                plan_ref=plan_ref,
                image=image,
                setup=setup,
                master=master if k == 0 else None,
                master_port=master_port,
                multi_location=len(locations) > 1,
            )
            for part in parts
        ]
        jobset = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name, "labels": {"srift.dev/plan": str(layout.plan_id or "")}},
            "spec": {
                "network": {"enableDNSHostnames": True},
                "failurePolicy": {"maxRestarts": 0},
                "replicatedJobs": jobs,
            },
        }
        header = [
            f"# {base}"
            + (f", location {location} ({k + 1} of {len(locations)})" if len(locations) > 1 else "")
            + f": {layout.nodes} VMs, {layout.world_size} ranks, global batch {layout.global_batch}",
            f"# network the plan was priced under: {layout.network.get('label') or 'not recorded'}",
            f"# placement: {placement(layout).text}",
        ]
        for part in parts:
            header.append(
                f"# job {_job_name(part)}: {part.count} × {part.instance_type} ({part.market}), nodes "
                f"{part.first_node}–{part.first_node + part.count - 1}, "
                f"{' + '.join(map(str, part.rank_batches))} per rank"
            )
            header += env_lines(network_settings(layout, part))
        if k > 0:
            header.append(
                "# set SRIFT_MASTER_ADDR below to an address of the first JobSet's pod 0 reachable from here"
            )
        text = "\n".join(header) + "\n" + dump(jobset)
        out.append(Manifest(f"{name}.yaml", jobset, text))
    return tuple(out)


def _job_name(part: FleetPart) -> str:
    return f"p{part.index}-{_dns(part.instance_type)}"


def _replicated_job(
    layout: Layout,
    part: FleetPart,
    *,
    script: str,
    script_args: Sequence[str],
    plan_ref: str,
    image: str,
    setup: str,
    master: str | None,
    master_port: int,
    multi_location: bool,
) -> dict[str, Any]:
    settings = network_settings(layout, part)
    provider = part.provider or layout.provider
    env = [
        {"name": "SRIFT_PLAN", "value": plan_ref},
        {"name": "SRIFT_NODE_OFFSET", "value": str(part.first_node)},
        {"name": "SRIFT_NNODES", "value": str(layout.nodes)},
        {"name": "SRIFT_MASTER_ADDR", "value": master or "SET-TO-THE-FIRST-JOBSET-POD-0-ADDRESS"},
        *({"name": s.name, "value": s.value} for s in settings),
    ]
    command = " && ".join(
        [
            setup,
            "export SRIFT_NODE_RANK=$((SRIFT_NODE_OFFSET + JOB_COMPLETION_INDEX))",
            f"exec torchrun --nnodes=$SRIFT_NNODES --node-rank=$SRIFT_NODE_RANK "
            f"--nproc-per-node={part.procs_per_node} --master-addr=$SRIFT_MASTER_ADDR "
            f"--master-port={master_port} " + " ".join([script, *script_args]),
        ]
    )
    selector = {"node.kubernetes.io/instance-type": part.instance_type}
    if multi_location and part.region:
        selector["topology.kubernetes.io/region"] = part.region
    label = SPOT_LABELS.get(provider)
    if label is not None and part.market in label[1]:
        selector[label[0]] = label[1][part.market]
    limits: dict[str, str] = {}
    if part.gpus_per_node > 0:
        limits["nvidia.com/gpu"] = str(part.gpus_per_node)
    if layout.network.get("transport") == "efa":
        limits["vpc.amazonaws.com/efa"] = "1"
    container: dict[str, Any] = {
        "name": "trainer",
        "image": image,
        "command": ["/bin/sh", "-c", command],
        "env": env,
        "ports": [{"containerPort": master_port, "name": "rendezvous", "protocol": "TCP"}],
    }
    if limits:
        container["resources"] = {"limits": limits}
    pod: dict[str, Any] = {"restartPolicy": "Never", "nodeSelector": selector, "containers": [container]}
    if layout.network.get("ena_visible") and layout.network.get("transport", "tcp") == "tcp":
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    return {
        "name": _job_name(part),
        "replicas": 1,
        "template": {
            "spec": {
                "parallelism": part.count,
                "completions": part.count,
                "completionMode": "Indexed",
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": {"srift.dev/part": str(part.index)}},
                    "spec": pod,
                },
            }
        },
    }
