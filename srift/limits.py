"""Input limits, in one place: each maximum, what it bounds, and the check that names it when exceeded.

Every request that could make the service allocate, compute or store without bound is capped here.
Pydantic schemas use the constants (`Field(le=MAX_COUNT)`, `Field(max_length=MAX_PROFILES_PER_REQUEST)`);
other code calls `LIMIT.check(value, field=...)`. docs/limits.md lists them all (a test checks it does).
"""

from __future__ import annotations

from dataclasses import dataclass

from srift.errors import InvalidInput, PayloadTooLarge

DEFAULT_MAX_BODY_BYTES = 2_000_000
MAX_LAYERS_PER_PROFILE = 5_000
MAX_STRUCTURE_LAYERS = 2_000
"""Modules with work of their own in a profile's `structure` (GPT-style models with 80 blocks have ~1,000);
with every field one such layer is ~450 bytes of JSON, so one more than this still fits the body cap."""
MAX_PROFILES_PER_REQUEST = 64
MAX_INSTANCE_TYPES_PER_REQUEST = 64
MAX_COUNT = 1024
MAX_GLOBAL_BATCH = 262_144
MAX_VM_BATCH = 1_048_576
MAX_ITERATIONS = 1_000_000_000
MAX_SOLVE_BUDGET_S = 60.0
DEFAULT_MAX_SOLVE_BUDGET_S = 30.0
MAX_PROBE_GRID_POINTS = 1024
MAX_PROBE_BUFFER_BYTES = 1 << 30
MAX_PROBE_REPEATS = 1000
MAX_PROBE_RESULTS_PER_BATCH = 3_000
MAX_NAME_CHARS = 200
MAX_PAGE_SIZE = 1000
MAX_JOB_NODES = {"local": 64, "testbed": 16, "ec2": 256}
"""Most nodes (hosts) one probe job may use, per provider."""
MAX_EC2_INSTANCES = MAX_JOB_NODES["ec2"]
MAX_SOURCE_CHARS = 500
"""Longest provenance text (a catalog file's `source`, a source's `text`) stored with a catalog price."""
MAX_UNITS_PER_INSTANCE = 100_000
"""Most GPUs or vCPUs one catalog instance type may declare (a typo guard: the largest VMs have hundreds)."""
MAX_PS_VMS = 64
"""Most VMs of one parameter-server prediction fleet: that mode simulates every VM's steps; larger fleets
should use allreduce (the schema publishes it as the rule `parameter-server-fleet-size`)."""
MAX_EC2_COST_USD = 100_000.0
MAX_EC2_TIMEOUT_S = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class Limit:
    """One documented maximum; `check` raises a 422 (or 413 for sizes) whose message names the limit."""

    name: str
    maximum: float
    unit: str
    applies_to: str
    status_code: int = 422

    def check(self, value: float, *, field: str | None = None) -> None:
        """Raise when `value` exceeds the maximum; the error names the limit and its value."""
        if value <= self.maximum:
            return
        detail = (
            f"{_fmt(value)} {self.unit} exceeds the limit of {_fmt(self.maximum)} {self.unit} ({self.name})"
        )
        hint = f"stay within {_fmt(self.maximum)} {self.unit}; see docs/limits.md"
        if self.status_code == 413:
            raise PayloadTooLarge(detail, hint=hint, field=field)
        raise InvalidInput(detail, hint=hint, field=field)


def _fmt(value: float) -> str:
    return f"{int(value):,}".replace(",", "_") if float(value).is_integer() else f"{value:g}"


