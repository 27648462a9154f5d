"""`srift jobs list|submit` and `srift worker` on the local database: an unknown kind, state or provider
names its option and lists the choices (as `srift run list --state` does), and `--nodes` takes node
counts, not byte sizes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from srift.cli import main
from srift.settings import get_settings


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, " ".join(err.split())


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        # Was: "error: 'done' is not a valid JobState. To fix: see --help for the choices."
        (
            ["jobs", "list", "--state", "done"],
            "--state: unknown job state 'done'. To fix: use queued, running",
        ),
        (
            ["jobs", "list", "--kind", "probes"],
            "--kind: unknown job kind 'probes'. To fix: use probe or profile",
        ),
        (["worker", "--once", "--kind", "probes"], "--kind: unknown job kind 'probes'"),
        (
            ["worker", "--once", "--provider", "aws"],
            "--provider: unknown job provider 'aws'. To fix: use local",
        ),
    ],
)
def test_an_unknown_choice_names_its_option_and_the_choices(
    local: None, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert words in err, err
    assert "JobState" not in err and "JobKind" not in err and "JobProvider" not in err


@pytest.mark.parametrize("nodes", ["2,x", "2K", "0", "2,-4"])
def test_nodes_are_whole_counts_not_sizes(
    local: None, capsys: pytest.CaptureFixture[str], nodes: str
) -> None:
    """`--nodes 2,x` said "'x' is not a positive size. To fix: write sizes like 4, 64K, 512M or 1G", and
    `--nodes 2K` queued a probe of 2048 nodes."""
    code, out, err = run(
        capsys, "jobs", "submit", "probe", "--provider", "local", "--instance-type", "local", "--nodes", nodes
    )
    assert code == 2 and out == ""
    assert err.startswith(f"error: --nodes: '{nodes}' is not a list of node counts. To fix: write whole")
    assert "size" not in err


def test_nodes_and_sizes_still_become_the_request(local: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys,
        "jobs", "submit", "probe", "--provider", "local", "--instance-type", "local",
        "--nodes", "2, 4", "--sizes", "4,1M", "--json",
    )  # fmt: skip
    assert code == 0, err
    request = json.loads(out)["request"]
    assert request["node_counts"] == [2, 4] and request["sizes"] == [4, 1 << 20]
