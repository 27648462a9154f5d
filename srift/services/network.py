"""The network assumptions of a plan or prediction: transport, library, options and measured rates.

`resolve_network` turns a request's choices into a `NetworkSpec`, reading measured node rates from stored
probe jobs when the request names them; `network_view` says in the answer what was assumed for each type,
where each rate came from, and — when a rate rests on the prior — how to measure it instead.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from srift.domain import BusBandwidthModel, InstanceType
from srift.domain.network import Library, NetworkSpec, Transport
from srift.domain.requests import NetworkQuery
from srift.domain.states import JobKind
from srift.errors import Conflict, InvalidInput, NotFound

RATE_MIN_BYTES = 16 << 20
"""Probe samples at or above 16 MiB measure bandwidth, not latency (the prior's ≥ 1 MiB class is
bandwidth-bound only on slow links); smaller buffers are used only when a job measured nothing larger."""

Z90 = 1.2815515655446004
"""The standard normal's 90th percentile: a log-normal band of spread σ spans exp(±Z90·σ) from p10 to p90."""


def probe_rates(*, session: Session, job_ids: Sequence[int]) -> dict[str, tuple[float, str]]:
    """instance type → (node rate Gbit/s, source text) from the multi-node samples of stored probe jobs.

    A sample of n ranks on N nodes has busbw = R_node·[(n−1)/n]/[(N−1)/N] on the network level, so
    R_node = busbw·[(N−1)/N]/[(n−1)/n]; each type's rate is the median over its largest-buffer samples.
    """
    from srift.db.tables import Job, ProbeSample

    found: dict[str, list[tuple[int, float, int]]] = {}
    for k, job_id in enumerate(job_ids):
        job = session.get(Job, job_id)
        if job is None or job.kind != JobKind.PROBE:  # a missing id is 404, as everywhere (docs/limits.md)
            raise NotFound(
                f"no probe job {job_id}" + (f" (job {job_id} is a {job.kind} job)" if job else ""),
                hint="list probe jobs with `srift jobs list` or GET /v1/probe-jobs?kind=probe",
                field=f"network.probe_job_ids[{k}]",
            )
        rows = session.scalars(
            select(ProbeSample).where(ProbeSample.job_id == job_id, ProbeSample.nodes >= 2)
        ).all()
        if not rows:  # the job exists, but what it stored cannot answer: 409, as docs/limits.md says
            raise Conflict(
                f"probe job {job_id} stored no samples across two or more nodes",
                hint="give a finished probe job that measured ≥ 2 nodes (`srift probe run --quick`)",
                field=f"network.probe_job_ids[{k}]",
            )
        for row in rows:
            n, big_n = row.world_size, row.nodes
            rate = row.busbw_gbps * ((big_n - 1) / big_n) / ((n - 1) / n)
            found.setdefault(row.instance_type, []).append((row.buffer_bytes, rate, job_id))
    out: dict[str, tuple[float, str]] = {}
    for name, samples in found.items():
        large = [s for s in samples if s[0] >= RATE_MIN_BYTES]
        if not large:
            top = max(s[0] for s in samples)
            large = [s for s in samples if s[0] == top]
        jobs = sorted({s[2] for s in large})
        out[name] = (
            statistics.median(s[1] for s in large),
            f"probe job {', '.join(map(str, jobs))}: median of {len(large)} samples ≥ "
            f"{min(s[0] for s in large) >> 20} MiB",
        )
    return out


def resolve_network(
    *,
    session: Session | None,
    transport: Transport = Transport.TCP,
    library: Library = Library.NCCL,
    placement_group: bool = False,
    flows_per_peer: int | None = None,
    ena_visible: bool | None = None,
    measured_gbps: Mapping[str, float] | None = None,
    probe_job_ids: Sequence[int] | None = None,
) -> NetworkSpec:
    """A NetworkSpec from a request's network fields; measured rates given directly win over probe jobs."""
    measured: dict[str, float] = {}
    sources: dict[str, str] = {}
    if probe_job_ids:
        if session is None:
            raise InvalidInput(
                "probe job ids need the service's database",
                hint="give measured_gbps instead",
                field="network.probe_job_ids",
            )
        for name, (rate, text) in probe_rates(session=session, job_ids=probe_job_ids).items():
            measured[name], sources[name] = rate, text
    for name, rate in (measured_gbps or {}).items():
        measured[name], sources[name] = float(rate), "given in the request"
    return NetworkSpec(
        transport=transport,
        library=library,
        placement_group=placement_group,
        flows_per_peer=flows_per_peer,
        ena_visible=ena_visible,
        measured_gbps=measured,
        measured_sources=sources,
    )


