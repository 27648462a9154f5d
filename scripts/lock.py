"""Generates and checks Srift's hashed dependency locks (requirements/lock.txt, requirements/runtime.txt).

`make lock` runs `python scripts/lock.py` to resolve pyproject.toml's ranges (runtime dependencies, the
`dev` extra, the `build` dependency group and the build system's requirements) under
requirements/constraints.in into requirements/lock.txt, every file pinned with its sha256 hashes, and the
runtime dependencies alone, at the same versions, into requirements/runtime.txt (the Docker image's).
Each lock's header records a digest of the inputs it was generated from; `python scripts/lock.py --check`
(and tests/deploy/test_lock.py) fails when pyproject.toml or the constraints changed since, or when a pinned
version falls outside pyproject's range, so a lock can never silently disagree with pyproject.

A regeneration keeps every pin the existing locks hold (uv reads them as preferences), so it moves only what
a change of the inputs forces: a new dependency adds itself and what it needs, and a run on unchanged inputs
writes the same locks (without the preferences, uv resolved every range to its newest release: a run on
unchanged inputs moved sixteen pins). `make lock LOCK_ARGS=--upgrade` (`scripts/lock.py --upgrade`)
re-resolves every pin to the newest release the ranges allow, on purpose.

The resolution uses uv (pinned in the lock, from the `dev` extra). It reads the package index and any
find-links pip is configured with, so that the CPU build of torch (`torch==…+cpu`) is found where this
machine keeps it; set UV_FIND_LINKS or UV_EXTRA_INDEX_URL (e.g. https://download.pytorch.org/whl/cpu)
elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = ROOT / "requirements" / "constraints.in"
FULL_LOCK = ROOT / "requirements" / "lock.txt"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"
PYTHON_VERSION = "3.11"
DIGEST_PREFIX = "# inputs-sha256: "
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def lock_inputs(pyproject: Path = PYPROJECT, constraints: Path = CONSTRAINTS) -> dict[str, list[str]]:
    """The requirement lists a lock is generated from, keyed by where pyproject or constraints hold them."""
    data = tomllib.loads(pyproject.read_text())
    project = data["project"]
    return {
        "dependencies": list(project.get("dependencies", [])),
        "dev": list(project.get("optional-dependencies", {}).get("dev", [])),
        "build": list(data.get("dependency-groups", {}).get("build", [])),
        "build-system": list(data.get("build-system", {}).get("requires", [])),
        "constraints": [
            line.strip()
            for line in constraints.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ],
    }


def inputs_digest(inputs: dict[str, list[str]]) -> str:
    """A sha256 over the inputs, insensitive to comments and formatting of pyproject.toml."""
    canonical = {key: [str(Requirement(item)) for item in items] for key, items in inputs.items()}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


def read_pins(lock: Path) -> dict[str, Version]:
    """Pinned versions of a lock file, by canonical project name; every pin must carry a hash."""
    pins: dict[str, Version] = {}
    lines = lock.read_text().splitlines()
    for index, line in enumerate(lines):
        match = _PIN.match(line)
        if match is None:
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if "--hash=sha256:" not in line + following:
            raise ValueError(f"{lock.name}: {match.group(1)} is pinned without a hash")
        pins[canonicalize_name(match.group(1))] = Version(match.group(2))
    return pins


def recorded_digest(lock: Path) -> str | None:
    """The inputs digest written in a lock's header, if any."""
    for line in lock.read_text().splitlines():
        if line.startswith(DIGEST_PREFIX):
            return line[len(DIGEST_PREFIX) :].strip()
    return None


def _environment() -> dict[str, str]:
    """The marker environment of the Python the lock is for (this platform, Python 3.11)."""
    environment = {key: str(value) for key, value in default_environment().items()}
    environment.update(python_version=PYTHON_VERSION, python_full_version=f"{PYTHON_VERSION}.0")
    return environment


