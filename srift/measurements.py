"""The measurement registry: every measurement that fits, tunes or checks a shipped constant, and its source.

One data file, `srift/data/measurements.yaml` (format srift-measurement-registry/1), lists each set of
measurements Srift rests on: where it came from (repository, files, commit or device run, date), the copy
Srift ships (its path in the package and its SHA-256), the rows of that copy it covers, what it is used for,
the code that reads it and the constants that result. The fits read their data only through this module
(`Registry.read` checks the copy's hash; `Registry.rows` says which of its rows a use may take), so a
constant rests on nothing the registry does not list, and a measurement the registry does not list cannot
enter a fit. docs/BENCHMARKS.md ("measurement registry") says which data calibrated what.

Uses (`Use`):

- `fit`: a fit's input: the rows a least-squares or maximum-likelihood fit reads (`fit` names it).
- `spread`: out-of-sample errors on rows no fit read, which set a band's width (a spread constant).
- `direct`: a measured figure taken as a constant as it is (a host benchmark, a paper's table, a public
  measurement cited in the constant's docstring); `constants` give the value it set.
- `check`: validation only: no constant depends on it (benchmarks and tests compare against it).

A constant is named by its Python path (`srift.bandwidth.prior.EFA`, a mapping's key in brackets:
`srift.bandwidth.prior.TCP_RESIDUAL_CV[large]`), by a shipped data file and a key in it
(`estimate/data/calibration.json#efficiency.compute`), or by a file of the repository that holds a fitted
model whole (`models/testbed-20261122-0/small.json`).

A run of Srift's own (`kind` device or host) keeps its files in this repository: `check_file` checks one
against the registry before a fit reads it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable
from enum import StrEnum
from importlib import resources
from typing import Annotated, Any, Literal, Protocol, TypeVar

import yaml
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic.dataclasses import dataclass

from srift.errors import ConfigurationError

FORMAT = "srift-measurement-registry/1"
REGISTRY = "data/measurements.yaml"
"""The shipped registry, relative to the srift package."""

_FROZEN = ConfigDict(extra="forbid")
_SHA256 = r"^[0-9a-f]{64}$"
_HINT = "correct the entry in srift/data/measurements.yaml (docs/BENCHMARKS.md, 'measurement registry')"


class NamedRow(Protocol):
    """A parsed row of a shipped copy, named (`row`) as the registry's sets list it."""

    @property
    def row(self) -> str: ...


RowT = TypeVar("RowT", bound=NamedRow)


class Use(StrEnum):
    """What a measurement set is used for (module docstring)."""

    FIT = "fit"
    SPREAD = "spread"
    DIRECT = "direct"
    CHECK = "check"


@dataclass(frozen=True, config=_FROZEN)
class FileRef:
    """A file and, where it is pinned, its SHA-256."""

    path: str = Field(min_length=1)
    sha256: str | None = Field(default=None, pattern=_SHA256)


@dataclass(frozen=True, config=_FROZEN)
class Provenance:
    """Where measurements came from: a public repository's files at a commit, a paper, or a run of Srift's
    own (`run`: the command and the host it ran on; its files are this repository's)."""

    kind: Literal["public", "paper", "device", "host"]
    retrieved: Annotated[str, Field(description="when the figures entered Srift (the commit copying them)")]
    repository: str | None = None
    files: tuple[FileRef, ...] = ()
    commit: str | None = None
    date: str | None = None
    """When measured or published (None: the source does not say)."""
    citation: str | None = None
    run: str | None = None
    url: str | None = None


@dataclass(frozen=True, config=_FROZEN)
class Constant:
    """A constant a set fits or sets: its name (module docstring) and, for a `direct` set's Python constants,
    the value (a data file's entries hold their own)."""

    name: str = Field(min_length=1)
    value: float | None = None


