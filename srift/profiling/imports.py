"""Compute profiles from times measured elsewhere: a table of (batch, seconds) plus a layers-only profile.

`srift profile import TABLE --layers LAYERS.json --accelerator T4` turns a table measured on the target
accelerator (a training log, a public benchmark, a trace) into the same profile document `srift profile`
writes, without running the model there. The table names its columns, units in the names:

    batch, step_s                  seconds of one training step (forward + backward) per GPU batch
    batch, step_ms                 the same in milliseconds
    batch, forward_s, backward_s   forward and backward measured apart (or forward_ms, backward_ms)
    batch, samples_per_s           throughput of one GPU at that batch (step = batch / samples_per_s)

`batch` is the per-GPU batch. Rows may repeat a batch (repeated measurements): the median is kept. The
compute curves pass through every distinct batch (piecewise-linear, as the profiler's); beyond the table
they extend the nearest segment, and a one-row table scales in proportion to the batch.

What a table does not say is filled in by stated assumptions, each recorded in the profile's
`extra.assumptions` and printed by the CLI:

- forward/backward split of a step time: forward = ⅓ of the step (`FORWARD_FRACTION`), because a backward
  pass costs about twice the forward's arithmetic (Kaplan et al. 2020, "Scaling Laws for Neural Language
  Models", §2.1: C_forward ≈ 2N, C_backward ≈ 2 C_forward per token);
- straggler spread (`straggler_cv`): Srift Table 1's std/mean of compute latency over 100 iterations
  (p3.2xlarge V100 5.2 %, g3.4xlarge M60 4.3 %, g4dn.4xlarge T4 6.7 %), for other accelerators their
  median 5.2 %;
- the optimizer step is inside the measured step time unless `update_s` is given (then it is taken out of
  the step and modelled after the gradient exchange);
- gradient readiness (`ready_frac`) as measured by the layers-only profile on its own device.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import statistics
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from srift.domain.profile import PROFILE_SCHEMA_VERSION, ComputeCurve, LayerProfile, ModelProfile
from srift.domain.profile_document import MAX_PASS_S, MIN_PASS_S
from srift.domain.structure import Precision
from srift.errors import InvalidInput
from srift.limits import LAYERS_PER_PROFILE

FORWARD_FRACTION = 1.0 / 3.0
"""Forward share of a step when only the step is known (Kaplan et al. 2020 §2.1: backward ≈ 2 × forward)."""

STRAGGLER_CV_BY_GPU = {"V100": 0.052, "M60": 0.043, "T4": 0.067}
"""Srift Table 1 (p3.2xlarge, g3.4xlarge, g4dn.4xlarge): std/mean of compute latency, 100 iterations."""

DEFAULT_STRAGGLER_CV = statistics.median(STRAGGLER_CV_BY_GPU.values())
"""For accelerators Table 1 does not list: the median of its three values (5.2 %)."""

MAX_TABLE_ROWS = 10_000
MAX_TABLE_BYTES = 2_000_000


class TableKind(StrEnum):
    """What a compute table measured."""

    STEP = "step"
    FORWARD_BACKWARD = "forward_backward"
    THROUGHPUT = "throughput"


@dataclass(frozen=True, slots=True)
class ComputeTable:
    """Median seconds per distinct per-GPU batch (ascending), and how many rows each median rests on."""

    kind: TableKind
    batches: tuple[int, ...]
    step_s: tuple[float, ...]
    forward_s: tuple[float, ...] | None
    backward_s: tuple[float, ...] | None
    rows: tuple[int, ...]
    columns: tuple[str, ...]


_UNIT = {"s": 1.0, "ms": 1e-3}


def _rows_from_text(text: str, *, source: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) pairs from CSV/TSV/whitespace text with a header, or from a JSON list of objects."""
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(
                f"{source} is not valid JSON ({exc})", hint="give a JSON list of {batch, step_s} objects"
            ) from exc
        if isinstance(data, dict) and isinstance(data.get("rows"), list):
            data = data["rows"]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InvalidInput(
                f"{source} must hold a list of objects",
                hint='e.g. [{"batch": 32, "step_s": 0.21}, ...]',
                field="table",
            )
        return [(i + 1, {str(k).strip().lower(): v for k, v in r.items()}) for i, r in enumerate(data)]
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.startswith("#")
    ]
    if not lines:
        raise InvalidInput(f"{source} is empty", hint="give a header line and one row per measurement")
    header = lines[0][1]
    delimiter = next((d for d in (",", "\t", ";") if d in header), None)
    out: list[tuple[int, dict[str, Any]]] = []
    if delimiter is None:
        names = header.split()
        parsed = [(n, line.split()) for n, line in lines[1:]]
    else:
        reader = csv.reader(io.StringIO("\n".join(line for _, line in lines)), delimiter=delimiter)
        cells = list(reader)
        names = cells[0]
        parsed = [(lines[i][0], row) for i, row in enumerate(cells[1:], start=1)]
    names = [c.strip().lower() for c in names]
    for n, row in parsed:
        if len(row) != len(names):
            raise InvalidInput(
                f"{source} line {n} has {len(row)} cells, the header has {len(names)}",
                hint="give one value per column on every line",
                field="table",
            )
        out.append((n, dict(zip(names, (c.strip() for c in row), strict=True))))
    return out


