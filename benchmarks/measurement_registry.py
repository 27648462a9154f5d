"""Writes the measurement registry's table (which data calibrated what, which only checked) to BENCHMARKS.md.

Nothing is measured here: the section renders srift/data/measurements.yaml
(srift.measurements.summary_markdown), and tests/test_measurements.py checks that docs/BENCHMARKS.md's
section is what the registry renders.

    python -m benchmarks.measurement_registry
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._report import write_section  # noqa: E402
from srift.measurements import shipped_registry, summary_markdown  # noqa: E402

SECTION = "measurement registry"


def main() -> None:
    text = summary_markdown(shipped_registry())
    print(text)
    write_section(SECTION, text, command="python -m benchmarks.measurement_registry")


if __name__ == "__main__":
    main()
