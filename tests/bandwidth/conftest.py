"""Fixtures of the bandwidth tests: the public nccl-tests reference file, real testbed samples, CLI setup."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from srift.bandwidth.records import ProbeRecord, parse_jsonl
from srift.settings import get_settings

REPO = Path(__file__).resolve().parents[2]
REFERENCE = "nccl-tests_all_reduce_perf_2x_p5.48xlarge.txt"
DATA = Path(__file__).resolve().parent / "data"


def shared_reference_dir() -> Path:
    """shared/reference beside the clone (CI), or the workspace copy; fails loudly when absent."""
    candidates = [REPO.parent / "shared" / "reference", Path("/work/shared/reference")]
    if os.environ.get("SRIFT_SHARED_DIR"):
        candidates.insert(0, Path(os.environ["SRIFT_SHARED_DIR"]) / "reference")
    for base in candidates:
        if (base / REFERENCE).is_file():
            return base
    pytest.fail(f"{REFERENCE} not found in {[str(c) for c in candidates]}: shared/ must sit beside the clone")


@pytest.fixture(scope="session")
def reference_path() -> Path:
    return shared_reference_dir() / REFERENCE


@pytest.fixture(scope="session")
def testbed_records() -> list[ProbeRecord]:
    """Real gloo probe samples from the testbed: a subset of the shipped model's (bw.r100.d2 and bw.r500.d5 on
    2 and 4 hosts, two bring-ups), so the learner is tested on measured, not synthetic, data."""
    text = gzip.decompress((DATA / "testbed_samples.jsonl.gz").read_bytes()).decode()
    return parse_jsonl(text, source="testbed_samples.jsonl")


@pytest.fixture
def cli_db(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the CLI's settings at the test database and a private models folder."""
    monkeypatch.setenv("SRIFT_DATABASE_URL", db_url)
    monkeypatch.setenv("SRIFT_MODELS_DIR", str(tmp_path / "cli-models"))
    get_settings.cache_clear()
    yield db_url
    get_settings.cache_clear()
