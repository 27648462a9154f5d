"""CLI command `srift profile`: measure a torch model's compute profile and write (or upload) it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from srift.commands.options import finite_number, in_cli_words
from srift.profiling.defaults import (
    DEFAULT_ITERATIONS,
    DEFAULT_LAYERS_BATCH,
    DEFAULT_LAYERS_ITERATIONS,
    DEFAULT_REPEATS,
    DEFAULT_WARMUP,
)

if TYPE_CHECKING:
    from srift.domain.profile import LayerProfile, ModelProfile
    from srift.domain.structure import ModelStructure, Precision

console = Console()
err_console = Console(stderr=True)

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(text: str) -> int:
    """'8GiB', '512MB', '1.5e9' or a plain byte count → bytes."""
    from srift.errors import InvalidInput

    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in _UNITS:
        raise InvalidInput(
            f"{text!r} is not a size",
            hint="write e.g. 8GiB, 512MiB, 2GB or a byte count",
            field="memory_budget",
        )
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value < 1:
        raise InvalidInput(f"{text!r} is not positive", hint="give a positive size", field="memory_budget")
    return value


def precision_option(*, amp: str | None, tf32: bool, strict_fp32: bool = False) -> Precision:
    """The precision `--amp fp16|bf16` / `--tf32` ask for (fp32 when neither); `--strict-fp32` (IEEE
    float32 everywhere) contradicts `--tf32` (TF32 matrix products and convolutions), which would win."""
    from srift.domain.structure import Precision
    from srift.errors import InvalidInput

    if amp is not None and tf32:
        raise InvalidInput(
            "--amp and --tf32 exclude each other",
            hint="pick autocast (--amp fp16 or bf16) or TF32 (--tf32), not both",
            field="amp",
        )
    if tf32 and strict_fp32:
        raise InvalidInput(
            "--tf32 and --strict-fp32 exclude each other",
            hint="pick TF32 matrix products and convolutions (--tf32) or IEEE float32 everywhere "
            "(--strict-fp32), not both",
            field="strict_fp32",
        )
    if tf32:
        return Precision.TF32
    if amp is None:
        return Precision.FP32
    if amp.strip().lower() not in ("fp16", "bf16"):
        raise InvalidInput(
            f"--amp {amp!r} is not fp16 or bf16", hint="pass --amp fp16 or --amp bf16", field="amp"
        )
    return Precision(amp.strip().lower())


def structure_rows(table: Table, structure: ModelStructure | None, *, note: str | None = None) -> None:
    """Rows for a profile's structure: FLOPs, bytes, memory per sample."""
    if structure is None:
        table.add_row("FLOPs / bytes", f"not counted ({note})" if note else "not counted")
        return
    fw, bw, mem = structure.forward, structure.backward, structure.memory
    flops = fw.matmul_flops.per_sample + bw.matmul_flops.per_sample
    moved = sum(x.per_sample for x in (fw.matmul_bytes, fw.other_bytes, bw.matmul_bytes, bw.other_bytes))
    table.add_row(
        "FLOPs / bytes",
        f"{flops / 1e9:.3g} GFLOP and {moved / 1e6:.4g} MB moved per sample (forward+backward), "
        f"{fw.kernels + bw.kernels} kernels per step",
    )
    fixed = mem.parameter_bytes + mem.gradient_bytes + mem.optimizer_state_bytes
    table.add_row(
        "memory",
        f"{fixed / 1e6:.4g} MB parameters+gradients+{mem.optimizer.split(' ')[0]} state, "
        f"{mem.activation_bytes.per_sample / 1e6:.4g} MB activations per sample",
    )