@dataclass(frozen=True, config=_FROZEN)
class MeasurementSet:
    """One set of measurements from one source, and what it is used for."""

    id: str
    title: str
    use: Use
    source: Provenance
    reader: Annotated[str, Field(description="the code that reads the set (a fit, a benchmark or a test)")]
    copy: FileRef | None = None
    """The shipped copy, its path relative to the srift package."""
    shared: tuple[FileRef, ...] = ()
    """The workspace copy of the source, paths relative to shared/."""
    rows: tuple[str, ...] = ()
    """The copy's rows the set covers (or the source's files, where the copy holds no rows)."""
    constants: tuple[Constant, ...] = ()
    note: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> MeasurementSet:
        if len(set(self.rows)) != len(self.rows):
            repeated = sorted({r for r in self.rows if self.rows.count(r) > 1})
            raise ValueError(f"rows listed twice: {', '.join(repeated)}")
        if self.use is not Use.CHECK and not self.constants:
            raise ValueError(f"a {self.use.value} set names the constants it sets")
        if self.use is Use.CHECK and self.constants:
            raise ValueError("a check set sets no constant (use fit, spread or direct)")
        if self.use is Use.DIRECT and any(c.value is None and "#" not in c.name for c in self.constants):
            raise ValueError("a direct set gives each Python constant's value")
        if self.copy is not None and self.copy.sha256 is None:
            raise ValueError("the shipped copy needs its sha256")
        return self


@dataclass(frozen=True, config=_FROZEN)
class _Document:
    format: Literal["srift-measurement-registry/1"]
    as_of: str
    sets: dict[str, MeasurementSet]


class Registry:
    """The registry document, read and checked (see the module docstring)."""

    def __init__(self, document: _Document, *, where: str) -> None:
        self.as_of = document.as_of
        self.sets: dict[str, MeasurementSet] = dict(document.sets)
        self.where = where

    def get(self, set_id: str) -> MeasurementSet:
        """The set `set_id`; ConfigurationError when the registry does not list it."""
        try:
            return self.sets[set_id]
        except KeyError:
            raise ConfigurationError(
                f"{self.where}: no measurement set {set_id!r}", hint=_HINT, field=f"sets.{set_id}"
            ) from None

    def of_copy(self, path: str, use: Use) -> tuple[MeasurementSet, ...]:
        """The sets of `use` whose shipped copy is `path` (relative to the srift package)."""
        return tuple(s for s in self._with_copy(path) if s.use is use)

    def _with_copy(self, path: str) -> tuple[MeasurementSet, ...]:
        return tuple(s for s in self.sets.values() if s.copy is not None and s.copy.path == path)

    def read(self, path: str) -> str:
        """The shipped copy `path` as text, once its SHA-256 is the registry's; a file no set lists as its
        copy, or one whose bytes changed, is refused (ConfigurationError)."""
        pinned = {s.copy.sha256 for s in self._with_copy(path) if s.copy is not None}
        if not pinned:
            raise ConfigurationError(
                f"{path}: the measurement registry lists no set with this file, so no fit may read it",
                hint="add a set for it to srift/data/measurements.yaml with its provenance and sha256",
                field="copy",
            )
        data = resources.files("srift").joinpath(path).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in pinned:
            raise ConfigurationError(
                f"{path}: sha256 {digest} is not the registry's ({', '.join(sorted(map(str, pinned)))})",
                hint="restore the file, or record the changed measurements and their provenance in "
                "srift/data/measurements.yaml (then refit and rewrite the constants)",
                field="copy.sha256",
            )
        return data.decode("utf-8")

    def rows(self, path: str, use: Use, found: Iterable[str]) -> frozenset[str]:
        """The rows of the copy `path` that sets of `use` list, after checking that the copy's rows (`found`)
        are exactly the rows the registry lists for that file, whatever their use."""
        present = list(found)
        listed = [r for s in self._with_copy(path) for r in s.rows]
        repeated = sorted({r for r in listed if listed.count(r) > 1})
        unlisted = sorted(set(present) - set(listed))
        missing = sorted(set(listed) - set(present))
        if repeated or unlisted or missing:
            problems = [
                f"{label}: {', '.join(items[:5])}{' …' if len(items) > 5 else ''}"
                for label, items in (
                    ("in two sets", repeated),
                    ("not in the registry", unlisted),
                    ("listed but not in the file", missing),
                )
                if items
            ]
            raise ConfigurationError(
                f"{path}: rows {'; '.join(problems)}",
                hint="list every row of the file in exactly one set of srift/data/measurements.yaml",
                field="rows",
            )
        return self.listed(path, use)

    def read_rows(
        self,
        path: str,
        parse: Callable[[str], list[RowT]],
        *,
        use: Use,
        set_id: str,
        why: str,
    ) -> list[RowT]:
        """The copy `path` read (`read`: its hash the registry's) and parsed, refused unless its rows are the
        registry's (`rows`) and only sets of `use` list them: a table that may only check must never reach a
        fit, and a fit's table must not be a check. `set_id` and `why` (what the rows are for) make the
        hint."""
        rows = parse(self.read(path))
        present = [r.row for r in rows]
        other = sorted(set(present) - self.rows(path, use, present))
        if other:
            raise ConfigurationError(
                f"{path}: rows {', '.join(other[:3])} are listed by a set that is not a {use.value} set",
                hint=f"{why}: list them in the {use.value} set {set_id} of srift/data/measurements.yaml",
                field="use",
            )
        return rows

    def listed(self, path: str, use: Use) -> frozenset[str]:
        """The rows of the copy `path` that sets of `use` list, not checked against the copy's rows (`rows`
        checks them; a reader that has checked them once selects with this)."""
        return frozenset(r for s in self.of_copy(path, use) for r in s.rows)

    def check_file(self, path: str, data: bytes) -> None:
        """Refuse `data` as the repository file `path` unless a set lists that file with this SHA-256."""
        listed = {f.sha256 for s in self.sets.values() for f in s.source.files if f.path == path and f.sha256}
        digest = hashlib.sha256(data).hexdigest()
        if digest not in listed:
            known = "a different sha256" if listed else "no sha256"
            raise ConfigurationError(
                f"{path}: sha256 {digest}; the measurement registry gives {known}",
                hint="refit only on registered measurements, or record these in srift/data/measurements.yaml",
                field="source.files",
            )

    def value(self, set_id: str, constant: str) -> float:
        """The value a `direct` set gives `constant`."""
        entry = self.get(set_id)
        for c in entry.constants:
            if c.name == constant and c.value is not None:
                return c.value
        raise ConfigurationError(
            f"{self.where}: set {set_id!r} gives no value for {constant}", hint=_HINT, field=f"sets.{set_id}"
        )