def _number(value: Any, *, source: str, line: int, column: str) -> float:
    try:
        number = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise InvalidInput(
            f"{source} line {line}: {column} = {value!r} is not a positive number",
            hint=f"give {column} as a number > 0",
            field=f"table.{column}",
        )
    return number


def _kind(columns: set[str], *, source: str) -> tuple[TableKind, dict[str, tuple[str, float]]]:
    """Which measurement the columns hold, and for each quantity its column and unit factor to seconds."""

    def pick(quantity: str) -> tuple[str, float] | None:
        found = [(f"{quantity}_{u}", f) for u, f in _UNIT.items() if f"{quantity}_{u}" in columns]
        if len(found) > 1:
            raise InvalidInput(
                f"{source} gives {quantity} twice ({', '.join(c for c, _ in found)})",
                hint="keep one unit per quantity",
                field="table",
            )
        return found[0] if found else None

    step, forward, backward = pick("step"), pick("forward"), pick("backward")
    throughput = ("samples_per_s", 1.0) if "samples_per_s" in columns else None
    given = [x for x in (step, throughput) if x] + ([forward] if forward or backward else [])
    if "batch" not in columns or len(given) != 1 or (forward is None) != (backward is None):
        raise InvalidInput(
            f"{source} has columns {sorted(columns)}",
            hint="give `batch` and one of: step_s (or step_ms); forward_s and backward_s (or _ms); "
            "samples_per_s",
            field="table",
        )
    if step:
        return TableKind.STEP, {"step": step}
    if throughput:
        return TableKind.THROUGHPUT, {"samples_per_s": throughput}
    assert forward is not None and backward is not None
    return TableKind.FORWARD_BACKWARD, {"forward": forward, "backward": backward}


def parse_compute_table(text: str, *, source: str = "table") -> ComputeTable:
    """Parse a compute table (see the module docstring); InvalidInput names the line and column at fault."""
    if len(text.encode()) > MAX_TABLE_BYTES:
        raise InvalidInput(
            f"{source} is larger than {MAX_TABLE_BYTES} bytes",
            hint="keep one row per batch and repetition",
            field="table",
        )
    rows = _rows_from_text(text, source=source)
    if not rows:
        raise InvalidInput(f"{source} has a header but no rows", hint="add one row per measurement")
    if len(rows) > MAX_TABLE_ROWS:
        raise InvalidInput(
            f"{source} has {len(rows)} rows, more than {MAX_TABLE_ROWS}",
            hint="aggregate repeated measurements first",
            field="table",
        )
    columns = set().union(*(r.keys() for _, r in rows))
    kind, quantities = _kind(columns, source=source)
    per_batch: dict[int, list[tuple[float, float | None, float | None]]] = {}
    for line, row in rows:
        batch_value = _number(row.get("batch"), source=source, line=line, column="batch")
        if batch_value != int(batch_value):
            raise InvalidInput(
                f"{source} line {line}: batch {row.get('batch')!r} is not a whole number",
                hint="batch is samples per GPU",
                field="table.batch",
            )
        batch = int(batch_value)
        values = {
            q: _number(row.get(col), source=source, line=line, column=col) * factor
            for q, (col, factor) in quantities.items()
        }
        entry: tuple[float, float | None, float | None]
        if kind is TableKind.STEP:
            entry = (values["step"], None, None)
        elif kind is TableKind.THROUGHPUT:
            entry = (batch / values["samples_per_s"], None, None)
        else:
            entry = (values["forward"] + values["backward"], values["forward"], values["backward"])
        per_batch.setdefault(batch, []).append(entry)
    batches = tuple(sorted(per_batch))
    step = tuple(statistics.median(e[0] for e in per_batch[b]) for b in batches)
    forward = backward = None
    if kind is TableKind.FORWARD_BACKWARD:
        forward = tuple(statistics.median(e[1] or 0.0 for e in per_batch[b]) for b in batches)
        backward = tuple(statistics.median(e[2] or 0.0 for e in per_batch[b]) for b in batches)
    return ComputeTable(
        kind=kind,
        batches=batches,
        step_s=step,
        forward_s=forward,
        backward_s=backward,
        rows=tuple(len(per_batch[b]) for b in batches),
        columns=tuple(sorted(columns)),
    )


