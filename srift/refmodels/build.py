"""Write the shipped structure profiles of the reference models: `python -m srift.refmodels.build [--check]`.

For every reference model and every counted precision (fp32, fp16, bf16; tf32 moves fp32's bytes), count
the structure on fake tensors (`srift.profiling.structure`) and write `srift/refmodels/data/NAME.PREC.json`.
`--check` writes nothing and exits 1 when a shipped file differs from a fresh count (a test runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from srift.domain.sharding import BlockFacts
from srift.domain.structure import ModelStructure, Precision
from srift.refmodels import REFERENCE_MODELS, ReferenceModel

DATA_DIR = Path(__file__).parent / "data"
COUNTED = (Precision.FP32, Precision.FP16, Precision.BF16)


def structure_path(name: str, precision: Precision) -> Path:
    """Where the shipped structure of `name` in `precision` lives (tf32 shares fp32's)."""
    counted = Precision.FP32 if precision is Precision.TF32 else precision
    return DATA_DIR / f"{name}.{counted.value}.json"


def count(model: ReferenceModel, precision: Precision) -> dict[str, Any]:
    """A fresh structure document of `model` in `precision`, without the torch version (files stay stable)."""
    from srift.profiling.loading import resolve_callable
    from srift.profiling.structure import count_structure

    structure = count_structure(
        resolve_callable(model.model_factory, what="model factory", field="model_factory"),
        resolve_callable(model.input_factory, what="input factory", field="input_factory"),
        precision=precision,
        fake=True,
    )
    doc = structure.to_dict()
    doc["method"] = doc["method"].split(", torch ")[0]
    return doc


def count_block_facts(model: ReferenceModel, precision: Precision) -> BlockFacts:
    """What `model`'s repeated blocks save and take, per sample (`srift.refmodels.blocks`)."""
    from srift.profiling.loading import resolve_callable
    from srift.refmodels.blocks import count_blocks

    return count_blocks(
        resolve_callable(model.model_factory, what="model factory", field="model_factory"),
        resolve_callable(model.input_factory, what="input factory", field="input_factory"),
        precision=precision,
    )


def load_blocks(name: str, precision: Precision) -> BlockFacts | None:
    """The shipped block facts of reference model `name` in `precision` (None when it has none)."""
    doc = json.loads(structure_path(name, precision).read_text()).get("blocks")
    if doc is None:
        return None
    return BlockFacts(
        count=int(doc["count"]),
        input_bytes_per_sample=float(doc["input_bytes_per_sample"]),
        saved_bytes_per_sample=float(doc["saved_bytes_per_sample"]),
    )


def load_structure(name: str, precision: Precision) -> ModelStructure:
    """The shipped structure of reference model `name` in `precision`."""
    doc = json.loads(structure_path(name, precision).read_text())
    return ModelStructure.from_dict(doc["structure"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped files, write nothing")
    parser.add_argument("--model", action="append", help="only these models (default: every one)")
    args = parser.parse_args(argv)
    stale = []
    for model in REFERENCE_MODELS:
        if args.model and model.name not in args.model:
            continue
        for precision in COUNTED:
            doc = {
                "format": "srift-structure/1",
                "model": model.name,
                "title": model.title,
                "parameters": model.parameters,
                "sample": model.sample,
                "source": model.source,
                "structure": count(model, precision),
            }
            if model.sharded:
                doc["blocks"] = count_block_facts(model, precision).to_dict()
            path = structure_path(model.name, precision)
            text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
            if args.check:
                if not path.exists() or path.read_text() != text:
                    stale.append(path.name)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                print(f"wrote {path}")
    if stale:
        print("stale: " + ", ".join(stale) + " (run python -m srift.refmodels.build)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
