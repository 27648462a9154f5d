"""Load the reference models' profiles into the database, once per version of what they rest on.

For every reference model, precision (fp32, tf32, fp16, bf16) and catalog GPU (the accelerator specs with
a `match`), the estimator builds a profile from the shipped structure (`srift/refmodels/data/`), the
accelerator's specs and the shipped calibration: `estimate:roofline`, with the model's factor from the
public table where the table has the model. Where Srift's profiler measured the reference model itself on
a GPU in that precision (`srift/refmodels/data/measured/`, device runs listed in the measurement registry),
the set is what a user who uploaded that profile would plan with: the measured profile on its GPU, and on
every other GPU `estimate:scaled` from it (the measured times times the two GPUs' roofline ratio,
`srift.estimate.estimator`), so the GPUs are compared from one measurement of the model's own code.
They are stored like any profile, so `model: resnet50` plans out of the box, `GET /v1/profiles` lists them
and the dashboard offers them.

Called at start-up (`srift.bootstrap`). Idempotent and cheap when nothing changed: every stored reference
profile carries `extra.reference_set`, a digest of its inputs (structures, specs, calibration, this
module's version); when the digest is already stored the loader returns at once. Otherwise it stores the
new set and deletes reference profiles of older sets. Profiles users upload are never touched.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

from sqlalchemy import delete, select

from srift.catalog.accelerators import accelerator_specs, spec_for_accelerator
from srift.db.session import transaction
from srift.db.tables import ModelProfileRow
from srift.domain.profile import ModelProfile
from srift.domain.profile_document import read_profile
from srift.domain.sharding import SHARDING_KEY, BlockFacts, MemoryBasis, activation_batch_limit
from srift.domain.structure import ModelStructure, Precision
from srift.errors import ConfigurationError
from srift.refmodels import REFERENCE_MODELS, ReferenceModel
from srift.settings import Settings

log = logging.getLogger("srift.refmodels")

VERSION = "6"
"""Bump when the estimated profiles change for a reason the digested files do not show (code). 2: the
largest batch from the training memory model, which each profile carries (`extra.training_memory`). 3:
the sharded reference models' largest batch is what their activations allow, and they carry
`extra.sharding` (srift.domain.sharding). 4: fp32 convolutions priced at the TF32 peak (PyTorch's cuDNN
default, `srift.estimate.roofline`). 5: fp16/bf16 profiles carry `extra.unaligned_share` (a plan's
`estimated.candidates[type].unaligned_share`). 6: a device run's profile of a reference model stands for its
model and precision on its GPU, and the other GPUs' estimates are scaled from it (the digest covers the
files, not the rule)."""

MEASURED = "data/measured"
"""Reference profiles `srift profile measure` wrote on a GPU (device runs), one JSON document each."""

PRECISIONS = (Precision.FP32, Precision.TF32, Precision.FP16, Precision.BF16)


@lru_cache(maxsize=1)
def reference_set() -> str:
    """Digest of everything the stored reference profiles rest on."""
    digest = hashlib.sha256(VERSION.encode())
    for document in _measured_documents():
        digest.update(document.read_bytes())
    for package, name in (
        ("srift.catalog", "specs/accelerators.yaml"),
        ("srift.estimate", "data/calibration.json"),
        *(
            ("srift.refmodels", f"data/{m.name}.{p.value}.json")
            for m in REFERENCE_MODELS
            for p in (Precision.FP32, Precision.FP16, Precision.BF16)
        ),
    ):
        digest.update(resources.files(package).joinpath(name).read_bytes())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def reference_profiles() -> tuple[ModelProfile, ...]:
    """Every reference model's estimated profile on every catalog GPU, in every precision (built once per
    process: they depend only on shipped files)."""
    from srift.estimate.estimator import estimate_profile
    from srift.refmodels.build import load_blocks, load_structure

    tag = reference_set()
    measured = measured_reference_profiles()
    out: list[ModelProfile] = []
    specs = [s for s in accelerator_specs() if s.match_gpu_model]
    for model in REFERENCE_MODELS:
        for precision in PRECISIONS:
            structure = load_structure(model.name, precision)
            basis = sharding_basis(structure, load_blocks(model.name, precision)) if model.sharded else None
            anchor = measured.get((model.name, precision))
            anchor_spec = spec_for_accelerator(anchor.accelerator) if anchor is not None else None
            # What every GPU's estimate of this model and precision shares.
            estimate = functools.partial(
                estimate_profile,
                model=model.name,
                structure=structure,
                precision=precision,
                anchor=anchor,
                anchor_spec=anchor_spec,
            )
            for spec in specs:
                if anchor is not None and anchor_spec is not None and spec.name == anchor_spec.name:
                    out.append(_as_reference(anchor, model=model, tag=tag, basis=basis))
                    continue
                fit = None
                if basis is not None:
                    memory_gib = spec.match_memory_gib or spec.memory_gib
                    fit = activation_batch_limit(
                        basis, capacity_bytes=memory_gib * 2**30, mixed=precision.autocast
                    )
                    if fit < 1:
                        log.info("reference %s: batch 1's activations do not fit %s", model.name, spec.name)
                        continue
                made = estimate(spec=spec, memory_gib=spec.match_memory_gib, max_batch=fit)
                if made.profile is None:
                    log.info("reference %s: %s", model.name, made.note)
                    continue
                out.append(_as_reference(made.profile, model=model, tag=tag, basis=basis))
    return tuple(out)


def _as_reference(
    profile: ModelProfile, *, model: ReferenceModel, tag: str, basis: MemoryBasis | None
) -> ModelProfile:
    """`profile` marked as a member of the reference set `tag` (`extra.reference`), with the model's title,
    sample and, for a sharded model, its memory basis."""
    return ModelProfile(
        **{
            **{f: getattr(profile, f) for f in profile.__dataclass_fields__},
            "extra": {
                **profile.extra,
                "reference": True,
                "reference_set": tag,
                "title": model.title,
                "sample": model.sample,
                **({SHARDING_KEY: basis.to_dict()} if basis is not None else {}),
            },
        }
    )


def _measured_documents() -> list[Traversable]:
    """The shipped measured profiles' files, by name."""
    folder = resources.files("srift.refmodels").joinpath(MEASURED)
    return sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)