BODY_SIZE = Limit(
    "request body size",
    DEFAULT_MAX_BODY_BYTES,
    "bytes",
    "every request body, chunked or not; SRIFT_MAX_BODY_BYTES sets it",
    status_code=413,
)
LAYERS_PER_PROFILE = Limit(
    "layers per profile",
    MAX_LAYERS_PER_PROFILE,
    "layers",
    "profile `layers[]` (POST /v1/profiles, inline profiles)",
)
STRUCTURE_LAYERS = Limit(
    "structure layers per profile",
    MAX_STRUCTURE_LAYERS,
    "layers",
    "profile `structure.layers[]` (per-layer FLOPs and bytes)",
)
PROFILES_PER_REQUEST = Limit(
    "profiles per request", MAX_PROFILES_PER_REQUEST, "profiles", "`profile_ids` and inline `profiles`"
)
INSTANCE_TYPES_PER_REQUEST = Limit(
    "instance types per request",
    MAX_INSTANCE_TYPES_PER_REQUEST,
    "instance types",
    "`availability` keys of plan requests (prediction fleets: at most 32 choices)",
)
COUNT = Limit(
    "VMs of one type", MAX_COUNT, "VMs", "fleet `count`, `availability` values, `max_count_per_type`"
)
GLOBAL_BATCH = Limit("global batch", MAX_GLOBAL_BATCH, "samples", "`global_batch` of plan requests")
VM_BATCH = Limit("per-VM batch", MAX_VM_BATCH, "samples", "`choices[].batch` of prediction fleets")
ITERATIONS = Limit("iterations", MAX_ITERATIONS, "iterations", "`iterations`, progress `iterations_done`")
SOLVE_BUDGET = Limit(
    "solve budget",
    MAX_SOLVE_BUDGET_S,
    "s",
    "`solve_budget_s` of a plan request; SRIFT_MAX_SOLVE_BUDGET_S lowers it (default 30 s)",
)
PROBE_GRID = Limit(
    "probe grid size",
    MAX_PROBE_GRID_POINTS,
    "grid points",
    "probe jobs: buffer sizes × world sizes × instance types",
)
PROBE_BUFFER = Limit(
    "probe buffer size", MAX_PROBE_BUFFER_BYTES, "bytes", "each probe job size (stored sizes are 32-bit)"
)
PROBE_REPEATS = Limit(
    "probe repeats", MAX_PROBE_REPEATS, "repeats", "probe `repeats` / `iters` per grid point"
)
PROBE_RESULTS_PER_BATCH = Limit(
    "probe results per batch", MAX_PROBE_RESULTS_PER_BATCH, "samples", "POST /v1/probe-results `samples[]`"
)
NAME_CHARS = Limit("name length", MAX_NAME_CHARS, "characters", "model, accelerator, token and job names")
PAGE_SIZE = Limit(
    "page size", MAX_PAGE_SIZE, "items", "`limit` query parameter of list endpoints (some lists stop at 500)"
)

EC2_INSTANCES = Limit(
    "EC2 instances per job", MAX_EC2_INSTANCES, "instances", "`ec2.max_instances`, EC2 `node_counts`"
)
EC2_COST = Limit(
    "EC2 cost cap", MAX_EC2_COST_USD, "USD", "`ec2.max_cost_usd` of a job (price × instances × timeout)"
)
EC2_TIMEOUT = Limit(
    "EC2 timeout", MAX_EC2_TIMEOUT_S, "s", "`ec2.timeout_s`: instances are terminated after it"
)

LIMITS: tuple[Limit, ...] = (
    BODY_SIZE,
    LAYERS_PER_PROFILE,
    STRUCTURE_LAYERS,
    PROFILES_PER_REQUEST,
    INSTANCE_TYPES_PER_REQUEST,
    COUNT,
    GLOBAL_BATCH,
    VM_BATCH,
    ITERATIONS,
    SOLVE_BUDGET,
    PROBE_GRID,
    PROBE_BUFFER,
    PROBE_REPEATS,
    EC2_INSTANCES,
    EC2_COST,
    EC2_TIMEOUT,
    PROBE_RESULTS_PER_BATCH,
    NAME_CHARS,
    PAGE_SIZE,
)


def check_solve_budget(
    solve_budget_s: float, *, max_solve_budget_s: float, field: str = "solve_budget_s"
) -> None:
    """Reject a solve budget above the server's setting (SRIFT_MAX_SOLVE_BUDGET_S, itself at most
    MAX_SOLVE_BUDGET_S): the one rule the REST API, the CLI and the schema's `maximum` share."""
    top = min(max_solve_budget_s, MAX_SOLVE_BUDGET_S)
    if solve_budget_s <= top:
        return
    raise InvalidInput(
        f"{_fmt(solve_budget_s)} s is above this service's maximum of {_fmt(top)} s (solve budget)",
        hint=f"ask for at most {_fmt(top)} s (SRIFT_MAX_SOLVE_BUDGET_S sets the maximum, up to "
        f"{_fmt(MAX_SOLVE_BUDGET_S)} s)",
        field=field,
    )


def check_probe_grid(*, buffer_sizes: int, world_sizes: int, instance_types: int = 1) -> None:
    """Reject a probe job whose grid (buffer sizes × world sizes × instance types) is too large."""
    PROBE_GRID.check(buffer_sizes * world_sizes * max(instance_types, 1), field="grid")
