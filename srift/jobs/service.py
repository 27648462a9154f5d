"""Submitting jobs: validate the request, check its instance types against the catalog and its caps, queue."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from srift.bandwidth.mixed import ring_members
from srift.db.tables import Job
from srift.domain.host import HostFacts
from srift.errors import Conflict, InvalidInput, NotFound
from srift.jobs import store
from srift.jobs.spec import (
    Ec2Market,
    Ec2Options,
    JobProvider,
    ProbeJobSpec,
    ProfileJobSpec,
    parse_probe_job,
    parse_profile_job,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeFacts(HostFacts):
    """What a job needs to know about one instance type: its host facts, price and catalog extras."""

    price_usd_per_hr: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def type_facts(
    *,
    session: Session,
    provider: JobProvider,
    instance_type: str,
    ec2: Ec2Options | None = None,
    field_name: str = "instance_type",
) -> TypeFacts:
    """Look the type up in the catalog (testbed types under "testbed"/"local", EC2 under "aws"/region).

    Unknown types (missing data) raise NotFound naming `field_name` and listing the known ones.
    """
    catalog_provider = provider.catalog_provider
    if catalog_provider is None:
        return TypeFacts(instance_type=instance_type, provider="local")
    from srift.catalog.store import known_providers, list_instance_types

    region = ec2.region if ec2 is not None else "local"
    if catalog_provider not in known_providers(session):
        raise NotFound(
            f"unknown instance type {instance_type!r}: the catalog has no {catalog_provider} types",
            hint="bring up a testbed (`srift testbed up`)"
            if provider is JobProvider.TESTBED
            else "load the catalog (`srift serve` does; or `srift catalog refresh`)",
            field=field_name,
        )
    try:
        entries = list_instance_types(session=session, provider=catalog_provider, region=region)
    except (InvalidInput, NotFound) as exc:
        raise NotFound(
            f"the catalog has no {catalog_provider} types in region {region!r} ({exc.detail})",
            hint="pick a region the catalog knows (`srift catalog list`)",
            field="ec2.region" if ec2 is not None else field_name,
        ) from exc
    for entry in entries:
        if entry.instance.name == instance_type:
            price = None
            if ec2 is not None and ec2.market is Ec2Market.SPOT and entry.spot is not None:
                price = entry.spot.price_usd_per_hr
            elif entry.on_demand is not None:
                price = entry.on_demand.price_usd_per_hr
            return TypeFacts(
                instance_type=instance_type,
                provider=catalog_provider,
                region=region,
                rated_gbps=entry.instance.network_gbps,
                gpu_name=entry.instance.gpu_model or "" if entry.instance.gpu_count > 0 else "",
                cpu_cores=entry.instance.vcpus,
                memory_gib=entry.instance.memory_gib,
                price_usd_per_hr=price,
                extra=dict(entry.extra or {}),
            )
    known = sorted({e.instance.name for e in entries})
    shown = ", ".join(known[:12]) + (" ..." if len(known) > 12 else "")
    raise NotFound(
        f"unknown instance type {instance_type!r} for provider {provider}",
        hint=f"use one the catalog lists ({shown or 'none yet'})",
        field=field_name,
    )


def check_ec2_caps(*, ec2: Ec2Options, instances: int, facts: TypeFacts, count_field: str) -> None:
    """Refuse a job that would launch more instances, or could cost more, than its caps allow."""
    if instances > ec2.max_instances:
        raise InvalidInput(
            f"the job needs {instances} instances, above its cap ec2.max_instances = {ec2.max_instances}",
            hint="raise ec2.max_instances or ask for fewer nodes",
            field=count_field,
        )
    if facts.price_usd_per_hr is None:
        raise NotFound(
            f"the catalog has no {ec2.market} price for {facts.instance_type} in {ec2.region}",
            hint="pick a type and market the catalog prices, so the cost cap can be checked",
            field="instance_type",
        )
    worst_usd = facts.price_usd_per_hr * instances * ec2.timeout_s / 3600
    if worst_usd > ec2.max_cost_usd:
        raise Conflict(
            f"{instances} × {facts.instance_type} for up to {ec2.timeout_s:g} s may cost ${worst_usd:.2f}, "
            f"above the cap ec2.max_cost_usd = ${ec2.max_cost_usd:g}",
            hint="raise ec2.max_cost_usd, lower ec2.timeout_s, or use fewer nodes",
            field="ec2.max_cost_usd",
        )


def check_probe_job(*, session: Session, spec: ProbeJobSpec) -> None:
    """Its instance type is one type (not a mixed ring), in the catalog (NotFound otherwise), and an EC2
    job stays within its caps."""
    _one_type(spec.instance_type)
    facts = type_facts(
        session=session, provider=spec.provider, instance_type=spec.instance_type, ec2=spec.ec2
    )
    if spec.ec2 is not None:
        check_ec2_caps(ec2=spec.ec2, instances=spec.max_nodes, facts=facts, count_field="node_counts")


def _one_type(instance_type: str) -> None:
    """Refuse a probe job for a mixed ring ("a+b", srift.bandwidth.mixed): every backend runs a job's
    ranks on hosts of its one type, so it would fail (or label one type's samples as the ring's). The
    ring's samples go to POST /v1/probe-results without a job (each member type must be in the catalog),
    or through `srift probe import`. An InvalidInput (422) that says so, not a 404 for the ring's name."""
    members = ring_members(instance_type)
    if len(members) > 1:
        raise InvalidInput(
            f"{instance_type!r} is a mixed ring of {', '.join(members)}: a probe job runs one instance type",
            hint="queue one job per type to probe each alone; run probes/allreduce.py across the ring's "
            "hosts and post its samples to POST /v1/probe-results with a write token and no job_id, or "
            f"import them with `srift probe import FILE --instance-type {instance_type}`",
            field="instance_type",
        )


def check_profile_job(*, session: Session, spec: ProfileJobSpec) -> None:
    """Each instance type is in the catalog (NotFound otherwise) and an EC2 job stays within its caps."""
    for i, name in enumerate(spec.instance_types):
        facts = type_facts(
            session=session,
            provider=spec.provider,
            instance_type=name,
            ec2=spec.ec2,
            field_name=f"instance_types[{i}]",
        )
        if spec.ec2 is not None:
            check_ec2_caps(
                ec2=spec.ec2, instances=len(spec.instance_types), facts=facts, count_field="instance_types"
            )


def submit(*, session: Session, spec: ProbeJobSpec | ProfileJobSpec) -> tuple[Job, str]:
    """Check a validated job against the catalog and its caps, and queue it."""
    if isinstance(spec, ProbeJobSpec):
        check_probe_job(session=session, spec=spec)
    else:
        check_profile_job(session=session, spec=spec)
    return store.create_job(session=session, spec=spec)


def submit_probe_job(*, session: Session, data: Mapping[str, Any]) -> tuple[Job, str]:
    """Validate a probe job request document and queue it."""
    return submit(session=session, spec=parse_probe_job(data))


def submit_profile_job(*, session: Session, data: Mapping[str, Any]) -> tuple[Job, str]:
    """Validate a profile job request document and queue it."""
    return submit(session=session, spec=parse_profile_job(data))
