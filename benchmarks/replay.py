"""Re-predict a finished validation run's cases with the current simulator, from the run's own profiles,
bandwidth model, overlap probe and co-location factors (its work folder's validate.db and report.json).

A diagnostic for modelling work: what a change to the simulator does to cases already measured, without
re-running them. Each case is predicted as `srift validate` predicted it (DDP's 25 MiB buckets, the
co-location factors of its runs), with the exchange's slowdown while members compute (the overlap probe's
`comm_slowdown`, srift.sim.overlap) and without it, and compared with what the run measured; with
`--refit`, from curves refit to the samples each profile stored (as the current code pools them, as
round 9 (`mean`) or round 8 (`median`) did, or to the median over passes (`passes`)); with
`--cpu-clock`, with co-location factors from the rounds' CPU seconds. The run's set of models is burned
for the honesty protocol either way: replaying it is development, never validation.

    .venv/bin/python -m benchmarks.replay WORKDIR [--refit [pass-means|mean|median|passes]] \
        [--cpu-clock] [--out replay.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.causes import parse_fleet
from srift.domain.profile import ModelProfile
from srift.profiling.curves import CurveSamples, fit_curve, mean_point
from srift.validation import stats


def paired_median(forward_s: Sequence[float], backward_s: Sequence[float]) -> tuple[float, float]:
    """Round 8's breakpoint (before `mean_point`): the median of forward + backward of the same step,
    split in the proportion of the two phases' medians."""
    fw, bw = statistics.median(forward_s), statistics.median(backward_s)
    if len(forward_s) != len(backward_s) or fw + bw <= 0:
        return fw, bw
    total = statistics.median(f + b for f, b in zip(forward_s, backward_s, strict=True))
    return total * fw / (fw + bw), total * bw / (fw + bw)


def pass_centres(
    samples: CurveSamples, passes: int, per_pass: int, centre: Callable[[list[float]], float]
) -> list[tuple[float, float]]:
    """Each breakpoint's (forward, backward): `centre` over passes of each pass's mean. The pooled samples
    are the profile's own, then `passes - 1` timing passes of `per_pass` samples each (how validation
    stores them)."""
    out = []
    for fw, bw in zip(samples.forward_s, samples.backward_s, strict=True):
        own = len(fw) - per_pass * (passes - 1)
        cuts = [(0, own)] + [(own + k * per_pass, own + (k + 1) * per_pass) for k in range(passes - 1)]
        out.append(
            (
                centre([statistics.fmean(fw[a:b]) for a, b in cuts]),
                centre([statistics.fmean(bw[a:b]) for a, b in cuts]),
            )
        )
    return out


def refit(profile: ModelProfile, how: str | None, per_pass: int = 2) -> ModelProfile:
    """`profile` with its curves refit to the samples it stored (`extra.measured`): "pass-means" as the
    current code does (the mean over passes of each pass's mean, round 10), "mean" as round 9 did (the
    mean of the pooled samples, `srift.profiling.curves.mean_point`), "median" as round 8 did
    (`paired_median`), "passes" the median over passes (tried and rejected in round 10); None, or a
    profile without samples, as it is. `per_pass`: the run's samples per further pass."""
    measured = (profile.extra or {}).get("measured")
    if how is None or measured is None:
        return profile
    samples = CurveSamples.from_dict(measured)
    if how in ("passes", "pass-means"):
        centre = statistics.median if how == "passes" else statistics.fmean
        points = pass_centres(samples, int((profile.extra or {}).get("timing_passes", 1)), per_pass, centre)
    else:
        point = mean_point if how == "mean" else paired_median
        points = [point(fw, bw) for fw, bw in zip(samples.forward_s, samples.backward_s, strict=True)]
    return dataclasses.replace(
        profile,
        forward=fit_curve(samples.batches, [fw for fw, _ in points]),
        backward=fit_curve(samples.batches, [bw for _, bw in points]),
    )


