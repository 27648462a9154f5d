"""Resolve `MODULE:NAME` (or `path/to/file.py:NAME`) strings naming the user's factories and loss."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from srift.errors import InvalidInput


def resolve_callable(spec: str, *, what: str, field: str) -> Callable[..., Any]:
    """Import `spec` = "module.sub:attr.path" (or "file.py:attr") and return the callable it names.

    The current directory is put on sys.path first, as `python -m` would, so local modules resolve.
    Any import failure is an InvalidInput naming the spec and the underlying exception.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise InvalidInput(
            f"{what} `{spec}` is not of the form MODULE:NAME",
            hint="write e.g. `mypkg.models:build_model` or `train.py:build_model`",
            field=field,
        )
    try:
        module = _import(module_name)
    except Exception as exc:
        raise InvalidInput(
            f"{what} `{spec}` failed to import: {type(exc).__name__}: {exc}",
            hint="check the module path, run from the directory that contains it, or fix the import error",
            field=field,
        ) from exc
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            raise InvalidInput(
                f"{what} `{spec}`: module `{module.__name__}` has no attribute `{attr_path}`",
                hint="name a function or class defined in that module",
                field=field,
            )
        target = getattr(target, part)
    if not callable(target):
        raise InvalidInput(
            f"{what} `{spec}` names a {type(target).__name__}, not a callable",
            hint="name a function (or class) that builds the object",
            field=field,
        )
    fn: Callable[..., Any] = target
    return fn


def _import(module_name: str) -> Any:
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        name = f"srift_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(module_name)


def describe(fn: Callable[..., Any]) -> str:
    """A readable `module:qualname` for a callable, used in messages and as the default model name."""
    module = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}:{name}"
