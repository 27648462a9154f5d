"""The hashed dependency locks: they agree with pyproject.toml, and every install path reads them."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _lock_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("srift_lock_tool", ROOT / "scripts" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = _lock_tool()


def _copy_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    for name in ("pyproject.toml", "requirements/constraints.in", "requirements/lock.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return (
        tmp_path / "pyproject.toml",
        tmp_path / "requirements/constraints.in",
        tmp_path / "requirements/lock.txt",
    )


def test_both_locks_agree_with_pyproject() -> None:
    assert lock.disagreements() == []
    assert lock.disagreements(lock=lock.RUNTIME_LOCK, runtime_only=True) == []


def test_every_pin_carries_a_hash_and_torch_is_the_cpu_build() -> None:
    pins = lock.read_pins(lock.FULL_LOCK)
    assert len(pins) > 50
    assert pins["torch"].local == "cpu", "a CUDA build of torch is several GB; the lock takes the CPU build"
    text = lock.FULL_LOCK.read_text()
    assert text.count("==") == len(pins), "every requirement line is an exact pin"


def test_runtime_lock_is_the_full_locks_versions() -> None:
    full = lock.read_pins(lock.FULL_LOCK)
    runtime = lock.read_pins(lock.RUNTIME_LOCK)
    assert runtime.keys() <= full.keys()
    assert {name: runtime[name] for name in runtime} == {name: full[name] for name in runtime}
    assert "pytest" not in runtime, "the image carries no test tools"


def test_a_new_dependency_without_a_new_lock_is_caught(tmp_path: Path) -> None:
    pyproject, constraints, full = _copy_inputs(tmp_path)
    text = pyproject.read_text().replace('  "pyyaml>=6",\n', '  "pyyaml>=6",\n  "tabulate>=0.9",\n')
    pyproject.write_text(text)
    problems = lock.disagreements(pyproject=pyproject, constraints=constraints, lock=full)
    assert any("generated from other inputs" in p for p in problems)
    assert any(p.startswith("tabulate (dependencies) is not in lock.txt") for p in problems)


def test_a_range_the_pinned_version_leaves_is_caught(tmp_path: Path) -> None:
    pyproject, constraints, full = _copy_inputs(tmp_path)
    pinned = lock.read_pins(full)[canonicalize_name("numpy")]
    text = pyproject.read_text().replace('"numpy>=1.26"', f'"numpy>{pinned}"')
    pyproject.write_text(text)
    problems = lock.disagreements(pyproject=pyproject, constraints=constraints, lock=full)
    assert any(
        f"pins numpy=={pinned}, outside pyproject's numpy>{pinned} (dependencies)" in p for p in problems
    ), problems


def test_a_hand_edited_pin_without_its_hash_is_refused(tmp_path: Path) -> None:
    _, _, full = _copy_inputs(tmp_path)
    text = full.read_text()
    full.write_text(
        re.sub(r"^(numpy==[^ ]+) \\\n(    --hash=\S+ \\\n)*    --hash=\S+\n", r"\1\n", text, flags=re.M)
    )
    with pytest.raises(ValueError, match="numpy is pinned without a hash"):
        lock.read_pins(full)


def _wheel(directory: Path, name: str, version: str) -> None:
    """A minimal pure-Python wheel of `name` `version` (no dependencies) in `directory`."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{name}/__init__.py": "",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def _project(root: Path, *, dev: list[str]) -> None:
    """A pyproject.toml and constraints shaped like Srift's (runtime, `dev` extra, `build` group)."""
    (root / "requirements").mkdir(exist_ok=True)
    (root / "requirements" / "constraints.in").write_text("# none\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["gamma>=1"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        'dependencies = ["alpha>=1"]\n'
        f"[project.optional-dependencies]\ndev = {json.dumps(dev)}\n"
        '[dependency-groups]\nbuild = ["gamma>=1"]\n'
    )


def _pins(lock_file: Path) -> dict[str, str]:
    return {name: str(version) for name, version in lock.read_pins(lock_file).items()}


def test_a_new_lock_keeps_the_existing_pins_unless_upgraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make lock` after adding a dependency adds it and moves no other pin; `--upgrade` moves every pin.

    uv resolves against a local folder of wheels only (an empty file index, no network), so a newer release
    appearing between two runs is under the test's control.
    """
    wheels, index, root = tmp_path / "wheels", tmp_path / "simple", tmp_path / "project"
    for folder in (wheels, index, root):
        folder.mkdir()
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_DEFAULT_INDEX", index.as_uri())
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "cache"))
    full, runtime = root / "requirements" / "lock.txt", root / "requirements" / "runtime.txt"
    for name in ("alpha", "beta", "gamma"):
        _wheel(wheels, name, "1.0")
    _project(root, dev=["beta>=1"])
    lock.generate(root)
    first = full.read_text()
    assert _pins(full) == {"alpha": "1.0", "beta": "1.0", "gamma": "1.0"}

    for name in ("alpha", "beta", "gamma"):
        _wheel(wheels, name, "2.0")
    lock.generate(root)
    assert full.read_text() == first, "unchanged inputs write the same lock, newer releases or not"

    _wheel(wheels, "delta", "1.0")
    _project(root, dev=["beta>=1", "delta>=1"])
    lock.generate(root)
    assert _pins(full) == {"alpha": "1.0", "beta": "1.0", "gamma": "1.0", "delta": "1.0"}
    assert _pins(runtime) == {"alpha": "1.0", "gamma": "1.0"}

    lock.generate(root, upgrade=True)
    assert _pins(full) == {"alpha": "2.0", "beta": "2.0", "gamma": "2.0", "delta": "1.0"}
    assert _pins(runtime) == {"alpha": "2.0", "gamma": "2.0"}


def test_make_install_installs_from_the_lock_with_hashes() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("$(VENV)/.installed:", 1)[1].split("\ninstall:", 1)[0]
    assert "LOCK := requirements/lock.txt" in makefile
    installs = re.findall(r"pip install[^\n]*", recipe)
    assert installs, recipe
    assert "--require-hashes --no-deps -r $(LOCK)" in installs[0]
    for line in installs[1:]:
        assert "--no-deps" in line and "-e ." in line, f"only Srift itself installs outside the lock: {line}"
    assert re.search(r"^\$\(VENV\)/\.installed:.*\$\(LOCK\)", makefile, re.M), "a new lock reinstalls"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    # make test installs from the lock before anything else, then byte-compiles (install) beside lint and mypy
    assert re.search(r"^test: \$\(VENV\)/\.installed\b", makefile, re.M)
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"\$\(MAKE\)[^\n]* install\b", test_recipe), test_recipe


def test_the_image_installs_from_the_runtime_lock_with_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    installs = re.findall(r"pip install(?:[^\n]*\\\n)*[^\n]*", dockerfile)
    assert len(installs) == 2, installs
    assert "--require-hashes" in installs[0] and "-r requirements/runtime.txt" in installs[0]
    assert "--no-deps --no-build-isolation ." in installs[1]
    assert re.search(r"^COPY requirements/runtime\.txt ", dockerfile, re.M)
