"""A probe of a mixed ring on testbed hosts of two types (needs root; CI is root)."""

from __future__ import annotations

import os

import pytest

from srift.bandwidth.mixed import measure_mixed_rings
from srift.errors import InvalidInput
from srift.jobs.run import JobRun
from srift.jobs.runners import run_testbed_mixed_probe, run_testbed_probe
from srift.jobs.service import TypeFacts
from srift.jobs.spec import JobProvider, ProbeJobSpec
from srift.settings import Settings
from srift.testbed import system

SMALL = TypeFacts(provider="testbed", instance_type="tb.small", region="local", rated_gbps=0.2)
LARGE = TypeFacts(provider="testbed", instance_type="tb.large", region="local", rated_gbps=1.0)


def _run(settings: Settings, job_id: int, spec: ProbeJobSpec) -> JobRun:
    return JobRun(job_id=job_id, attempt=1, worker_id="t", kind="probe", spec=spec, settings=settings)


def _spec(name: str, **kw: object) -> ProbeJobSpec:
    fields: dict[str, object] = {
        "provider": JobProvider.TESTBED,
        "instance_type": name,
        "node_counts": (2,),
        "sizes": (4, 1 << 16),
        "repeats": 2,
        "warmup": 1,
    }
    fields.update(kw)
    return ProbeJobSpec(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "counts", "field"),
    [
        ("tb.large+tb.small+x", (2,), "instance_type"),
        ("tb.small", (2,), "instance_type"),
        ("tb.large+tb.small", (2, 3), "node_counts"),
    ],
)
def test_a_ring_the_types_cannot_make_is_refused(
    worker_settings: Settings, name: str, counts: tuple[int, ...], field: str
) -> None:
    spec = _spec(name, node_counts=counts)
    with pytest.raises(InvalidInput) as err:
        run_testbed_mixed_probe(_run(worker_settings, 7, spec), spec, [SMALL, LARGE])
    assert err.value.field == field
    assert not (worker_settings.data_dir / "testbed").exists()


@pytest.mark.root
def test_a_mixed_ring_probe_runs_one_host_of_each_type_and_names_the_ring(worker_settings: Settings) -> None:
    if os.geteuid() != 0:
        pytest.fail("testbed probes need root (CI runs as root); run them with sudo")
    mixed = _spec("tb.large+tb.small")
    records = run_testbed_mixed_probe(_run(worker_settings, 41, mixed), mixed, [SMALL, LARGE])
    assert len(records) == 4
    assert {(r.instance_type, r.world_size, r.nodes, r.rated_gbps) for r in records} == {
        ("tb.large+tb.small", 2, 2, 0.2)
    }
    assert not [n for n in system.list_netns() if n.startswith("srift-j41-")]
    alone = []
    for k, facts in enumerate((SMALL, LARGE)):
        spec = _spec(facts.instance_type)
        alone += run_testbed_probe(_run(worker_settings, 42 + k, spec), spec, facts)
    (ring,) = measure_mixed_rings([*records, *alone])
    assert ring.types == ("tb.large", "tb.small") and ring.nodes == (2,)
    assert [(n, s) for n, s, _ in ring.factors] == [(2, 4), (2, 1 << 16)]
    assert all(f > 0 for *_, f in ring.factors)
