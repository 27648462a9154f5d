"""Response schema of GET /v1/traces: the imported spot traces (srift.services.traces.list_traces), the
names a plan request's `recent_market.trace` may give."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TraceOut(BaseModel):
    """One imported trace: its name, what it traced, its span and where it came from."""

    name: str = Field(
        description="what recent_market.trace names, e.g. user:log.csv#aws/us-east-1a/p3.2xlarge"
    )
    provider: str
    zone: str
    region: str
    instance_type: str
    kind: str = Field(description="what the trace counts: preemption (a fleet's VMs) or availability")
    node_count: int = Field(description="the most VMs it held or asked for (it covers fleets up to this)")
    gap_s: float = Field(description="seconds between its ticks")
    ticks: int
    days: float = Field(description="its span in days")
    start: str | None = Field(description="its first tick (ISO 8601), when known")
    repository: str
    path: str
    commit: str | None
    sha256: str
    note: str = ""
