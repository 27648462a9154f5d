"""Register a testbed's instance types in the catalog (provider "testbed", region "local")."""

from __future__ import annotations

import math
import os
from datetime import date
from typing import Any

from sqlalchemy.orm import Session

from srift.testbed.spec import TestbedSpec

PROVIDER = "testbed"
REGION = "local"


def machine_memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return 1.0


def catalog_document(spec: TestbedSpec, *, as_of: date | None = None) -> dict[str, Any]:
    """The srift-catalog/1 document for the spec's types.

    `vcpus` is the quota rounded up (a 0.5-core host counts as 1 vCPU, as a burstable VM would);
    the exact quota, link delay, jitter, loss and MTU are kept under `extra`. `network_gbps` is the link
    rate. Types without a memory limit get the machine's memory.
    """
    types = []
    for t in spec.types:
        prices: dict[str, float] = {"on_demand": t.price_usd_per_hr}
        if t.spot_price_usd_per_hr is not None:
            prices["spot"] = t.spot_price_usd_per_hr
        types.append(
            {
                "name": t.name,
                "gpu_count": 0,
                "vcpus": max(1, math.ceil(t.cpu_cores - 1e-9)),
                "memory_gib": round(t.memory_mib / 1024 if t.memory_mib else machine_memory_gib(), 3),
                "network_gbps": t.rate_mbit / 1000,
                "network_burst": False,
                "interconnect": "none",
                "efa": False,
                "extra": {
                    "cpu_cores": t.cpu_cores,
                    "memory_mib": t.memory_mib,
                    "rate_mbit": t.rate_mbit,
                    "delay_ms": t.delay_ms,
                    "jitter_ms": t.jitter_ms,
                    "loss_pct": t.loss_pct,
                    "mtu": spec.mtu,
                    "testbed_prefix": spec.prefix,
                },
                "prices": {REGION: prices},
            }
        )
    note = f" ({spec.description})" if spec.description else ""
    return {
        "format": "srift-catalog/1",
        "provider": PROVIDER,
        "snapshot": f"testbed-{spec.prefix}",
        "source": f"srift testbed spec {spec.fingerprint()}{note}",
        "as_of": (as_of or date.today()).isoformat(),
        "instance_types": types,
    }


def register_types(*, session: Session, spec: TestbedSpec) -> int:
    """Store the spec's types as catalog snapshot `testbed-<prefix>` (replacing it); return its id."""
    from srift.catalog.custom import import_document

    return import_document(session=session, document=catalog_document(spec), origin="testbed")
