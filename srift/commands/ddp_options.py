"""The DDP settings `srift plan` and `srift predict` take on the command line (srift.domain.simulation)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from srift.domain.simulation import MAX_BUCKET_CAP_MB, Exchange

BucketCapMb = Annotated[
    float | None,
    typer.Option(
        "--bucket-cap-mb",
        min=0.001,
        max=MAX_BUCKET_CAP_MB,
        help="DistributedDataParallel's bucket_cap_mb your training uses (default: DDP's 25): sets "
        "bucket_cap_mb",
    ),
]
PerLayer = Annotated[
    bool,
    typer.Option(
        "--per-layer",
        help="the Srift paper's one allreduce per layer instead of DDP's buckets: sets exchange",
    ),
]

DDP_OPTIONS = {"bucket_cap_mb": "--bucket-cap-mb", "exchange": "--per-layer"}
"""The request fields these options set, each with its option (srift.commands.options.in_cli_words)."""
DDP_PARAMETERS = {"--bucket-cap-mb": "bucket_cap_mb", "--per-layer": "per_layer"}
"""Each option's parameter in the commands that take them: the option is named in an error only when given."""


def apply_ddp_options(body: dict[str, Any], *, bucket_cap_mb: float | None, per_layer: bool) -> None:
    """Put the command line's DDP settings into the request body."""
    if bucket_cap_mb is not None:
        body["bucket_cap_mb"] = bucket_cap_mb
    if per_layer:
        body["exchange"] = Exchange.PER_LAYER.value
