"""torchrun command lines for every VM of a plan: rendezvous, node ranks, ranks per VM and per-rank batches.

One line per VM, run on that VM. The static rendezvous (torchrun's default with --master-addr) numbers
global ranks by node rank and then local rank, also when VMs run different numbers of ranks (torch's
elastic agent gives each node the cumulative sum of the local world sizes before it:
torch/distributed/elastic/agent/server/api.py, _assign_worker_ranks), so rank r of every line is rank r of
the plan's layout
(srift.launch.layout), which the helper (srift.launch.helper) reads to give each rank its batch. Every line
sets the network settings the plan was priced under (srift.launch.network).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from srift.launch.layout import FleetPart, Layout
from srift.launch.network import Setting, env_lines, network_settings, placement

DEFAULT_PORT = 29_500
"""torchrun's default --master-port."""

DEFAULT_SETUP = "python3 -m pip install --quiet srift"
"""What each VM runs before torchrun in the SkyPilot and Kubernetes launch files: it installs srift, whose
helper (srift.launch.helper) the training script imports."""

MASTER_PLACEHOLDER = "${SRIFT_MASTER_ADDR:?set SRIFT_MASTER_ADDR to node 0's address}"
"""Node 0's address is known only once the VMs run: the shell stops with this hint until it is set."""


@dataclass(frozen=True, slots=True)
class NodeCommand:
    """The command of one VM: its environment and torchrun's argument vector."""

    node_rank: int
    part: FleetPart
    env: tuple[Setting, ...]
    argv: tuple[str, ...]

    def line(self) -> str:
        env = " ".join(f"{s.name}={_quote(s.value)}" for s in self.env)
        return f"env {env} " + " ".join(_quote(a) for a in self.argv)


def _quote(value: str) -> str:
    """Shell-quote, but leave a ${...} parameter expansion for the shell to expand (in double quotes)."""
    if "${" in value:
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
        return f'"{escaped}"'
    return shlex.quote(value)


def node_commands(
    layout: Layout,
    *,
    script: str,
    script_args: Sequence[str] = (),
    plan_ref: str,
    master_addr: str | None = None,
    master_port: int = DEFAULT_PORT,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[NodeCommand, ...]:
    """One command per VM, in node-rank order. `plan_ref` is what the helper loads (SRIFT_PLAN: a plan
    file or a plan id with SRIFT_URL); `master_addr` defaults to a shell variable set on each VM."""
    out = []
    for part in layout.parts:
        settings = network_settings(layout, part)
        for k in range(part.count):
            node = part.first_node + k
            env = (
                Setting("SRIFT_PLAN", plan_ref, "the plan the helper reads (ranks, batches, prediction)"),
                Setting("SRIFT_NODE_RANK", str(node), "this VM's node rank in the plan"),
                *settings,
                *(Setting(n, v, "given") for n, v in (extra_env or {}).items()),
            )
            argv = (
                "torchrun",
                f"--nnodes={layout.nodes}",
                f"--node-rank={node}",
                f"--nproc-per-node={part.procs_per_node}",
                f"--master-addr={master_addr or MASTER_PLACEHOLDER}",
                f"--master-port={master_port}",
                script,
                *script_args,
            )
            out.append(NodeCommand(node, part, env, argv))
    return tuple(out)


def render(layout: Layout, commands: Sequence[NodeCommand]) -> str:
    """A shell file: a header with the plan and its assumptions, then each VM's command (`node_commands`)
    under a comment."""
    plan = f"plan {layout.plan_id}" if layout.plan_id is not None else "plan"
    t_iter = layout.predicted_iteration_s
    head = [
        "#!/bin/sh",
        f"# {plan}: {layout.nodes} VMs, {layout.world_size} ranks, global batch {layout.global_batch}, "
        f"{layout.iterations} iterations" + (f", predicted {t_iter:.4g} s per iteration" if t_iter else ""),
        f"# network the plan was priced under: {layout.network.get('label') or 'not recorded'}",
        f"# placement: {placement(layout).text}",
        "# Run each line on its VM. Node 0 reports iteration times when SRIFT_URL, SRIFT_RUN_ID and",
        "# SRIFT_RUN_TOKEN are set (`srift run start PLAN_ID` prints them).",
    ]
    lines = head
    for cmd in commands:
        p = cmd.part
        ranks = layout.first_rank_of_node(cmd.node_rank)
        where = f" [{p.location}]" if p.location else ""
        lines += [
            "",
            f"# node {cmd.node_rank}: {p.instance_type} ({p.market}){where}, ranks {ranks}–"
            f"{ranks + p.procs_per_node - 1}, batch {p.batch} = "
            + " + ".join(str(b) for b in p.rank_batches),
            *env_lines(tuple(s for s in cmd.env if s.why != "given")),
            cmd.line(),
        ]
    return "\n".join(lines) + "\n"
