"""Single-node scaling on Lambda's per-run logs: published against predicted efficiency, run-to-run spread.

A view beside the summary table's scaling check (benchmarks/public_gpus.py, whose acceptance count this does
not change). The runs: srift/estimate/data/lambdal_runs.csv (benchmarks/extract_lambdal_runs.py from the raw
logs of lambdal/deeplearning-benchmark; registry set lambdal-raw-runs, use fit: the node efficiency η), paired
into series by `srift.estimate.public_runs.series_cases` (same system without its GPU count, same model,
harness precision and per-GPU batch; published efficiency t_1 / t_N of the median steady-state step times).

Srift's prediction for a run's node is the summary table's scaling path, unchanged
(`srift.validation.node_efficiency.uncorrected_samples_per_s`): the estimated profile from a calibration
fitted on the registry's fit rows of every OTHER GPU model (for a GPU model the table does not have, every fit
row: that already leaves it out), the run's node (its GPU count and link) simulated with the α-β prior at the
run's per-GPU batch, without the node efficiency η (`srift.sim.node_scaling`: η is fitted on these runs, as
the median ratio of published to these predicted efficiencies per link class); predicted efficiency thr_N / (N
· thr_1). The summary table's misses below use benchmarks/public_gpus.py's predictions, with η fitted leaving
the row's GPU model out.

`srift.estimate.public_runs.hardware_spreads` then puts side by side every series of one GPU model, link,
model and precision at one GPU count: how far runs of the same hardware disagree.

    python -m benchmarks.public_runs            # tables -> docs/BENCHMARKS.md
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from dataclasses import replace

from benchmarks._report import write_section
from benchmarks.public_gpus import WITHIN_POINTS, held_out_checks, structure_of
from srift.estimate import public, public_quality, public_runs
from srift.measurements import Use
from srift.validation.node_efficiency import uncorrected_samples_per_s

LABEL = {"tf32": "fp32 (TF32)", "fp16": "fp16"}


def predictions(runs: list[public_runs.LoggedRun]) -> dict[str, float]:
    """Srift's node samples/s for each run (module docstring), one simulation per distinct configuration."""
    fit_rows = public.registered_rows(Use.FIT)
    held_out = public.leave_one_accelerator_out(fit_rows, structure_of, kernel_s=public.EAGER_KERNEL_S)
    no_spread = {"model": 0.0, "pooled": 0.0, "scaled": 0.0}
    calibrations = {
        p.row.gpu: p.fit.calibration(name=f"leave-out-{p.row.gpu}", spreads=no_spread) for p in held_out
    }
    every = public.fit(fit_rows, structure_of, kernel_s=public.EAGER_KERNEL_S)
    every_cal = every.calibration(name="every fit row", spreads=no_spread)
    return uncorrected_samples_per_s(runs, lambda gpu: calibrations.get(gpu, every_cal))


def within(cases: list[public_runs.SeriesCase]) -> str:
    return f"{sum(c.within for c in cases)} / {len(cases)}"


