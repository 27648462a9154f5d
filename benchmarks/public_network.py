"""The bandwidth prior against every public allreduce figure Srift ships (srift/bandwidth/data/).

For each public run: the prior's predicted bus bandwidth at every measured size, its relative error
(predicted / measured − 1, the metric of the issue's 24 % figure), the mean absolute error over buffers of
1 MiB and more and over all sizes, and whether the measured time lies inside the prior's p10–p90 band
(prediction × exp(∓1.2816 σ), σ the estimate's per-size `residual_cvs`). Each run says whether the prior
was fitted on it. Rows of the tc-shaped table run through the user-given-rate path (the shaped rate given
as `measured_gbps`), not the prior, and are reported apart. The script also recomputes the EFA band
(the spread of log errors on the 2 × p5 run, never fitted on) and checks the shipped constants.

    .venv/bin/python -m benchmarks.public_network            # prints and writes docs/BENCHMARKS.md
    .venv/bin/python -m benchmarks.public_network --no-write
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import cast

import numpy as np

from srift.bandwidth import prior as P
from srift.catalog.shipped import shipped_files, shipped_snapshot
from srift.domain import InstanceType
from srift.domain.network import Library, NetworkSpec, Transport
from srift.measurements import Use

Z90 = 1.2815515655446004
LIMIT = 0.15


def _types() -> dict[str, InstanceType]:
    path = next(p for p in shipped_files() if p.name == "aws.yaml")
    return {t.instance.name: t.instance for t in shipped_snapshot(path).types}


def _network(run: P.PublicRun, instance: InstanceType) -> tuple[NetworkSpec, str]:
    if run.transport == "efa":
        return NetworkSpec(transport=Transport.EFA), "prior (EFA)"
    if run.transport == "intra":
        return NetworkSpec(), "prior (intra-node)"
    library = Library(run.library)
    if run.transport == "custom" and run.shaped:
        rate = float(run.shaped["rate_gbps"])
        return NetworkSpec(library=library, measured_gbps={instance.name: rate}), "given rate"
    return NetworkSpec(library=library, ena_visible=run.ena_visible), "prior (TCP)"


def _band(
    run: P.PublicRun, est_busbw: np.ndarray, cvs: np.ndarray, ups: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Measured times inside p10–p90, and at or below p90. Slow side exp(Z90·σ); fast side the larger of
    exp(−Z90·σ) and the estimate's upside (rate × (1 + Z90·upside_cv), BandwidthEstimate.upside_cvs)."""
    times = np.asarray(run.times_s)
    t_pred = times * run.busbw_gbps() / est_busbw
    fast = np.minimum(np.exp(-Z90 * cvs), 1 / (1 + Z90 * ups)) if ups.size else np.exp(-Z90 * cvs)
    p10, p90 = t_pred * fast, t_pred * np.exp(Z90 * cvs)
    return (times >= p10) & (times <= p90), times <= p90