def result_table(profile: ModelProfile, *, out: Path | None) -> Table:
    extra = profile.extra
    table = Table(title=f"profile of {profile.model}", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    limited = extra.get("max_batch_limited_by")
    table.add_row("accelerator", profile.accelerator)
    table.add_row("max batch", f"{profile.max_batch}" + (f" (limited by {limited})" if limited else ""))
    per_sample_ms = 1000.0 * profile.compute_s(profile.max_batch) / profile.max_batch
    table.add_row("ms per sample", f"{per_sample_ms:.3f} at batch {profile.max_batch} (forward+backward)")
    table.add_row(
        "forward / backward",
        " · ".join(
            f"b={b}: {1000 * f:.2f}/{1000 * w:.2f} ms"
            for b, f, w in zip(
                profile.forward.batches, profile.forward.times_s, profile.backward.times_s, strict=True
            )
        ),
    )
    splits = sorted(
        (c for c in extra.get("bend_checks") or [] if c.get("split")), key=lambda c: float(c["batch"])
    )
    segments = len(profile.forward.batches) - 1
    table.add_row(
        "curve",
        f"{segments} segment{'s' if segments != 1 else ''}"
        + (
            ", split at "
            + ", ".join(f"b={c['batch']} ({100 * c['deviation']:+.0f} % off the line)" for c in splits)
            if splits
            else ""
        ),
    )
    conditional = sum(1 for x in profile.layers if x.exec_prob < 1.0)
    table.add_row(
        "layers",
        f"{len(profile.layers)} trainable, {profile.total_grad_bytes / 1e6:.2f} MB of gradients"
        + (f", {conditional} conditional" if conditional else ""),
    )
    table.add_row("straggler cv", f"{profile.straggler_cv:.3f}")
    table.add_row("precision", profile.precision.value)
    table.add_row("measured on", profile.device)
    memory = extra.get("training_memory")
    if isinstance(memory, dict) and isinstance(memory.get("activation_bytes"), list):
        fixed, per_sample = memory["activation_bytes"]
        check = memory.get("check") or {}
        table.add_row(
            "training memory",
            f"{memory.get('parameter_bytes', 0) / 1e6:.4g} MB parameters, activations {fixed / 1e6:+.4g} MB "
            f"+ {per_sample / 1e6:.4g} MB per sample ({memory.get('method')}"
            + (
                f"; at b={check['batch']} {100 * check['error']:+.1f} % off"
                if check.get("error") is not None
                else ""
            )
            + ")",
        )
    structure_rows(table, profile.structure, note=extra.get("structure_error"))
    pipe = profile.input_pipeline
    if pipe is not None:
        table.add_row(
            "input pipeline",
            f"{pipe.samples_per_s_per_core:.1f} samples/s per CPU core, "
            f"{pipe.bytes_per_sample / 1e3:.1f} kB read per sample ({pipe.source})",
        )
    if "profile_s" in extra:
        table.add_row("took", f"{extra['profile_s']:.1f} s")
    if out is not None:
        table.add_row("written to", str(out))
    return table


class _MeasureByDefault(TyperGroup):
    """`srift profile MODULE:FACTORY ...` runs `measure` (the historical form); other verbs run as named."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["measure", *args]
        return super().parse_args(ctx, args)


def layers_table(layers: LayerProfile, *, out: Path | None) -> Table:
    table = Table(title=f"layers of {layers.model}", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row(
        "layers",
        f"{len(layers.layers)} trainable, {layers.total_grad_bytes / 1e6:.2f} MB of gradients",
    )
    first = ", ".join(
        f"{x.name} ({x.grad_bytes / 1e6:.2f} MB @ {x.ready_frac:.2f})" for x in layers.layers[:3]
    )
    table.add_row("ready first", first + (" …" if len(layers.layers) > 3 else ""))
    extra = layers.extra
    table.add_row(
        "measured on",
        f"{layers.device}, batch {extra.get('iteration_batch')}, {extra.get('iterations')} iterations",
    )
    table.add_row("precision", layers.precision.value)
    structure_rows(table, layers.structure, note=extra.get("structure_error"))
    if "profile_s" in extra:
        table.add_row("took", f"{extra['profile_s']:.1f} s")
    if out is not None:
        table.add_row("written to", str(out))
    table.add_row("next", "srift profile import TIMES.csv --layers FILE --accelerator GPU --out profile.json")
    return table


ProfileOut = Annotated[Path, typer.Option("--out", help="where to write the profile JSON")]
UploadToken = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="SRIFT_TOKEN", help="API token for --upload (env SRIFT_TOKEN)", show_default=False
    ),
]
ProfileJson = Annotated[bool, typer.Option("--json", help="print the profile JSON instead of the table")]


def _write_json(out: Path, document: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")


def _finish(
    result: ModelProfile,
    *,
    out: Path,
    upload: str | None,
    token: str | None,
    as_json: bool,
    assumptions: bool = False,
) -> None:
    """Write the profile to `out`, upload it when asked, then print its JSON or its table (with the
    assumptions an imported profile rests on) and where it was stored."""
    from srift.profiling.upload import upload_profile

    document: dict[str, Any] = result.to_dict()
    _write_json(out, document)
    answer = upload_profile(result, url=upload, token=token) if upload else None
    if as_json:
        typer.echo(json.dumps(document if answer is None else {**document, "uploaded": answer}, indent=2))
        return
    console.print(result_table(result, out=out))
    if assumptions:
        console.print("assumptions:", highlight=False)
        for line in result.extra["assumptions"]:
            console.print(f"  - {line}", highlight=False, soft_wrap=True)
    if answer is not None:
        state = "stored" if answer.get("created") else "already stored"
        console.print(f"{state} on {upload} as profile {answer.get('id')}", highlight=False)


UploadFiles = Annotated[
    list[Path],
    typer.Argument(metavar="FILE...", dir_okay=False, help="profile JSON files (`srift profile --out`)"),
]
UploadServer = Annotated[
    str, typer.Option("--url", envvar="SRIFT_URL", help="the Srift server (env SRIFT_URL)")
]
WriteToken = Annotated[
    str | None,
    typer.Option("--token", envvar="SRIFT_TOKEN", help="a write token (env SRIFT_TOKEN)", show_default=False),
]
Shared = Annotated[
    bool, typer.Option("--shared", help="let other tokens name it by id (their `model` plans never use it)")
]
AnswersJson = Annotated[bool, typer.Option("--json", help="print the server's answers as JSON")]


def upload_command(
    files: UploadFiles,
    url: UploadServer = "http://127.0.0.1:8000",
    token: WriteToken = None,
    shared: Shared = False,
    as_json: AnswersJson = False,
) -> None:
    """Upload existing profile files to a server (POST /v1/profiles); each is checked here first.

    The profile is the token's: it answers this token's plans and predictions of its model, before
    the shipped reference estimates, and nobody else's.

    Examples:

      srift profile upload cnn.json --token $SRIFT_TOKEN

      srift profile upload bert-t4.json bert-a10g.json --url http://srift:8000 \\
          --shared
    """
    from srift.commands.remote import call_api, load_request_file
    from srift.domain.profile_document import read_profile

    answers = []
    for path in files:
        profile = read_profile(load_request_file(path))
        query = "?shared=true" if shared else ""
        answer = call_api("POST", url, f"/v1/profiles{query}", token=token, body=profile.to_dict())
        answers.append({"file": str(path), **answer})
        if not as_json:
            state = "stored" if answer.get("created") else "already stored"
            console.print(
                f"{path}: {state} as profile {answer.get('id')} "
                f"({profile.model} on {profile.accelerator}, {profile.precision.value})",
                highlight=False,
            )
    if as_json:
        typer.echo(json.dumps(answers, indent=2))


TableFile = Annotated[
    Path,
    typer.Argument(
        metavar="TABLE",
        dir_okay=False,
        help="CSV/TSV/JSON table of batch and seconds (its columns: see above)",
    ),
]
LayersFile = Annotated[
    Path,
    typer.Option(
        "--layers",
        dir_okay=False,
        help="`srift profile --layers-only` output (or any full profile: its layers are taken)",
    ),
]
MeasuredOn = Annotated[
    str,
    typer.Option(
        "--accelerator",
        help="the accelerator the times were measured on: a catalog GPU model (T4, A100) or instance type",
    ),
]
ImportModelName = Annotated[
    str | None, typer.Option("--model-name", help="model name (default: the layers profile's)")
]
ImportMaxBatch = Annotated[
    int | None,
    typer.Option("--max-batch", min=1, help="largest per-GPU batch that fits (default: the table's largest)"),
]
ForwardFraction = Annotated[
    float | None,
    typer.Option(
        "--forward-fraction",
        help="forward share of a step time when the table has no forward/backward split (default ⅓)",
    ),
]
StragglerCv = Annotated[
    float | None,
    typer.Option(
        "--straggler-cv",
        help="std/mean of step time (default: Srift Table 1's figure for the GPU, else 0.052)",
    ),
]
TablePrecision = Annotated[
    str | None,
    typer.Option(
        "--precision",
        metavar="fp32|tf32|fp16|bf16",
        help="the arithmetic the times were measured in (default: the layers profile's)",
    ),
]
UpdateS = Annotated[
    float,
    typer.Option(
        "--update-s",
        parser=finite_number("--update-s"),
        help="seconds of the optimizer step inside each step time (modelled after the exchange)",
    ),
]

Upload = Annotated[
    str | None,
    typer.Option(
        "--upload", metavar="URL", help="also POST the profile to URL/v1/profiles (a running srift serve)"
    ),
]


@in_cli_words(
    {
        "accelerator": "--accelerator",
        "forward_fraction": "--forward-fraction",
        "straggler_cv": "--straggler-cv",
        "update_s": "--update-s",
        "precision": "--precision",
    }
)
def import_command(
    table_file: TableFile,
    layers_file: LayersFile,
    accelerator: MeasuredOn,
    out: ProfileOut,
    model_name: ImportModelName = None,
    max_batch: ImportMaxBatch = None,
    forward_fraction: ForwardFraction = None,
    straggler_cv: StragglerCv = None,
    precision: TablePrecision = None,
    update_s: UpdateS = 0.0,
    upload: Upload = None,
    token: UploadToken = None,
    as_json: ProfileJson = False,
) -> None:
    """Build a profile from compute times measured elsewhere plus a layers-only profile.

    TABLE has a header and one row per measurement; `batch` is per GPU, and the times are one of:
    `step_s` (or `step_ms`) for a whole training step, `forward_s` and `backward_s` (or `_ms`),
    or `samples_per_s` of one GPU. Repeated batches are reduced to their median. A step time is
    split ⅓ forward, ⅔ backward unless --forward-fraction says otherwise; every such assumption is
    printed and kept in the profile's extra.assumptions. --accelerator must name a GPU model or an
    instance type of the catalog (`srift catalog list`; `srift catalog import` adds your own hardware)
    or an accelerator spec, so that plans use the times. With --upload the server's catalog is the one
    that counts, not this machine's: --accelerator is not checked here, and the server stores the
    profile for any accelerator (its plans use the times once its catalog has a type that matches).

    Examples:

      srift profile srift.profiling.testmodels:bert_base \\
          --input srift.profiling.testmodels:bert_base_input --layers-only \\
          --out bert.layers.json

      printf 'batch,step_s\\n8,0.21\\n16,0.39\\n32,0.76\\n' > t4.csv

      srift profile import t4.csv --layers bert.layers.json --accelerator T4 \\
          --out bert-t4.json
    """
    import datetime as dt

    from srift.domain.structure import parse_precision
    from srift.profiling.imports import build_profile, parse_compute_table, sha256_text

    if upload is None:
        _require_known_accelerator(accelerator)
    text = _read_text(table_file, "table")
    result = build_profile(
        table=parse_compute_table(text, source=table_file.name),
        layers=_read_layers(layers_file),
        accelerator=accelerator,
        model_name=model_name,
        max_batch=max_batch,
        forward_fraction=forward_fraction,
        straggler_cv=straggler_cv,
        update_s=update_s,
        table_source=table_file.name,
        table_sha256=sha256_text(text),
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        precision=parse_precision(precision, field="precision") if precision else None,
    )
    _finish(result, out=out, upload=upload, token=token, as_json=as_json, assumptions=True)


def _require_known_accelerator(accelerator: str) -> None:
    """Refuse an accelerator no type of the local catalog (shipped and `srift catalog import`ed) has and no
    accelerator spec names: its times would never be used, every plan estimating instead. Not called for
    --upload: the profile is for the server, whose catalog (users import their own) may differ from
    this machine's, and POST /v1/profiles accepts any accelerator."""
    from srift.catalog import store
    from srift.catalog.accelerators import require_known_accelerator
    from srift.commands.local import catalog_database
    from srift.db.session import session_factory
    from srift.settings import get_settings

    if not accelerator.strip():
        return  # build_profile says "accelerator: is empty"
    with session_factory(catalog_database(get_settings()))() as session:
        instances = [entry.instance for entry in store.list_instance_types(session=session)]
    require_known_accelerator(accelerator, instances, field="accelerator")


def _read_text(path: Path, what: str) -> str:
    """The text of the `what` file at `path`; a missing or unreadable file is InvalidInput on `what`."""
    from srift.documents import read_text_file
    from srift.errors import InvalidInput

    try:
        return read_text_file(path, field=what)
    except FileNotFoundError:
        raise InvalidInput(f"{path} does not exist", hint=f"give the {what} file", field=what) from None
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {path} ({exc})", hint=f"give a text {what} file", field=what
        ) from exc


