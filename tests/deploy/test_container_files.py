"""The Dockerfile and docker-compose.yml (no Docker engine here): parse them and check what they promise."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_services_images_env_and_healthchecks() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"db", "api", "worker"}
    assert services["db"]["image"].startswith("postgres:")
    assert services["api"]["build"] == "."
    assert services["worker"]["image"] == services["api"]["image"]
    for name in ("api", "worker"):
        env = services[name]["environment"]
        assert env["SRIFT_DATABASE_URL"].startswith("postgresql+psycopg://srift:srift@db:5432/")
        assert services[name]["depends_on"]["db"]["condition"] == "service_healthy"
        assert services[name]["healthcheck"]["test"]
        assert env["SRIFT_MODELS_DIR"].startswith("/data/"), "trained models must land on the data volume"
        assert "srift-data:/data" in services[name]["volumes"]
    assert services["api"]["command"] == ["serve"]
    assert services["worker"]["command"] == ["worker"]
    assert "/v1/health" in " ".join(services["api"]["healthcheck"]["test"])
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert "pgdata" in compose["volumes"]
    assert any(v.startswith("pgdata:") for v in services["db"]["volumes"])


def test_dockerfile_slim_nonroot_healthcheck_and_make_run_command() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert re.search(r"^USER srift", text, re.M)
    assert "HEALTHCHECK" in text and "/v1/health" in text
    entry = re.search(r'^ENTRYPOINT \["srift"\]', text, re.M)
    cmd = re.search(r'^CMD \["serve"\]', text, re.M)
    assert entry and cmd
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:.*\n\t\$\(BIN\)/srift serve$", makefile, re.M), (
        "image and make run must start the same way"
    )
    assert "torch==" not in text and "torch==" not in makefile, "torch comes from the lock, like the rest"


def test_entrypoint_command_exists_outside_docker() -> None:
    """`srift serve --help` (the image's entrypoint + command) works in this environment."""
    out = subprocess.run(
        [sys.executable, "-c", "from srift.cli import main; main(['serve', '--help'])"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "Migrate the database" in out.stdout
    assert "--workers" in out.stdout


def test_image_and_compose_serve_one_worker_per_cpu_by_default() -> None:
    """Both start `srift serve` with SRIFT_WORKERS 0 (one worker per usable CPU), overridable."""
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^\s*SRIFT_WORKERS=0 ", text, re.M)
    env = _compose()["services"]["api"]["environment"]
    assert env["SRIFT_WORKERS"] == "${SRIFT_WORKERS:-0}"
    from srift.settings import Settings

    assert Settings(workers=0).workers == 0


def test_wheel_carries_the_compiled_stage_kernel(tmp_path: Path) -> None:
    """`pip install .` (the image's install) builds the simulator's C kernel into the wheel."""
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^COPY .*\bsetup\.py\b", text, re.M), "the image must COPY setup.py (builds the kernel)"
    assert "gcc" in text
    src = tmp_path / "src"
    shutil.copytree(ROOT / "srift", src / "srift", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    out = subprocess.run(
        [*pip_wheel, "-w", str(tmp_path), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("srift-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(re.fullmatch(r"srift/sim/_stage\..*\.so", n) for n in names), names
    assert "srift/sim/_stage.pyi" in names