def straggler_cv_for(accelerator: str) -> tuple[float, str]:
    """The Srift Table 1 spread for a GPU named in `accelerator` (or the median), with the assumption text."""
    for gpu, cv in STRAGGLER_CV_BY_GPU.items():
        if re.search(rf"(^|[^a-z0-9]){gpu.lower()}([^a-z0-9]|$)", accelerator.lower()):
            return cv, (
                f"straggler_cv {cv:g}: Srift Table 1's std/mean of {gpu} compute latency over 100 iterations"
            )
    return DEFAULT_STRAGGLER_CV, (
        f"straggler_cv {DEFAULT_STRAGGLER_CV:g}: median of Srift Table 1 (no figure for {accelerator}); "
        "pass --straggler-cv to use your own"
    )


def build_profile(
    *,
    table: ComputeTable,
    layers: LayerProfile,
    accelerator: str,
    model_name: str | None = None,
    max_batch: int | None = None,
    forward_fraction: float | None = None,
    straggler_cv: float | None = None,
    update_s: float = 0.0,
    table_source: str = "table",
    table_sha256: str = "",
    created_at: str = "",
    precision: Precision | None = None,
) -> ModelProfile:
    """A full ModelProfile from a compute table and a layers-only profile, every assumption recorded.

    `forward_fraction` splits step times (default FORWARD_FRACTION; ignored when the table has forward and
    backward apart). `update_s` > 0 is taken out of each step time and modelled as the optimizer step.
    `precision` is what the times were measured in (default: the layers profile's); the layers profile's
    structure (FLOPs, bytes) is kept only when it was counted in that precision.
    """
    _check_import_args(
        accelerator=accelerator,
        forward_fraction=forward_fraction,
        update_s=update_s,
        straggler_cv=straggler_cv,
    )
    LAYERS_PER_PROFILE.check(len(layers.layers), field="layers")
    assumptions: list[str] = ["batch in the table is per GPU"]
    forward, backward = _pass_times(
        table, update_s=update_s, forward_fraction=forward_fraction, notes=assumptions
    )
    _check_pass_times(table, forward=forward, backward=backward)
    largest = _max_batch(table, max_batch, notes=assumptions)
    if straggler_cv is None:
        cv, text = straggler_cv_for(accelerator)
        assumptions.append(text)
    else:
        cv = straggler_cv
    assumptions.append(
        f"gradient readiness as measured on {layers.device} by the layers-only profile "
        f"({len(layers.layers)} layers, {layers.total_grad_bytes / 1e6:.1f} MB)"
    )
    measured_in = layers.precision if precision is None else precision
    structure = layers.structure
    if structure is not None and structure.precision is not measured_in:
        assumptions.append(
            f"the layers profile's FLOPs and bytes were counted in {structure.precision.value}, the times "
            f"are {measured_in.value}: left out (re-run --layers-only in {measured_in.value} to estimate "
            "other GPUs from this profile)"
        )
        structure = None
    return ModelProfile(
        model=(model_name or layers.model).strip(),
        accelerator=accelerator.strip(),
        max_batch=largest,
        forward=ComputeCurve(table.batches, tuple(forward)),
        backward=ComputeCurve(table.batches, tuple(backward)),
        layers=layers.layers,
        straggler_cv=cv,
        schema_version=PROFILE_SCHEMA_VERSION,
        torch_version=layers.torch_version,
        device="imported",
        threads=None,
        created_at=created_at,
        update_s=update_s,
        precision=measured_in,
        structure=structure,
        extra={
            "profiler": "srift.profiling.imports",
            "imported": {
                "table": table_source,
                "sha256": table_sha256,
                "kind": table.kind.value,
                "columns": list(table.columns),
                "batches": list(table.batches),
                "rows_per_batch": list(table.rows),
                "step_s": list(table.step_s),
            },
            "layers_profile": {
                "model": layers.model,
                "device": layers.device,
                "created_at": layers.created_at,
                "trainable_bytes": layers.trainable_bytes,
            },
            "assumptions": assumptions,
            "trainable_bytes": layers.trainable_bytes,
        },
    )