@lru_cache(maxsize=1)
def measured_reference_profiles() -> dict[tuple[str, Precision], ModelProfile]:
    """The shipped measured profiles by (reference model, precision). Each must be a reference model's, on a
    catalog GPU, one per model and precision (the one GPU the others are scaled from): anything else is a
    packaging fault, which ConfigurationError names."""
    names = {m.name for m in REFERENCE_MODELS}
    out: dict[tuple[str, Precision], ModelProfile] = {}
    for document in _measured_documents():
        profile = read_profile(json.loads(document.read_text()))
        spec = spec_for_accelerator(profile.accelerator)
        key = (profile.model, profile.precision)
        if profile.model not in names or spec is None or not spec.match_gpu_model or key in out:
            raise ConfigurationError(
                f"{MEASURED}/{document.name}: {profile.model}@{profile.accelerator} ({profile.precision}) is "
                "not the one measured profile of a reference model in its precision on a catalog GPU",
                hint="ship one `srift profile measure` document per reference model and precision, measured "
                "on a catalog GPU, in srift/refmodels/data/measured/",
            )
        out[key] = profile
    return out


def sharding_basis(structure: ModelStructure, blocks: BlockFacts | None) -> MemoryBasis:
    """What a sharded reference model's memory rests on: its counted parameters and activations."""
    use = structure.memory
    return MemoryBasis(
        parameter_bytes=use.parameter_bytes,
        activation_bytes=use.activation_bytes,
        source=f"counted: {structure.method}",
        blocks=blocks,
    )


def load_reference_profiles(settings: Settings) -> int:
    """Store the current reference profiles unless already stored; return how many rows were written."""
    from srift.profiling.store import save_profiles_new

    tag = reference_set()
    names = [m.name for m in REFERENCE_MODELS]
    # Only the two flags are read, not the documents: every local command runs this check (srift.bootstrap),
    # and parsing each stored reference profile's JSON took 60 ms of it.
    is_reference = ModelProfileRow.document[("extra", "reference")]
    set_of = ModelProfileRow.document[("extra", "reference_set")].as_string()
    with transaction(settings.resolved_database_url) as session:
        stored = session.execute(
            select(ModelProfileRow.id, is_reference, set_of).where(ModelProfileRow.model.in_(names))
        ).all()
        mine = [(pid, stored_set) for pid, reference, stored_set in stored if reference]
        if any(stored_set == tag for _, stored_set in mine):
            return 0
        written = save_profiles_new(session=session, profiles=reference_profiles())
        stale = [pid for pid, stored_set in mine if stored_set != tag]
        if stale:
            session.execute(delete(ModelProfileRow).where(ModelProfileRow.id.in_(stale)))
        log.info(
            "reference models: stored %d estimated profiles (set %s), removed %d", written, tag, len(stale)
        )
        return written