def _cite(entry: MeasurementSet) -> str:
    """Where a set came from, in one cell: repository@commit, a paper, or the run."""
    src = entry.source
    if src.repository:
        bare = src.commit is not None and re.fullmatch(r"[0-9a-f]{7,40}", src.commit) is not None
        commit = f"@{src.commit[:8]}" if bare and src.commit else f" @ {src.commit}" if src.commit else ""
        return f"{src.repository}{commit}"
    return src.citation or src.run or ""


def summary_markdown(registry: Registry) -> str:
    """The registry as one Markdown table (docs/BENCHMARKS.md "measurement registry"), fits before checks."""
    order = {Use.FIT: 0, Use.SPREAD: 1, Use.DIRECT: 2, Use.CHECK: 3}
    lines = [
        "What each measurement set calibrates (`fit`: a fit's input; `spread`: out-of-sample errors that "
        "set a band; `direct`: measured figures taken as constants; `check`: validation only, no constant "
        "depends on it). Provenance, files, hashes and every row: `srift/data/measurements.yaml`; the fits "
        "read their data only through it (`srift.measurements`).",
        "",
        "| set | use | source | date | rows | read by | constants |",
        "|---|---|---|---|---:|---|---|",
    ]
    for entry in sorted(registry.sets.values(), key=lambda e: (order[e.use], e.id)):
        constants = ", ".join(f"`{c.name}`" for c in entry.constants) or "–"
        date = entry.source.date or f"not stated (copied {entry.source.retrieved})"
        rows = str(len(entry.rows)) if entry.rows else "–"
        cells = [entry.id, entry.use.value, _cite(entry), date, rows, f"`{entry.reader}`", constants]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith(("function-", "MeasurementSet")))


def parse_registry(text: str, *, where: str = REGISTRY) -> Registry:
    """Validate a registry document; ConfigurationError names the entry and field at fault."""
    try:
        document: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{where}: not YAML ({exc})", hint=_HINT, field="registry") from exc
    try:
        parsed = TypeAdapter(_Document).validate_python(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _location(first["loc"]) or "registry"
        raise ConfigurationError(f"{first['msg']} (in {where})", hint=_HINT, field=field) from exc
    for key, entry in parsed.sets.items():
        if entry.id != key:
            raise ConfigurationError(
                f"id {entry.id!r} differs from its key (in {where})", hint=_HINT, field=f"sets.{key}"
            )
    return Registry(parsed, where=where)


@functools.lru_cache(maxsize=1)
def shipped_registry() -> Registry:
    """The shipped registry (read once)."""
    return parse_registry(resources.files("srift").joinpath(REGISTRY).read_text(encoding="utf-8"))