def harness_lines(runs: list[public_runs.LoggedRun]) -> list[str]:
    """The steady-state samples/s against the harness's own figure, per model, as printed and with only the
    steps the run did (`public_runs.LoggedRun.harness_counted_samples_per_s`)."""
    lines = [
        "| model | runs with both | median (steady / harness − 1) | largest |disagreement| | that run | "
        "runs stopped before max_steps | largest |disagreement|, harness counting the steps run |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for model in sorted({r.model for r in runs}):
        both = [r for r in runs if r.model == model and r.harness_samples_per_s == r.harness_samples_per_s]
        worst = max(both, key=lambda r: abs(r.harness_disagreement))
        median = statistics.median(r.harness_disagreement for r in both)
        counted = max(abs(r.samples_per_s / r.harness_counted_samples_per_s - 1) for r in both)
        short = sum(r.steps_short for r in both)
        lines.append(
            f"| {model} | {len(both)} | {100 * median:+.1f} % | "
            f"{100 * abs(worst.harness_disagreement):.1f} % | `{worst.path}` (steady "
            f"{worst.samples_per_s:.0f}, harness {worst.harness_samples_per_s:.0f} samples/s; "
            f"{worst.iterations_run} iterations run"
            + (f" of max_steps {worst.max_steps}" if worst.max_steps else "")
            + f") | {short} | {100 * counted:.1f} % |"
        )
    return lines


def overstated(runs: list[public_runs.LoggedRun]) -> list[tuple[public.Row, list[public_runs.LoggedRun]]]:
    """The summary table's BERT rows (registry sets lambdal-single-gpu, lambdal-multi-gpu) whose figure is
    run_squad's training_sequences_per_second of a run that stopped before max_steps: every raw run of the
    same GPU, GPU count, precision and per-GPU batch stopped short (`public_runs.LoggedRun.steps_short`); each
    with those raw runs."""
    table = public.registered_rows(Use.FIT) + public.registered_rows(Use.CHECK)
    found = []
    for row in table:
        if row.model != "bert-base":
            continue
        same = [
            r
            for r in runs
            if (r.model, r.gpu, r.gpus, r.precision, r.per_gpu_batch)
            == (row.model, row.gpu, row.gpus, row.precision, row.per_gpu_batch)
            and r.max_steps is not None
        ]
        if same and all(r.steps_short for r in same):
            found.append((row, same))
    return found


def counted(row: public.Row, same: list[public_runs.LoggedRun]) -> public.Row:
    """`row` with its samples/s counting only the steps its raw runs did: × the mean of iterations run /
    max_steps over them (`public_runs.LoggedRun.harness_counted_samples_per_s`, applied to the table's
    figure)."""
    share = statistics.mean(r.iterations_run / r.max_steps for r in same if r.max_steps)
    return replace(row, samples_per_s=row.samples_per_s * share)


def overstated_table_rows(runs: list[public_runs.LoggedRun]) -> list[str]:
    """The rows of `overstated` as a table."""
    lines = [
        f"| {row.id} | {row.global_batch} | {len(same)} | "
        f"{', '.join(map(str, sorted({r.iterations_run for r in same})))} of {same[0].max_steps} | "
        f"{row.samples_per_s:.0f} |"
        for row, same in overstated(runs)
    ]
    if not lines:
        return []
    return [
        "",
        "Rows of the summary table (benchmarks/public_gpus.py) that are such a figure: every raw run of the "
        "same GPU, GPU count, precision and per-GPU batch stopped before max_steps, so the table's samples/s "
        "counts steps that did not run (left as they are; the acceptance count above uses them):",
        "",
        "| table row | global batch | raw runs | iterations run | table samples/s |",
        "|---|---:|---:|---:|---:|",
        *lines,
    ]


def summary_misses(cases: list[public_runs.SeriesCase], runs: list[public_runs.LoggedRun]) -> list[str]:
    """The summary table's scaling cases outside 5 points (benchmarks/public_gpus.py, the same held-out
    predictions), each beside the raw-log series of its GPU model, link, model, precision and GPU count:
    their published efficiencies and whether any lies within 5 points of Srift's prediction for the case."""
    rows = public.registered_rows(Use.FIT) + public.registered_rows(Use.CHECK)
    checked, _, _ = held_out_checks(rows)
    link = {c.row.id: c.row.interconnect for c in checked}
    items = [public_quality.Predicted(c.row, c.predicted) for c in checked]
    table = public_quality.scaling_cases(items)
    misses = [c for c in table if abs(c.difference_points) > WITHIN_POINTS]
    lines = [
        "",
        "**The summary table's misses beside the raw logs of the same hardware**",
        "",
        f"The summary table's scaling cases (benchmarks/public_gpus.py: {len(table)} cases, "
        f"{len(table) - len(misses)} within 5 points) outside 5 points, each with every raw-log series of "
        "its GPU model, link, model, precision and GPU count (any harness precision, any per-GPU batch): "
        "the lowest and highest published efficiency, and how many series lie within 5 points of Srift's "
        "prediction for the summary case. Where one does, another run of the same hardware in the same "
        "harness scaled as Srift predicts: the miss is the run, not the model.",
        "",
        "| GPU | system | model | precision | N | summary published | Srift | raw series | raw published "
        "(lowest – highest) | raw series within 5 points of Srift |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    explained = unmatched = 0
    for m in misses:
        same = [
            c
            for c in cases
            if (c.gpu, c.interconnect, c.model, c.precision, c.gpus)
            == (m.gpu, link[m.row_id], m.model, m.precision, m.gpus)
        ]
        near = [c for c in same if abs(100 * (m.predicted_efficiency - c.published_efficiency)) <= 5]
        if not same:
            unmatched += 1
        elif near:
            explained += 1
        effs = [100 * c.published_efficiency for c in same]
        lines.append(
            f"| {m.gpu} | {m.system} | {m.model} | {LABEL[m.precision.value]} | {m.gpus} | "
            f"{100 * m.published_efficiency:.1f} % | {100 * m.predicted_efficiency:.1f} % | {len(same)} | "
            + (f"{min(effs):.1f} – {max(effs):.1f} % | {len(near)} |" if same else "– | – |")
        )
    lines += [
        "",
        f"Of the {len(misses)} misses: {explained} have a raw-log series of the same hardware within 5 "
        f"points of Srift's prediction; {len(misses) - explained - unmatched} have raw-log series, none "
        f"within 5 points; {unmatched} have no raw-log series of their hardware (not extracted or not "
        "paired).",
    ]
    fixed = {row.id: counted(row, same) for row, same in overstated(runs)}
    if fixed:
        recount = public_quality.scaling_cases(
            [public_quality.Predicted(fixed.get(c.row.id, c.row), c.predicted) for c in checked]
        )
        near = sum(abs(c.difference_points) <= WITHIN_POINTS for c in recount)
        lines += [
            "",
            f"With the {len(fixed)} overstated rows above counting only the steps their runs did (their "
            "samples/s × the raw runs' iterations run / max_steps; check only, the acceptance count keeps "
            f"the published figures): {near} of {len(recount)} cases within 5 points, against "
            f"{len(table) - len(misses)} of {len(table)} as published.",
        ]
    return lines


def report(runs: list[public_runs.LoggedRun], predicted: dict[str, float]) -> str:
    cases = public_runs.series_cases(runs, predicted)
    spreads = public_runs.hardware_spreads(cases)
    commits = sorted({r.commit for r in runs})
    lines = [
        f"Runs: {len(runs)} raw logs ({len({r.series for r in runs})} series, "
        f"{len({r.gpu for r in runs})} GPU models) of lambdal/deeplearning-benchmark at "
        f"{', '.join(c[:8] for c in commits)}, extracted into srift/estimate/data/lambdal_runs.csv by "
        "`python -m benchmarks.extract_lambdal_runs --repo <clone>` (its header: the system → spec and link "
        "mapping, what was left out and why, each log's path and SHA-256); registry set lambdal-raw-runs, "
        "use check: nothing is fitted on them. A check-only view beside the summary table's scaling "
        "check above, whose acceptance count it does not change.",
        "",
        "Step time: the median of what the log prints per iteration, from iteration "
        f"{public_runs.STEADY_FROM_ITERATION} on. For BERT-base that is tqdm's rate, an exponential moving "
        "average (smoothing 0.3) printed to three significant digits (±0.5 % resolution), not one "
        "iteration's time, taken from iteration 20 of each epoch's bar (the average restarts with each "
        "bar); for ResNet-50 the node's images/s of each iteration (ConvNets' DLLogger, `--print-freq 1`), "
        "from the run's 20th iteration on. The harness's own figure includes warm-up: BERT's "
        "training_sequences_per_second is train_batch_size × max_steps × GPUs / time from train start "
        "(the log's own numbers reproduce it), so a run whose two epochs end before max_steps (global batch "
        "above 2 × 88,641 / 100 ≈ 1,773 sequences) overstates its throughput by max_steps / steps run; "
        "ResNet-50's is the Summary mean over all iterations. The two against each other:",
        "",
        *harness_lines(runs),
        *overstated_table_rows(runs),
        "",
        "Pairs: runs of one series (system name without its GPU count; LambdaOD_2x_…_1xH100 is one GPU of "
        "a 2-GPU VM) at one per-GPU batch, model and harness precision; published efficiency = median "
        "t_1 / median t_N over the series' repeated runs; predicted = Srift's thr_N / (N · thr_1) for the "
        "same nodes (module docstring: the summary table's path, leaving the run's GPU model out of the "
        "calibration); difference = predicted − published in points.",
        "",
        f"**Within {public_runs.WITHIN_POINTS:.0f} points of the published efficiency**",
        "",
        "| N | cases | within 5 points | median difference | range |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n in sorted({c.gpus for c in cases}):
        group = [c for c in cases if c.gpus == n]
        diffs = [c.difference_points for c in group]
        lines.append(
            f"| {n} | {len(group)} | {within(group)} | {statistics.median(diffs):+.1f} | "
            f"{min(diffs):+.1f} to {max(diffs):+.1f} |"
        )
    every = [c.difference_points for c in cases]
    lines += [
        f"| all | {len(cases)} | {within(cases)} | {statistics.median(every):+.1f} | "
        f"{min(every):+.1f} to {max(every):+.1f} |",
        "",
        "By GPU model, link and model:",
        "",
        "| GPU | link | model | cases | within 5 points | median difference |",
        "|---|---|---|---:|---:|---:|",
    ]
    kinds: dict[tuple[str, str, str], list[public_runs.SeriesCase]] = defaultdict(list)
    for c in cases:
        kinds[(c.gpu, c.interconnect, c.model)].append(c)
    for (gpu, link, model), group in sorted(kinds.items()):
        lines.append(
            f"| {gpu} | {link} | {model} | {len(group)} | {within(group)} | "
            f"{statistics.median(c.difference_points for c in group):+.1f} |"
        )
    in_spread = {id(c) for s in spreads for c in s.cases}
    lines += [
        "",
        "**LoggedRun-to-run spread on the same hardware**",
        "",
        "Every GPU model, link, model and harness precision with more than one series at one GPU count "
        "(series at different per-GPU batches count separately): the published efficiencies side by side. "
        "Srift predicts one efficiency per node and batch, so where published values of the same hardware "
        "lie further apart than 10 points, no prediction can be within 5 points of all of them.",
        "",
        "| GPU | link | model | precision | N | series | published (lowest … highest) | spread (points) | "
        "Srift (range) | within 5 points |",
        "|---|---|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for s in spreads:
        named = ", ".join(
            f"{c.series} b{c.per_gpu_batch}: {100 * c.published_efficiency:.1f}"
            for c in (s.cases[0], s.cases[-1])
        )
        pred = [100 * c.predicted_efficiency for c in s.cases]
        lines.append(
            f"| {s.gpu} | {s.interconnect} | {s.model} | {s.harness_precision} | {s.gpus} | {len(s.cases)} | "
            f"{named} | {s.spread_points:.1f} | {min(pred):.1f}–{max(pred):.1f} | {within(list(s.cases))} |"
        )
    wide = [s for s in spreads if s.spread_points > 2 * public_runs.WITHIN_POINTS]
    wide_cases = [c for s in wide for c in s.cases]
    alone = [c for c in cases if id(c) not in in_spread]
    lines += [
        "",
        f"Groups with a spread over {2 * public_runs.WITHIN_POINTS:.0f} points: {len(wide)} of "
        f"{len(spreads)}, "
        f"holding {len(wide_cases)} cases, {within(wide_cases)} within 5 points; cases in groups of spread "
        f"≤ {2 * public_runs.WITHIN_POINTS:.0f}: "
        f"{within([c for s in spreads if s not in wide for c in s.cases])}; cases without another series "
        f"of their hardware: {within(alone)}.",
        "",
        "Every case:",
        "",
        "| GPU | link | series | model | precision | per-GPU batch | N | runs 1 / N | published | "
        "predicted | difference |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        lines.append(
            f"| {c.gpu} | {c.interconnect} | {c.series} | {c.model} | {c.harness_precision} | "
            f"{c.per_gpu_batch} | {c.gpus} | {c.runs_one} / {c.runs_n} | "
            f"{100 * c.published_efficiency:.1f} % | {100 * c.predicted_efficiency:.1f} % | "
            f"{c.difference_points:+.1f} |"
        )
    unpaired = sorted({r.series for r in runs} - {c.series for c in cases})
    lines += [
        "",
        f"Series without a 1-GPU run at the same per-GPU batch (extracted, not paired): {len(unpaired)}.",
        *summary_misses(cases, runs),
    ]
    return "\n".join(lines)


def main() -> None:
    runs = public_runs.read_runs()
    text = report(runs, predictions(runs))
    load = os.getloadavg()
    text += f"\n\nLoad average when it ran: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}."
    print(text)
    write_section(
        "public DDP scaling, run by run (Lambda's raw logs, check only)",
        text,
        command="python -m benchmarks.public_runs",
    )


if __name__ == "__main__":
    main()
