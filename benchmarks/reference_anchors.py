"""Reference models measured on a GPU: what the shipped reference set plans with on every catalog GPU, against
the roofline estimate it would use without the measurement.

For every (model, precision) with a measured profile in srift/refmodels/data/measured/, one row per catalog
GPU: the seconds per sample at the profile's largest batch of the roofline estimate (`estimate:roofline`,
with the public table's model factor where it has one) and of the shipped set's profile (the measured one
on its GPU, `estimate:scaled` from it elsewhere). Nothing is measured or fitted here: both columns are
computed from shipped files (srift.refmodels.shipped, srift.estimate.estimator).

    python -m benchmarks.reference_anchors [--no-write]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._report import write_section  # noqa: E402
from srift.catalog.accelerators import accelerator_specs, spec_for_accelerator  # noqa: E402
from srift.domain.profile import ModelProfile  # noqa: E402
from srift.estimate.estimator import estimate_profile  # noqa: E402
from srift.refmodels import reference_model  # noqa: E402
from srift.refmodels.build import load_structure  # noqa: E402
from srift.refmodels.shipped import measured_reference_profiles, reference_profiles  # noqa: E402

SECTION = "reference models measured on a GPU"


def _spec_name(profile: ModelProfile) -> str | None:
    spec = spec_for_accelerator(profile.accelerator)
    return spec.name if spec is not None else None


def _ms_per_sample(profile: ModelProfile, batch: int) -> float:
    return 1000.0 * profile.compute_s(batch) / batch


def report() -> str:
    """The section's Markdown: one table per measured (model, precision)."""
    shipped = reference_profiles()
    lines = [
        "Per catalog GPU, the compute time per sample in milliseconds (forward + backward) at the profile's "
        "largest batch: the roofline estimate the set would hold without the measurement, and the shipped "
        "set's profile (the device run's on its GPU, `estimate:scaled` from it on the others). Nothing "
        "measured or fitted here; the measured profiles are registry set `h200-gpu-check` (check data, "
        "used as measured). Largest batches differ where the measurement was capped (its own) or the "
        "GPU's memory limits the estimate.",
        "",
    ]
    for (model, precision), anchor in sorted(measured_reference_profiles().items()):
        structure = load_structure(model, precision)
        lines += [
            f"**{reference_model(model).title}, {precision.value}** (measured on {anchor.accelerator}, "
            f"torch {anchor.torch_version}, largest batch {anchor.max_batch}):",
            "",
            "| GPU | roofline: largest batch | ms per sample | shipped set: source | largest batch "
            "| ms per sample | shipped / roofline |",
            "|---|---:|---:|---|---:|---:|---:|",
        ]
        mine = [p for p in shipped if p.model == model and p.precision is precision]
        for spec in (s for s in accelerator_specs() if s.match_gpu_model):
            made = estimate_profile(
                model=model,
                structure=structure,
                spec=spec,
                precision=precision,
                memory_gib=spec.match_memory_gib,
            ).profile
            now = next((p for p in mine if _spec_name(p) == spec.name), None)
            if made is None or now is None:
                continue
            old_ms, new_ms = (
                _ms_per_sample(made, made.max_batch),
                _ms_per_sample(now, now.max_batch),
            )
            source = now.source if now.estimate is None else f"estimate:{now.estimate.method}"
            lines.append(
                f"| {spec.name} | {made.max_batch} | {old_ms:.3f} | {source} | {now.max_batch} "
                f"| {new_ms:.3f} | {new_ms / old_ms:.2f} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print the section, leave BENCHMARKS.md alone"
    )
    args = parser.parse_args(argv)
    text = report()
    print(text)
    if not args.no_write:
        write_section(SECTION, text, command="python -m benchmarks.reference_anchors")


if __name__ == "__main__":
    main()