def _check_import_args(
    *, accelerator: str, forward_fraction: float | None, update_s: float, straggler_cv: float | None
) -> None:
    """InvalidInput for a blank accelerator or a forward fraction, optimizer step or spread out of range."""
    if not accelerator.strip():
        raise InvalidInput(
            "is empty", hint="name the accelerator the table was measured on", field="accelerator"
        )
    if forward_fraction is not None and not 0.0 < forward_fraction < 1.0:
        raise InvalidInput(
            f"{forward_fraction} is outside (0, 1)",
            hint="the forward pass's share of a step, e.g. 0.33",
            field="forward_fraction",
        )
    if not math.isfinite(update_s):
        raise InvalidInput(
            f"{update_s} is not a finite number of seconds",
            hint="give seconds ≥ 0, e.g. 0.01",
            field="update_s",
        )
    if update_s < 0:
        raise InvalidInput(f"{update_s} is negative", hint="give seconds ≥ 0", field="update_s")
    if straggler_cv is not None and not (math.isfinite(straggler_cv) and 0 <= straggler_cv <= 5):
        raise InvalidInput(
            f"{straggler_cv} is outside [0, 5]", hint="std/mean of step time, e.g. 0.05", field="straggler_cv"
        )


def _pass_times(
    table: ComputeTable, *, update_s: float, forward_fraction: float | None, notes: list[str]
) -> tuple[list[float], list[float]]:
    """Forward and backward seconds per batch: the table's own when it has them apart, else its step times
    less the optimizer step, split by `forward_fraction` (default FORWARD_FRACTION). Appends to `notes`
    what that assumed."""
    if table.forward_s is not None and table.backward_s is not None:
        if update_s > 0:
            notes.append(f"the optimizer step takes {update_s:g} s after forward and backward")
        else:
            notes.append("no optimizer-step time given (update_s 0)")
        return list(table.forward_s), list(table.backward_s)
    if update_s > 0:
        short = [b for b, t in zip(table.batches, table.step_s, strict=True) if t <= update_s]
        if short:
            raise InvalidInput(
                f"update_s {update_s:g} s is not shorter than the step time at batch {short[0]}",
                hint="update_s is the optimizer step inside each measured step; give a smaller value",
                field="update_s",
            )
        notes.append(f"the optimizer step ({update_s:g} s) is inside each measured step time")
    else:
        notes.append(
            "the optimizer step is inside the measured step time (counted in backward, before the exchange)"
        )
    compute = [t - update_s for t in table.step_s]
    share = FORWARD_FRACTION if forward_fraction is None else forward_fraction
    forward = [c * share for c in compute]
    backward = [c - f for c, f in zip(compute, forward, strict=True)]
    why = (
        "backward ≈ 2 × forward (Kaplan et al. 2020, §2.1)"
        if forward_fraction is None
        else "given with --forward-fraction"
    )
    notes.append(f"forward = {share:.3g} of each step, backward the rest: {why}")
    return forward, backward


def _check_pass_times(table: ComputeTable, *, forward: list[float], backward: list[float]) -> None:
    """InvalidInput on the table's time column when a pass it implies lies outside what a stored profile
    may hold (MIN_PASS_S to MAX_PASS_S: the server and `srift predict --profile` refuse such a profile)."""
    for batch, fw, bw in zip(table.batches, forward, backward, strict=True):
        for which, seconds in (("forward", fw), ("backward", bw)):
            if MIN_PASS_S <= seconds <= MAX_PASS_S:
                continue
            prefix = which if table.kind is TableKind.FORWARD_BACKWARD else ""
            column = next(c for c in table.columns if c != "batch" and c.startswith(prefix))
            raise InvalidInput(
                f"at batch {batch} the {which} pass would take {seconds:.3g} s, outside the "
                f"{MIN_PASS_S:g} to {MAX_PASS_S:g} s of one pass a profile may hold",
                hint="check the table's units: _s columns take seconds and _ms milliseconds of one GPU's "
                "step, samples_per_s one GPU's samples per second",
                field=f"table.{column}",
            )


def _max_batch(table: ComputeTable, max_batch: int | None, *, notes: list[str]) -> int:
    """The largest batch that fits: `max_batch`, else the table's largest; appends what that assumed.
    A `max_batch` below a batch the table timed is InvalidInput: a batch that does not fit cannot have been
    timed (the server refuses a breakpoint above max_batch)."""
    top = table.batches[-1]
    largest = max_batch if max_batch is not None else top
    if largest < 1:
        raise InvalidInput(f"{largest} is below 1", hint="max_batch is samples per GPU", field="max_batch")
    if largest < top:
        raise InvalidInput(
            f"{largest} is below batch {top}, which the table timed",
            hint=f"a batch that does not fit cannot have been timed: give --max-batch {top} or more, or drop "
            f"the table's rows above {largest}",
            field="max_batch",
        )
    if max_batch is None:
        notes.append(f"max_batch {top}: the table's largest batch (pass --max-batch if more fits)")
    elif max_batch > top:
        notes.append(f"times above batch {top} extrapolate the table's last segment up to {max_batch}")
    if len(table.batches) == 1:
        notes.append(f"one batch measured: time scales in proportion to the batch from batch {top}")
    return largest


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
