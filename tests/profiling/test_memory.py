"""Memory budget sources (cgroup v1/v2, /proc/meminfo) and peak resident-set measurement."""

from __future__ import annotations

from pathlib import Path

import pytest

from srift.profiling import memory


def _point_cgroups_at(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.setattr(memory, "_CGROUP_ROOT", root)
    monkeypatch.setattr(memory, "_own_cgroup_dirs", lambda: [root, root / "memory"])


def test_cgroup_v2_limit_minus_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memory.max").write_text("1000000\n")
    (tmp_path / "memory.current").write_text("400000\n")
    _point_cgroups_at(monkeypatch, tmp_path)
    assert memory.cgroup_free_bytes() == 600000


def test_cgroup_v1_limit_minus_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("2000000\n")
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text("500000\n")
    _point_cgroups_at(monkeypatch, tmp_path)
    assert memory.cgroup_free_bytes() == 1500000


@pytest.mark.parametrize("limit", ["max", "9223372036854771712"])
def test_unlimited_cgroups_give_no_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str) -> None:
    (tmp_path / "memory.max").write_text(limit)
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712")
    _point_cgroups_at(monkeypatch, tmp_path)
    assert memory.cgroup_free_bytes() is None


def test_default_budget_is_the_smaller_source_scaled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memory.max").write_text("1000000000")
    (tmp_path / "memory.current").write_text("0")
    _point_cgroups_at(monkeypatch, tmp_path)
    available = memory.host_available_bytes()
    assert available is not None and available > 0
    expected = int(min(available, 1_000_000_000) * memory.BUDGET_FRACTION)
    assert memory.default_budget_bytes() == expected


def test_peak_rss_growth_sees_a_transient_allocation() -> None:
    assert memory.peak_rss_supported()
    size = 200 * 2**20

    def step() -> None:
        block = bytearray(size)
        block[::4096] = b"x" * len(block[::4096])
        del block

    growth = memory.peak_rss_growth_bytes(step)
    assert 0.9 * size <= growth <= 1.5 * size
    assert memory.peak_rss_growth_bytes(lambda: None) < 0.1 * size