def network_spec(*, session: Session | None, query: NetworkQuery) -> NetworkSpec:
    """The NetworkSpec of a request's `network` (measured rates from probe jobs resolved)."""
    return resolve_network(
        session=session,
        transport=query.transport,
        library=query.library,
        placement_group=query.placement_group,
        flows_per_peer=query.flows_per_peer,
        ena_visible=query.ena_visible,
        measured_gbps=query.measured_gbps,
        probe_job_ids=query.probe_job_ids,
    )


def check_transport(instances: Iterable[tuple[str, InstanceType]], network: NetworkSpec) -> None:
    """EFA needs EFA-capable types: InvalidInput naming the first choice that is not."""
    if network.transport is not Transport.EFA:
        return
    for where, inst in instances:
        if not inst.efa and inst.name not in network.measured_gbps:
            raise InvalidInput(
                f"{inst.name} has no EFA, but the request asks for transport efa",
                hint="use transport tcp (plain PyTorch DDP), or an EFA-capable type "
                "(`srift catalog list --wide` has an EFA column)",
                field=where,
            )


def network_view(
    network: NetworkSpec,
    *,
    instances: Sequence[InstanceType],
    model: BusBandwidthModel,
    multi_node: bool,
    sources: Sequence[str] = (),
) -> dict[str, Any]:
    """The `network` block of an answer: the assumptions, each type's node rate and where it came from."""
    from srift.bandwidth.prior import flows_per_peer, node_rate
    from srift.bandwidth.registry import LearnedBandwidthModel

    learned = model if isinstance(model, LearnedBandwidthModel) else None
    rates: list[dict[str, Any]] = []
    prior_types = []
    for inst in dict.fromkeys(instances):
        if learned is not None and learned.covers(inst):
            rates.append(
                {
                    "instance_type": inst.name,
                    "gbps": None,
                    "limit": "learned from probes",
                    "source": learned.source,
                }
            )
            continue
        rate = node_rate(inst, network)
        measured = inst.name in network.measured_gbps
        rates.append(
            {
                "instance_type": inst.name,
                "gbps": rate.gbps,
                "high_gbps": rate.high_gbps,
                "limit": rate.limit,
                "source": "measured" if measured else "prior:alpha-beta",
            }
        )
        if not measured:
            prior_types.append((inst.name, rate))
    flows = (
        {inst.name: flows_per_peer(network, provider=inst.provider) for inst in dict.fromkeys(instances)}
        if network.transport is Transport.TCP
        else {}
    )
    advice = None
    if multi_node and prior_types:
        from srift.bandwidth.prior import EFA_RESIDUAL_CV, HIGH_END_TEXT, TCP_RESIDUAL_CV

        spread = (EFA_RESIDUAL_CV if network.transport is Transport.EFA else TCP_RESIDUAL_CV)["large"]
        band = math.exp(Z90 * spread) - 1
        assumed = []
        for name, rate in prior_types:
            text = f"{name} {rate.gbps:.3g} Gbit/s per node ({rate.limit})"
            if rate.high_gbps is not None:
                text += f", up to {rate.high_gbps:.3g} Gbit/s ({HIGH_END_TEXT}: the band's fast end)"
            assumed.append(text)
        advice = (
            "the network rate rests on the prior (catalog rating and public figures; p90 band "
            f"±{100 * band:.0f} % on the slow side), which assumed: "
            + "; ".join(assumed)
            + ". Measure it in minutes: "
            + "; ".join(f"`srift probe run --quick --instance-type {name}`" for name, _ in prior_types)
            + ", then pass the probe job in network.probe_job_ids"
        )
        if any(rate.high_gbps is not None for _, rate in prior_types) and network.ena_visible is None:
            advice += (
                " (or, if NCCL runs on the bare VM or on the host network and so sees the ENA, say "
                "network.ena_visible: true)"
            )
    return {
        "transport": network.transport.value,
        "library": network.library.value,
        "placement_group": network.placement_group,
        "flows_per_peer": flows,
        "label": network.label(),
        "rates": rates,
        "recommendation": advice,
        "sources": list(sources),
    }
