"""What Srift predicts for plain multi-node PyTorch DDP on AWS, step by step (issue 55's starting point).

Issue 55 reports that Srift underestimates real multi-node DDP steps on clouds (held-out g4dn.12xlarge
traces this project does not hold). This benchmark records what the served model predicts today for the
fleets such traces cover, so that a change to the communication model can be judged before and after on
the same grid: 1, 2 and 4 nodes of g4dn.12xlarge (4 × T4 on PCIe, no GPU peer-to-peer, 50 Gbit/s),
p3.16xlarge (8 × V100 on NVLink, 25 Gbit/s) and g4dn.8xlarge (1 × T4, 50 Gbit/s), the resnet50 and
bert-base reference models at per-GPU batches 32 and 16 (fp32), under two network assumptions a request can
state: the default (NCCL's one-socket fallback, the deadline-safe end) and `ena_visible: true` (NCCL opens
2 × 8 sockets per connection; the band's fast end). Each row breaks the step into compute (forward +
backward of the slowest member), exposed intra-node and network communication, the whole exchange
(`communication_s`, overlapped or not) and the straggler wait, and names the node rate the prior assumed.
docs/multinode.md reads these figures next to the public facts and data.

    python -m benchmarks.multinode_ddp [--no-write]
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks._report import write_section

FLEETS: dict[str, tuple[tuple[int, int], ...]] = {
    "g4dn.12xlarge": ((1, 1), (1, 4), (2, 4), (4, 4)),
    "p3.16xlarge": ((1, 1), (1, 8), (2, 8), (4, 8)),
    "g4dn.8xlarge": ((1, 1), (2, 1), (4, 1)),
}
"""Instance type → (nodes, GPUs used per node) of each fleet."""

PER_GPU_BATCH = {"resnet50": 32, "bert-base": 16}
"""Typical per-GPU batches of the two reference models (fp32 fits a 16 GiB T4 / V100 at these)."""

NETWORKS: dict[str, dict[str, Any]] = {"default": {}, "ENA seen": {"ena_visible": True}}
"""The request's `network` field for each assumption (docs/BENCHMARKS.md 'public network prior')."""


def _predict(model: str, instance_type: str, network: dict[str, Any]) -> dict[str, Any]:
    from srift.api.schemas.predictions import parse_prediction_request
    from srift.bootstrap import bootstrap
    from srift.db.session import transaction
    from srift.services.predictions import answer
    from srift.settings import get_settings

    settings = get_settings()
    bootstrap(settings)
    batch = PER_GPU_BATCH[model]
    body = {
        "model": model,
        "provider": "aws",
        "region": "us-east-1",
        "iterations": 1000,
        "mc_samples": 0,
        "seed": 0,
        "network": network,
        "configs": [
            {"choices": [{"instance_type": instance_type, "count": n, "batch": batch * g, "gpus": g}]}
            for n, g in FLEETS[instance_type]
        ],
    }
    with transaction(settings.resolved_database_url) as session:
        doc: dict[str, Any] = answer(
            session=session, settings=settings, query=parse_prediction_request(body).to_domain()
        )
    return doc


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f}"


def rows() -> list[str]:
    """One markdown row per (network, model, fleet)."""
    out = []
    for label, network in NETWORKS.items():
        for model in PER_GPU_BATCH:
            for instance_type, fleets in FLEETS.items():
                doc = _predict(model, instance_type, network)
                single = doc["predictions"][0]["predicted"]["iteration_s"]
                for (nodes, gpus), p in zip(fleets, doc["predictions"], strict=True):
                    b, step = p["breakdown"], p["predicted"]["iteration_s"]
                    rates = p["network"]["rates"] if nodes >= 2 else []
                    rate = f"{rates[0]['gbps']:.3g}" if rates else "–"
                    out.append(
                        f"| {label} | {model} | {instance_type} | {nodes}×{gpus} | {rate} | {_ms(step)} | "
                        f"{_ms(b['compute_s'])} | {_ms(b['exposed_intra_s'])} | "
                        f"{_ms(b['exposed_network_s'])} | {_ms(b['communication_s'])} | "
                        f"{_ms(b['straggler_wait_s'])} | {single / step:.2f} |"
                    )
    return out


def report() -> str:
    """The section's markdown: what the rows mean, then the rows."""
    per_gpu = ", ".join(f"{m} {b}" for m, b in PER_GPU_BATCH.items())
    return "\n".join(
        [
            "What the served model predicts for plain PyTorch DDP (NCCL over TCP sockets, no placement "
            f"group, fp32, per-GPU batch {per_gpu}, estimated compute: `estimate:roofline`). Times in ms "
            "per step; node rate = the prior's one-direction rate per node (Gbit/s); scaling = one GPU's "
            "step / the fleet's step at the same per-GPU batch (1.00: linear weak scaling). Read with "
            "docs/multinode.md.",
            "",
            "| network | model | type | nodes×GPUs | node rate | step | compute | exposed intra | "
            "exposed network | exchange | straggler wait | scaling |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows(),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    no_write = parser.parse_args().no_write
    text = report()
    if not no_write:
        write_section("multi-node DDP predictions", text, command="python -m benchmarks.multinode_ddp")
    print(text)


if __name__ == "__main__":
    main()
