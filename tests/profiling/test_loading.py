"""Resolving MODULE:NAME and file.py:NAME specs of the user's factories."""

from __future__ import annotations

from pathlib import Path

import pytest

from srift.errors import InvalidInput
from srift.profiling import testmodels
from srift.profiling.loading import describe, resolve_callable


def test_module_and_attribute_resolve() -> None:
    assert (
        resolve_callable("srift.profiling.testmodels:cnn", what="model factory", field="f") is testmodels.cnn
    )
    nested = resolve_callable("srift.profiling.testmodels:SmallCNN.forward", what="x", field="f")
    assert nested is testmodels.SmallCNN.forward


def test_a_python_file_resolves(tmp_path: Path) -> None:
    path = tmp_path / "mymodels.py"
    path.write_text("def build():\n    return 42\n")
    assert resolve_callable(f"{path}:build", what="model factory", field="f")() == 42


def test_a_module_in_the_working_directory_resolves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "srift_cwd_models.py").write_text("def make():\n    return 'ok'\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_callable("srift_cwd_models:make", what="model factory", field="f")() == "ok"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("srift.profiling.testmodels", "not of the form MODULE:NAME"),
        (":cnn", "not of the form MODULE:NAME"),
        ("no_such_module_xyz:cnn", "ModuleNotFoundError"),
        ("srift.profiling.testmodels:nope", "has no attribute `nope`"),
        ("srift.profiling.testmodels:CNN_IMAGE", "not a callable"),
        ("/nonexistent/models.py:build", "FileNotFoundError"),
    ],
)
def test_bad_specs_name_the_spec_and_cause(spec: str, needle: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        resolve_callable(spec, what="model factory", field="model_factory")
    assert caught.value.field == "model_factory"
    assert spec in str(caught.value) and needle in str(caught.value)


def test_a_file_that_fails_to_import_reports_the_exception(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("import torch\nraise RuntimeError('boom at import')\n")
    with pytest.raises(InvalidInput) as caught:
        resolve_callable(f"{path}:build", what="input factory", field="input_factory")
    assert "input factory" in str(caught.value) and "RuntimeError: boom at import" in str(caught.value)


def test_describe_names_module_and_qualname() -> None:
    assert describe(testmodels.cnn) == "srift.profiling.testmodels:cnn"