def _read_layers(path: Path) -> LayerProfile:
    """The layers-only profile (or a full profile's layers) in `path`; errors name the field as layers.*."""
    from srift.domain.profile import LayerProfile
    from srift.errors import InvalidInput

    try:
        document = json.loads(_read_text(path, "layers"))
    except ValueError as exc:
        raise InvalidInput(
            f"{path} is not JSON ({exc})",
            hint="give the file written by `srift profile --layers-only`",
            field="layers",
        ) from exc
    try:
        return LayerProfile.from_dict(document)
    except InvalidInput as exc:
        where = f"layers.{exc.field}" if exc.field else "layers"
        raise InvalidInput(f"{path}: {exc.detail}", hint=exc.hint, field=where) from exc


ModelFactory = Annotated[
    str, typer.Argument(metavar="MODULE:FACTORY", help="callable returning the torch.nn.Module")
]
InputOption = Annotated[
    str,
    typer.Option(
        "--input", metavar="MODULE:FACTORY", help="callable of the batch size returning the input batch"
    ),
]
LossOption = Annotated[
    str | None,
    typer.Option(
        "--loss",
        metavar="MODULE:FN",
        help="callable of the model output returning the scalar loss (default: sum of output means)",
    ),
]
Device = Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N")]
Threads = Annotated[int | None, typer.Option("--threads", min=1, help="torch intra-op threads (CPU)")]
SearchCap = Annotated[
    int | None,
    typer.Option(
        "--max-batch", min=1, help="cap of the largest-batch search (default 256 on CPU, 4096 on CUDA)"
    ),
]
RecordAs = Annotated[
    str | None,
    typer.Option(
        "--accelerator", help="record this accelerator name (e.g. an instance type) instead of the device's"
    ),
]
MemoryBudget = Annotated[
    str | None,
    typer.Option(
        "--memory-budget",
        help="memory a step may use, e.g. 8GiB (CPU default: ¾ of available memory or cgroup headroom; "
        "CUDA: the device memory the training memory model plans for, default the GPU's)",
    ),
]
MeasureModelName = Annotated[
    str | None,
    typer.Option("--model-name", help="name profiles are grouped under (default: the factory's name)"),
]
Repeats = Annotated[int, typer.Option("--repeats", min=1, help="timed runs per curve point (median kept)")]
Warmup = Annotated[int, typer.Option("--warmup", min=0, help="untimed warm-up rounds before timing")]
Iterations = Annotated[
    int | None,
    typer.Option(
        "--iterations",
        min=2,
        help="iterations for readiness, exec_prob and straggler_cv "
        f"(default {DEFAULT_ITERATIONS}, ≥ 30 advised; --layers-only: {DEFAULT_LAYERS_ITERATIONS})",
    ),
]
LayersOnly = Annotated[
    bool,
    typer.Option(
        "--layers-only",
        help="only gradient sizes and readiness order (no largest-batch search, no timing sweep); "
        "pair it with `srift profile import`",
    ),
]
LayersBatch = Annotated[
    int, typer.Option("--batch", min=1, help="per-device batch of the readiness iterations (--layers-only)")
]
ClockOption = Annotated[
    str,
    typer.Option(
        "--clock",
        help="wall (elapsed time) or thread (CPU time of the one profiling thread; for shared machines)",
    ),
]
Amp = Annotated[
    str | None,
    typer.Option(
        "--amp",
        metavar="fp16|bf16",
        help="time under torch.autocast in this dtype (fp16 with a gradient scaler); default: fp32",
    ),
]
Tf32 = Annotated[
    bool,
    typer.Option("--tf32", help="fp32 with TF32 matrix products and convolutions (CUDA, Ampere or later)"),
]
PaperCurve = Annotated[
    bool,
    typer.Option(
        "--paper-curve",
        help="keep exactly the four breakpoints 1, ⅓, ⅔, max even where the curve bends between them",
    ),
]
StrictFp32 = Annotated[
    bool,
    typer.Option(
        "--strict-fp32",
        help="IEEE float32 everywhere on CUDA (default: PyTorch's training defaults, cuDNN may use TF32)",
    ),
]
OptimizerOption = Annotated[
    str,
    typer.Option(
        "--optimizer",
        help="sgd, momentum, adam or adamw: the optimizer state the memory model (and on CUDA the "
        "largest batch) counts",
    ),
]
Loader = Annotated[
    str | None,
    typer.Option(
        "--loader",
        metavar="MODULE:FACTORY",
        help="callable returning your DataLoader: measure samples/s per CPU core and bytes per sample",
    ),
]
LoaderSeconds = Annotated[
    float, typer.Option("--loader-seconds", min=0.1, help="seconds of batches to draw from --loader")
]
LoaderBytes = Annotated[
    float | None,
    typer.Option(
        "--bytes-per-sample",
        min=0,
        help="bytes each sample reads from storage (default: what --loader read, via /proc rchar)",
    ),
]


