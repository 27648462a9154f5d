"""The README's Quick start runs as written, top to bottom: its bash block, read from README.md, in a fresh
folder that holds the checkout (linked) and its installed .venv. The one change is the port (a free one for
127.0.0.1:8000, so a server already on 8000 cannot answer for it) and the data folder (SRIFT_DATA_DIR)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINKED = ("Makefile", "pyproject.toml", "setup.py", "requirements", "srift", "models", "migrations", ".venv")


def quick_start() -> str:
    """The bash block under `## Quick start`."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "the Quick start has no bash block"
    return match.group(1)


def test_the_quick_start_names_no_file_it_does_not_create() -> None:
    script = quick_start()
    for name in re.findall(r"\b([\w.-]+\.(?:yaml|json))\b", script):
        assert re.search(rf"(>|--out|cat >) {re.escape(name)}\b", script), f"{name} is used but never created"
    assert "srift profile upload" in script and "--version" in script


@pytest.mark.slow
def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    current = subprocess.run(["make", "-q", "install"], cwd=ROOT, capture_output=True, check=False)
    if current.returncode != 0:
        # The block's `make install` would otherwise reinstall into the checkout's .venv (linked below)
        # from the temporary folder, and leave its console scripts pointing there.
        pytest.fail("the checkout's .venv is not up to date: run `make install` first")
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = quick_start().replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    env = {
        **os.environ,
        "SRIFT_DATA_DIR": str(tmp_path / "var"),
        "SRIFT_PORT": str(port),
        "SRIFT_WORKERS": "1",
        "COLUMNS": "100",
    }
    env.pop("SRIFT_DATABASE_URL", None)
    env.pop("SRIFT_TOKEN", None)
    log = tmp_path / "quick-start.log"
    # Output to a file, not a pipe: the block's background server would hold a pipe open after a failed
    # line ended bash, and the test would wait for it instead of reporting the failure.
    with (
        log.open("w") as sink,
        subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as proc,
    ):
        try:
            proc.wait(timeout=500)
        finally:
            with contextlib.suppress(ProcessLookupError):  # whatever the block left running (its server)
                os.killpg(proc.pid, signal.SIGKILL)
    out = log.read_text()
    assert proc.returncode == 0, out[-4000:]
    assert re.search(r"^srift \d+\.\d+", out, re.M), out[:2000]
    assert "preparing the data folder" in out
    assert "stored as profile" in " ".join(out.split())
    assert (tmp_path / "cnn.json").exists() and (tmp_path / "request.yaml").exists()
    plans = re.findall(r"^plan \d+: min_cost", out, re.M)
    assert len(plans) == 2, out[-4000:]
