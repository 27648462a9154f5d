"""Shared by the dashboard's tests: the live server's data (profiles, probe samples), and a browsed page."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srift.bandwidth.records import ProbeRecord, algbw_gbps, busbw_gbps
from srift.settings import REPO_ROOT, Settings

ARTIFACTS = REPO_ROOT / "test-artifacts" / "dashboard"


def profile_document(*, model: str, accelerator: str, speed: float) -> dict[str, Any]:
    """A ResNet-50-like profile (25.6 M parameters in 20 layers); `speed` divides the compute times."""
    layers = [
        {
            "name": f"layer{i}",
            "grad_bytes": 5_120_000 if i < 19 else 5_600_000,
            "ready_frac": (i + 1) / 20,
            "exec_prob": 1.0,
        }
        for i in range(20)
    ]
    return {
        "schema_version": 1,
        "model": model,
        "accelerator": accelerator,
        "max_batch": 256,
        "forward": {
            "batches": [1, 85, 171, 256],
            "times_s": [t / speed for t in (0.012, 0.170, 0.335, 0.500)],
        },
        "backward": {
            "batches": [1, 85, 171, 256],
            "times_s": [t / speed for t in (0.024, 0.340, 0.670, 1.000)],
        },
        "layers": layers,
        "straggler_cv": 0.04,
        "device": "cuda",
        "created_at": "2026-11-22T00:00:00Z",
    }


SAMPLE_TYPE = "g4dn.xlarge"
SAMPLE_WORLD_SIZES = (2, 4, 8)
SAMPLE_BUFFERS = tuple(1 << k for k in range(10, 30, 2))


def probe_records() -> list[ProbeRecord]:
    """Allreduce samples on SAMPLE_TYPE as an α-β link would give them (20 µs latency, 20 Gbit/s), ±5 %."""
    records = []
    for world_size in SAMPLE_WORLD_SIZES:
        for size in SAMPLE_BUFFERS:
            for repeat, jitter in enumerate((0.95, 1.05)):
                steps = 2 * (world_size - 1)
                time_s = jitter * steps * (20e-6 + size / world_size * 8 / 20e9)
                records.append(
                    ProbeRecord(
                        run_id="dashboard-tests",
                        provider="aws",
                        instance_type=SAMPLE_TYPE,
                        backend="gloo",
                        buffer_bytes=size,
                        world_size=world_size,
                        nodes=world_size,
                        ranks_per_node=1,
                        time_s=time_s,
                        algbw_gbps=algbw_gbps(buffer_bytes=size, time_s=time_s),
                        busbw_gbps=busbw_gbps(buffer_bytes=size, world_size=world_size, time_s=time_s),
                        repeat=repeat,
                    )
                )
    return records


@dataclass
class LiveServer:
    """The running server: its base URL, a write token, the stored profiles and the settings it runs with."""

    url: str
    token: str
    model: str
    profile_ids: list[int]
    settings: Settings


@dataclass
class Browsed:
    """A page plus what it logged: console errors, uncaught exceptions, blocked off-host requests, and every
    request it sent ("METHOD URL")."""

    page: Any
    server: LiveServer
    artifacts: Path
    console_errors: list[str] = field(default_factory=list)
    offhost_requests: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def goto(self, path: str) -> None:
        self.page.goto(self.server.url + path, wait_until="load")

    def screenshot(self, name: str, *, full_page: bool = True) -> Path:
        """Save the page (the whole of it, or with `full_page` False the viewport) under test-artifacts."""
        path = self.artifacts / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def chart(self, element_id: str) -> dict[str, Any]:
        """The Plotly figure drawn in a div: its traces (name, uid, x, y, marker), layout shapes and axis
        titles (`axes`: {x, y})."""
        figure: dict[str, Any] = self.page.evaluate(
            """(id) => {
                const div = document.getElementById(id);
                if (!div || !div.data) return {data: [], shapes: []};
                return {
                    data: div.data.map(t => ({
                        name: t.name, uid: t.uid, type: t.type, x: Array.from(t.x || []),
                        y: Array.from(t.y || []), text: t.text ? Array.from(t.text) : [],
                        marker: {symbol: t.marker && t.marker.symbol},
                    })),
                    shapes: (div.layout.shapes || []).map(s => ({name: s.name, x0: s.x0, y0: s.y0})),
                    axes: {x: div.layout.xaxis?.title?.text, y: div.layout.yaxis?.title?.text},
                    rendered: div.querySelectorAll('.main-svg').length,
                };
            }""",
            element_id,
        )
        return figure

    def assert_clean(self, *, allowed: tuple[str, ...] = ()) -> None:
        errors = [e for e in self.console_errors if not any(a in e for a in allowed)]
        assert errors == [], f"console errors: {errors}"
        assert self.offhost_requests == [], f"requests left the machine: {self.offhost_requests}"