def measure_command(
    model: ModelFactory,
    input_: InputOption,
    out: ProfileOut,
    loss: LossOption = None,
    device: Device = "cpu",
    threads: Threads = None,
    max_batch: SearchCap = None,
    accelerator: RecordAs = None,
    memory_budget: MemoryBudget = None,
    model_name: MeasureModelName = None,
    repeats: Repeats = DEFAULT_REPEATS,
    warmup: Warmup = DEFAULT_WARMUP,
    iterations: Iterations = None,
    layers_only: LayersOnly = False,
    batch: LayersBatch = DEFAULT_LAYERS_BATCH,
    clock: ClockOption = "wall",
    amp: Amp = None,
    tf32: Tf32 = False,
    paper_curve: PaperCurve = False,
    strict_fp32: StrictFp32 = False,
    optimizer: OptimizerOption = "adam",
    upload: Upload = None,
    token: UploadToken = None,
    as_json: ProfileJson = False,
    loader: Loader = None,
    loader_seconds: LoaderSeconds = 5.0,
    loader_bytes: LoaderBytes = None,
) -> None:
    """Profile a model's forward/backward time, largest batch and gradient readiness.

    The method of Srift §4.1: binary-search the largest batch that fits (CUDA
    out-of-memory is caught; on CPU a memory budget is honoured), time forward
    and backward separately at 1, ⅓, ⅔ and the largest batch, fit 3-segment
    piecewise-linear curves, and record when each layer's gradients become
    ready, how often each layer runs and the spread of iteration time.
    Each segment's (geometric) midpoint is timed too; where it is more than 8 % off the
    straight line the segment is split there (e.g. a CPU's small-batch knee),
    unless --paper-curve.
    Mixed precision: --amp fp16 (with a gradient scaler) or --amp bf16 times under
    torch.autocast; --tf32 lets CUDA use TF32; the profile records its precision.
    Every profile also records the model's per-layer FLOPs and bytes moved and its
    memory per sample (counted on fake tensors), from which Srift estimates the GPUs
    you did not profile on (`srift plan` then covers every GPU type of the catalog).
    Nothing is downloaded: bring your own model. With --loader, also measure
    your input pipeline: samples per second per CPU core of your DataLoader and
    bytes read per sample, so plans can tell which VMs cannot feed their GPUs.

    Examples:

      srift profile srift.profiling.testmodels:cnn \\
          --input srift.profiling.testmodels:cnn_input --threads 1 --out cnn.json

      srift profile mymodels.py:build --input mymodels.py:batch \\
          --loss mymodels.py:loss --device cuda:0 --amp bf16 --out m.json

      srift profile train:model --input train:inputs --threads 4 \\
          --accelerator c5.4xlarge --out m.json \\
          --upload http://srift:8000 --token $SRIFT_TOKEN

      srift profile train:model --input train:inputs --loader train:loader \\
          --accelerator T4 --out m.json

    A factory that fails to import, returns the wrong type, or an input the
    model rejects exits with code 2, naming the factory and the error.
    """
    from srift.errors import InvalidInput
    from srift.profiling.profiler import profile_layers, profile_model

    if layers_only and upload:
        raise InvalidInput(
            "a layers-only profile has no compute times, so it cannot be uploaded",
            hint="build a full profile with `srift profile import TABLE --layers FILE ... --upload URL`",
            field="upload",
        )
    precision = precision_option(amp=amp, tf32=tf32, strict_fp32=strict_fp32)
    model_factory, input_factory, loss_fn = _resolve_factories(model=model, input_=input_, loss=loss)
    budget = parse_bytes(memory_budget) if memory_budget else None
    name = model_name or model.rpartition(":")[2]
    if layers_only:
        with _stages("layers") as progress:
            layers = profile_layers(
                model_factory,
                input_factory,
                loss_fn=loss_fn,
                device=device,
                threads=threads,
                batch=batch,
                iterations=iterations or DEFAULT_LAYERS_ITERATIONS,
                model_name=name,
                precision=precision,
                progress=progress,
            )
        _finish_layers(layers, out=out, as_json=as_json)
        return
    with _stages("profiling") as progress:
        result = profile_model(
            model_factory,
            input_factory,
            loss_fn=loss_fn,
            device=device,
            threads=threads,
            max_batch=max_batch,
            accelerator=accelerator,
            memory_budget_bytes=budget,
            repeats=repeats,
            warmup=warmup,
            iterations=iterations or DEFAULT_ITERATIONS,
            model_name=name,
            clock=clock,
            refine=not paper_curve,
            precision=precision,
            progress=progress,
            strict_fp32=strict_fp32,
            optimizer=optimizer,
        )
    if loader:
        result = _with_input_pipeline(result, loader, seconds=loader_seconds, bytes_per_sample=loader_bytes)
    _finish(result, out=out, upload=upload, token=token, as_json=as_json)