def disagreements(
    *,
    pyproject: Path = PYPROJECT,
    constraints: Path = CONSTRAINTS,
    lock: Path = FULL_LOCK,
    runtime_only: bool = False,
) -> list[str]:
    """Every way `lock` disagrees with pyproject.toml and the constraints; empty when they agree."""
    inputs = lock_inputs(pyproject, constraints)
    problems: list[str] = []
    digest = recorded_digest(lock)
    if digest != inputs_digest(inputs):
        problems.append(
            f"{lock.name} was generated from other inputs than pyproject.toml and {constraints.name} "
            f"hold now (recorded {digest}, now {inputs_digest(inputs)})"
        )
    pins = read_pins(lock)
    keys = ["dependencies", "build", "build-system", "constraints"] if runtime_only else list(inputs)
    environment = _environment()
    for key in keys:
        for text in inputs[key]:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            name = canonicalize_name(requirement.name)
            if name not in pins:
                problems.append(f"{requirement.name} ({key}) is not in {lock.name}")
            elif not requirement.specifier.contains(pins[name], prereleases=True):
                pinned = f"{requirement.name}=={pins[name]}"
                problems.append(f"{lock.name} pins {pinned}, outside pyproject's {requirement} ({key})")
    return problems


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        raise SystemExit("uv is not installed. To fix: run `make install` (the lock installs uv).")
    return found


def _compile(args: list[str], *, root: Path, output: Path, digest: str, title: str, upgrade: bool) -> None:
    """Resolve into `output` with uv; the pins `output` holds already are kept unless `upgrade`."""
    env = dict(os.environ)
    find_links = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"], capture_output=True, text=True
    ).stdout.strip()
    if find_links and "UV_FIND_LINKS" not in env:
        env["UV_FIND_LINKS"] = find_links
    command = [
        _uv(), "pip", "compile", "--quiet", "--generate-hashes", "--python-version", PYTHON_VERSION,
        "--custom-compile-command", "make lock", "-c", str(CONSTRAINTS.relative_to(ROOT)),
        "--output-file", str(output.relative_to(root)), *(["--upgrade"] if upgrade else []), *args,
    ]  # fmt: skip
    resolved = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if resolved.returncode != 0:
        raise SystemExit(f"uv pip compile failed:\n{resolved.stderr}")
    header = f"# {title}\n{DIGEST_PREFIX}{digest}\n"
    output.write_text(header + output.read_text())


def generate(root: Path = ROOT, *, upgrade: bool = False) -> None:
    """Write both locks under `root` from its pyproject.toml and constraints (what `make lock` runs).

    `upgrade` re-resolves every pin to the newest release the ranges allow; without it the existing pins stay.
    """
    pyproject = root / PYPROJECT.relative_to(ROOT)
    constraints = root / CONSTRAINTS.relative_to(ROOT)
    full_lock = root / FULL_LOCK.relative_to(ROOT)
    runtime_lock = root / RUNTIME_LOCK.relative_to(ROOT)
    digest = inputs_digest(lock_inputs(pyproject, constraints))
    _compile(
        ["pyproject.toml", "--extra", "dev", "--group", "pyproject.toml:build"],
        root=root,
        output=full_lock,
        digest=digest,
        title="Every Python dependency of Srift's development install, hashed (make install, make test, CI).",
        upgrade=upgrade,
    )
    _compile(
        ["pyproject.toml", "--group", "pyproject.toml:build", "-c", str(full_lock.relative_to(root))],
        root=root,
        output=runtime_lock,
        digest=digest,
        title="The runtime dependencies and build tools alone, at lock.txt's versions (the Docker image).",
        upgrade=upgrade,
    )
    problems = disagreements(pyproject=pyproject, constraints=constraints, lock=full_lock) + disagreements(
        pyproject=pyproject, constraints=constraints, lock=runtime_lock, runtime_only=True
    )
    if problems:
        raise SystemExit("the new lock disagrees with pyproject.toml:\n" + "\n".join(problems))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="only check that the locks agree with pyproject.toml"
    )
    parser.add_argument(
        "--upgrade",
        action="store_true",
        help="re-resolve every pin to the newest release (default: keep them)",
    )
    arguments = parser.parse_args()
    if arguments.check:
        problems = disagreements() + disagreements(lock=RUNTIME_LOCK, runtime_only=True)
        if problems:
            print(
                "\n".join(problems) + "\nTo fix: run `make lock` and commit requirements/.", file=sys.stderr
            )
            raise SystemExit(1)
        print("requirements/lock.txt and requirements/runtime.txt agree with pyproject.toml")
        return
    generate(upgrade=arguments.upgrade)
    print(f"wrote {FULL_LOCK.relative_to(ROOT)} ({len(read_pins(FULL_LOCK))} pins) and "
          f"{RUNTIME_LOCK.relative_to(ROOT)} ({len(read_pins(RUNTIME_LOCK))} pins)")  # fmt: skip


if __name__ == "__main__":
    main()