def replay(workdir: Path, *, refit_curves: str | None = None, cpu_clock: bool = False) -> dict[str, Any]:
    from srift.bandwidth.registry import active_model
    from srift.catalog.store import get_instance_type
    from srift.db.session import transaction
    from srift.domain import FleetMember
    from srift.domain.network import Library, NetworkSpec
    from srift.profiling.store import get_profile
    from srift.settings import Settings
    from srift.sim import simulate
    from srift.validation.colocation import ColocationFactors, colocated_profile, colocation_factors
    from srift.validation.context import DDP_BUCKET_CAP_MB
    from srift.validation.ddp import Colocation

    report = json.loads((workdir / "report.json").read_text())
    url = f"sqlite:///{workdir / 'validate.db'}"
    settings = Settings(database_url=url)
    ids = {(p["model"], p["instance_type"]): p["profile_id"] for p in report["profiles"]}
    comm = {t: float(o["probe"]["comm_slowdown"]) for t, o in report["overlap"].items() if o.get("ok")}
    rows = []
    with transaction(url) as session:
        bandwidth = active_model(
            session=session, settings=settings, network=NetworkSpec(library=Library.GLOO)
        )
        for case in report["cases"]:
            if case.get("measured_iteration_s") is None or case.get("locations"):
                continue
            fleet = parse_fleet(case["fleet"].replace(" ", ""))
            members = [
                FleetMember(
                    instance=get_instance_type(session=session, provider="testbed", name=g.type_name),
                    count=g.count,
                    batch=g.batch,
                    profile=refit(
                        get_profile(session=session, profile_id=ids[(case["model"], g.type_name)]),
                        refit_curves,
                        int(report["effort"].get("timing_repeats", 2)),
                    ),
                )
                for g in fleet.groups
            ]
            found = case.get("colocation")
            factors: ColocationFactors | None = None
            if found and cpu_clock:
                samples = [Colocation.from_dict(r["colocation"]) for r in case["runs"] if r.get("colocation")]
                on_cpu = [c for c in (s.on_clock("cpu") for s in samples) if c is not None]
                factors = colocation_factors(fleet, on_cpu)
            elif found:
                factors = ColocationFactors(
                    factors=tuple(found["factors"]),
                    ratios=tuple(tuple(r) for r in found["ratios"]),
                    straggler_cv=tuple(found["straggler_cv"]),
                )
            if factors is not None:
                members = [
                    dataclasses.replace(m, profile=colocated_profile(m.profile, factors, g))
                    for g, m in enumerate(members)
                ]

            without = [
                dataclasses.replace(
                    m,
                    profile=dataclasses.replace(
                        m.profile,
                        extra={k: v for k, v in m.profile.extra.items() if k != "comm_overlap_slowdown"},
                    ),
                )
                for m in members
            ]
            slowed = [
                dataclasses.replace(
                    m,
                    profile=dataclasses.replace(
                        m.profile,
                        extra={**m.profile.extra, "comm_overlap_slowdown": comm.get(m.instance.name, 1.0)},
                    ),
                )
                for m in without
            ]
            measured = case["measured_iteration_s"]
            before, after = (
                simulate(
                    f, bandwidth=bandwidth, seed=0, bucket_cap_mb=DDP_BUCKET_CAP_MB, band=False
                ).iteration_s
                for f in (without, slowed)
            )
            rows.append(
                {
                    "model": case["model"],
                    "fleet": case["fleet"],
                    "measured_s": measured,
                    "reported_s": case["predicted"]["iteration_s"],
                    "without_s": before,
                    "with_s": after,
                    "error_without": stats.relative_error(before, measured),
                    "error_with": stats.relative_error(after, measured),
                }
            )
    return {"workdir": str(workdir), "comm_slowdown": comm, "cases": rows}


def summary(rows: list[dict[str, Any]], key: str) -> str:
    """srift validate's figures (srift.validation.stats.summarize) over the replayed errors."""
    found = stats.summarize([r[key] for r in rows])
    return (
        f"MAPE {100 * found.mape:.1f} %, under {found.underestimates}/{found.cases}, "
        f"p90 of underestimates {100 * found.underestimate_p90:.1f} %, mean {100 * found.mean_error:+.1f} %"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "workdir", type=Path, help="a validation run's work folder (report.json, validate.db)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the replayed cases here as JSON")
    parser.add_argument(
        "--refit",
        nargs="?",
        const="pass-means",
        choices=["pass-means", "mean", "median", "passes"],
        default=None,
        help="refit every profile's curves to its stored samples, as the current code does (pass-means, "
        "the default), as round 9 did (mean), as round 8 did (median) or to the median over passes "
        "(passes), instead of using the curves the run stored",
    )
    parser.add_argument(
        "--cpu-clock",
        action="store_true",
        help="co-location factors from the rounds' CPU seconds (runs that recorded them) instead of the "
        "factors the run used",
    )
    args = parser.parse_args(argv)
    found = replay(args.workdir, refit_curves=args.refit, cpu_clock=args.cpu_clock)
    for r in found["cases"]:
        print(
            f"{r['model'][-12:]:>12} {r['fleet']:<34} measured {1e3 * r['measured_s']:7.1f} ms  "
            f"without {100 * r['error_without']:+6.1f} %  with {100 * r['error_with']:+6.1f} %"
        )
    print(f"comm slowdown per type: {found['comm_slowdown']}")
    print("without the exchange's slowdown:", summary(found["cases"], "error_without"))
    print("with it:                        ", summary(found["cases"], "error_with"))
    if args.out is not None:
        args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