def evaluate() -> tuple[list[dict[str, object]], dict[str, float]]:
    types = _types()
    fitted = {r.id for r in P.registered_runs(Use.FIT)}
    (spread_run,) = P.registered_runs(Use.SPREAD)  # the run the band constants are measured on
    rows: list[dict[str, object]] = []
    spread: dict[str, float] = {}
    for run in P.public_runs():
        instance = types[run.instance_type]
        network, path = _network(run, instance)
        est = P.AlphaBetaPrior(network=network).predict(
            instance=instance, world_size=run.world_size, nodes=run.nodes, buffer_bytes=list(run.sizes_bytes)
        )
        sizes = np.asarray(run.sizes_bytes, dtype=np.float64)
        measured = run.busbw_gbps()
        predicted = np.asarray(est.busbw_gbps)
        error = predicted / measured - 1
        large = sizes >= 1 << 20
        inside, below_p90 = _band(
            run, predicted, np.asarray(est.residual_cvs), np.asarray(est.upside_cvs, dtype=np.float64)
        )
        default: dict[str, object] = {}
        if path == "prior (TCP)" and run.library == "nccl":
            plain = P.AlphaBetaPrior(network=NetworkSpec()).predict(
                instance=instance,
                world_size=run.world_size,
                nodes=run.nodes,
                buffer_bytes=list(run.sizes_bytes),
            )
            d_pred = np.asarray(plain.busbw_gbps)
            d_in, d_p90 = _band(
                run, d_pred, np.asarray(plain.residual_cvs), np.asarray(plain.upside_cvs, dtype=np.float64)
            )
            d_err = d_pred / measured - 1
            default = {
                "mae": float(np.abs(d_err).mean()),
                "inside": int(d_in.sum()),
                "below_p90": int(d_p90.sum()),
                "rate": P.node_rate(instance, NetworkSpec()),
            }
        log_err = np.log(predicted / measured)
        if run.id == spread_run.id:
            spread["small"] = float(np.sqrt(np.mean(log_err[~large] ** 2)))
            spread["large"] = float(np.sqrt(np.mean(log_err[large] ** 2)))
        rows.append(
            {
                "id": run.id,
                "type": run.instance_type,
                "shape": f"{run.nodes}×{run.gpus_per_node}",
                "path": path,
                "library": run.library,
                "fitted": run.id in fitted,
                "sizes": len(sizes),
                "mae_large": float(np.abs(error[large]).mean()) if large.any() else math.nan,
                "mae_all": float(np.abs(error).mean()),
                "bias_large": float(np.mean(log_err[large])) if large.any() else math.nan,
                "inside": int(inside.sum()),
                "below_p90": int(below_p90.sum()),
                "source": f"{run.source['repository']}@{run.source['commit'][:8]}",
                "ena": run.ena_visible,
                "default": default,
            }
        )
    return rows, spread


def _pct(x: object) -> str:
    return "–" if not isinstance(x, float) or math.isnan(x) else f"{100 * x:.1f} %"