def _resolve_factories(
    *, model: str, input_: str, loss: str | None
) -> tuple[Callable[[], Any], Callable[[int], Any], Callable[[Any], Any] | None]:
    """The model factory, the input factory and the loss (None: the profiler's default) the command names."""
    from srift.profiling.loading import resolve_callable

    return (
        resolve_callable(model, what="model factory", field="model_factory"),
        resolve_callable(input_, what="input factory", field="input_factory"),
        resolve_callable(loss, what="loss", field="loss_fn") if loss else None,
    )


@contextmanager
def _stages(label: str) -> Iterator[Callable[[str, float], None]]:
    """A progress bar on stderr for the profiler's stages; yields the profiler's `progress` callback."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(f"[bold]{label}[/] {{task.description:<10}}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("check", total=1.0)

        def progress(stage: str, fraction: float) -> None:
            bar.update(task, completed=fraction, description=stage)

        yield progress


def _finish_layers(layers: LayerProfile, *, out: Path, as_json: bool) -> None:
    """Write the layers-only profile to `out` and print its JSON or its table."""
    document = layers.to_dict()
    _write_json(out, document)
    if as_json:
        typer.echo(json.dumps(document, indent=2))
        return
    console.print(layers_table(layers, out=out))


def _with_input_pipeline(
    result: ModelProfile, loader: str, *, seconds: float, bytes_per_sample: float | None
) -> ModelProfile:
    """The profile with its input pipeline measured on the DataLoader `loader` names (--loader)."""
    from dataclasses import replace

    from srift.profiling.loader import measure_loader
    from srift.profiling.loading import resolve_callable

    loader_factory = resolve_callable(loader, what="loader factory", field="loader")
    with err_console.status("measuring the input pipeline...", spinner="dots"):
        measured = measure_loader(loader_factory, seconds=seconds)
    return replace(result, input_pipeline=measured.pipeline(bytes_per_sample=bytes_per_sample))


def register(app: typer.Typer) -> None:
    """Add the `profile` group: `srift profile [measure] MODULE:FACTORY ...` and `srift profile import`."""
    group = typer.Typer(
        cls=_MeasureByDefault,
        help=(
            "Compute profiles: how long forward and backward take per batch, and when each layer's gradient "
            "is ready.\n\n"
            "`srift profile MODULE:FACTORY --input ... --out p.json` measures a torch model here (the same "
            "as `srift profile measure ...`; `--layers-only` skips the timing for gradient sizes and "
            "readiness only). `srift profile import TABLE --layers L.json --accelerator T4 --out p.json` "
            "builds a profile from step times measured elsewhere. `srift profile upload FILE --token ...` "
            "stores profile files on a server (as the token's own)."
        ),
        no_args_is_help=True,
    )
    app.add_typer(group, name="profile")
    group.command("import")(import_command)
    group.command("upload")(upload_command)
    group.command("measure")(measure_command)