def render(rows: list[dict[str, object]], spread: dict[str, float]) -> tuple[str, bool]:
    lines = [
        "The α-β prior (`srift/bandwidth/prior.py`) against every public allreduce run shipped in "
        "`srift/bandwidth/data/public_allreduce.json`. Error = predicted busbw / measured − 1; MAE over "
        "buffers ≥ 1 MiB and over all sizes; band = measured time inside the prior's p10–p90 "
        "(prediction × exp(∓1.28 σ), σ per size class).",
        "",
        "| run | type | nodes×GPUs | predicted by | lib | ENA seen | fitted on | sizes | MAE ≥ 1 MiB | "
        "MAE all | in p10–p90 | ≤ p90 | source |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok = True
    for r in rows:
        fitted = bool(r["fitted"])
        judged = not fitted and r["path"] != "given rate"
        mae = r["mae_large"]
        passed = isinstance(mae, float) and (math.isnan(mae) or mae <= LIMIT)
        if judged and not passed:
            ok = False
        if r["path"] == "prior (TCP)" and r["below_p90"] != r["sizes"]:
            ok = False
        lines.append(
            f"| {r['id']} | {r['type']} | {r['shape']} | {r['path']} | {r['library']} | "
            f"{'–' if r['ena'] is None else ('yes (source)' if r['ena'] else 'no (source)')} | "
            f"{'**yes**' if fitted else 'no'} | {r['sizes']} | {_pct(mae)}"
            f"{'' if not judged else (' ✓' if passed else ' ✗')} | {_pct(r['mae_all'])} | "
            f"{r['inside']}/{r['sizes']} | {r['below_p90']}/{r['sizes']} | {r['source']} |"
        )
    prior_tcp = [r for r in rows if r["path"] == "prior (TCP)"]
    defaults = [r for r in prior_tcp if r["default"]]
    default_lines = []
    for r in defaults:
        d = r["default"]
        assert isinstance(d, dict)
        rate = d["rate"]
        if d["below_p90"] != r["sizes"]:
            ok = False
        default_lines.append(
            f"| {r['id']} | {rate.gbps:.3g} ({rate.flows} flow) | {rate.high:.3g} | {_pct(d['mae'])} | "
            f"{d['inside']}/{r['sizes']} | {d['below_p90']}/{r['sizes']} |"
        )
    given = [r for r in rows if r["path"] == "given rate"]
    default_below_p90 = sum(int(str(cast("dict[str, object]", r["default"])["below_p90"])) for r in defaults)

    def given_mae(library: str) -> str:
        return _pct(float(np.mean([float(str(r["mae_large"])) for r in given if r["library"] == library])))

    lines += [
        "",
        f"Acceptance: every run not fitted on (and predicted by the prior) within {LIMIT:.0%} MAE over "
        f"≥ 1 MiB — {'met' if ok else 'NOT met'}; the TCP prior's p90 covers "
        f"{sum(int(str(r['below_p90'])) for r in prior_tcp)}/{sum(int(str(r['sizes'])) for r in prior_tcp)} "
        "measured times of the public AWS gloo/NCCL table at its AWS default setting "
        f"(inside p10–p90: {sum(int(str(r['inside'])) for r in prior_tcp)}); under the request default "
        "(ENA visibility not given) its p90 covers "
        f"{default_below_p90}/"
        f"{sum(int(str(r['sizes'])) for r in defaults)} of the NCCL rows.",
        "",
        "The default when a request does not say whether NCCL sees the ENA (`network.ena_visible` unset): "
        "NCCL's one-socket fallback (1 TCP flow per peer, AWS's 5 Gbit/s single-flow limit outside a "
        "placement group), with the band's fast side reaching the ENA-detected rate (2 ring channels × 16 "
        "sockets, NIC-bound). The NCCL rows above ran NCCL on the VMs themselves (their source's run "
        "scripts; ENA seen) and are predicted as such; the same rows under the default:",
        "",
        "| run | default rate Gbit/s | fast end Gbit/s | MAE (default) | in p10–p90 | ≤ p90 |",
        "|---|---|---|---|---|---|",
        *default_lines,
        "",
        "Why this default: a plan's user bets a deadline on it. NCCL opens 2 × 8 sockets only when it can "
        "read the ENA's PCI vendor id (NVIDIA/nccl src/transport/net_socket.cc); in a container with its "
        "own network namespace (a veth has no PCI device; NVIDIA/nccl#367) it silently sends over one "
        "socket per connection, and one flow gets 5 Gbit/s outside a cluster placement group (AWS EC2 "
        "user guide). Which of the two a user runs is not in the request, so the prior takes the slow one "
        "(the deadline-safe end) and shows both: plans state the flows and rate assumed, the fast end, and "
        "recommend `srift probe run --quick` (or `network.ena_visible: true`). The default was chosen from "
        "these public facts, not fitted to any trace; on the rows above it is pessimistic by design "
        "(the MAE (default) column), and their times lie inside its band.",
        "",
        "The tc-shaped rows of that table (delay + rate set with `tc`) are not AWS's network: they run "
        "through the user-given-rate path (`network.measured_gbps` = the shaped rate). NCCL meets the shaped "
        f"rate (MAE {given_mae('nccl')}); gloo reaches about half of it under added delay "
        f"(MAE {given_mae('gloo')}), "
        "which nothing in the prior models: a measured rate for gloo should come from a gloo probe.",
        "",
        "Band constants recomputed from the 2 × p5 run (never fitted on), RMS of log(pred/measured): "
        f"< 1 MiB {spread['small']:.3f} (shipped {P.EFA_RESIDUAL_CV['small']}), ≥ 1 MiB "
        f"{spread['large']:.3f} (shipped {P.EFA_RESIDUAL_CV['large']}).",
        "",
        "Disclosure: gloo's TCP link drops NCCL's pipeline step q (a NCCL buffer mechanism); that was "
        "decided after this table had been seen with q (gloo's MAE was 0.7–4.1 % then).",
        "",
        "Fitted: EFA link on `" + P.FIT_RUNS["efa"] + "`, NVSwitch link on `" + P.FIT_RUNS["nvswitch"] + "`. "
        "Seen and not used: the 2 × p5 EKS excerpt in the same README (NCCL 2.18.5, six sizes with elided "
        "rows, 126–437 GB/s at 64 MiB–2 GiB, far from the other p5 run) and the p4dn runs of NVIDIA/nccl "
        "issue #527 (one size each, reported there as abnormally slow).",
    ]
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    rows, spread = evaluate()
    body, ok = render(rows, spread)
    load = os.getloadavg()
    body += f"\n\nLoad average at the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (no timings here)."
    print(body)
    if not args.no_write:
        from benchmarks._report import write_section

        write_section("public network prior", body, command="python -m benchmarks.public_network")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
