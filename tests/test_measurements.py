"""The measurement registry: it parses, every file it pins is there with its hash, every constant it names
exists with the value a direct set gives, every constant srift says was fitted or measured is in it, and a
malformed entry is refused by name."""

from __future__ import annotations

import ast
import hashlib
import importlib
import itertools
import json
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from srift.errors import ConfigurationError
from srift.measurements import Registry, Use, parse_registry, shipped_registry, summary_markdown
from srift.testing.measurements import registry_with, shipped_document
from tests.bandwidth.conftest import shared_reference_dir

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "srift"

NOT_MEASUREMENTS = {
    "srift.bandwidth.prior.FIT_RUNS": "names the registry's fit runs (tests/bandwidth/test_prior.py)",
    "srift.domain.correction.MIN_STEPS": "a threshold on a user's run, not a measured figure",
    "srift.domain.memory.MARGIN_FRACTION": "a stated policy; the H200 run (h200-gpu-check) only checks it",
    "srift.domain.profile_document.MIN_PASS_S": "a plausibility floor (1 µs), below the registered 7.21 µs",
    "srift.optimize.synthetic.MAX_BATCH_SCALE": "synthetic benchmark problems, scaled by GPU memory",
    "srift.profiling.curves.MAX_BEND_CHECKS": "a count of midpoints, not a measured figure",
    "srift.services.network.RATE_MIN_BYTES": "a size class boundary, not a measured figure",
    "srift.services.replays.FITTED_LAW": "a label: the spot model a plan's figures came from",
    "srift.services.replays.NOWCAST_REPLACES": "names of a plan's spot fields",
    "srift.sim.sharded.OVERHEAD_KEY": "a profile key",
    "srift.spot.model.MIN_RUNS": "a threshold on the runs a law needs",
    "srift.spot.policy.UNCERTAINTY_STANDARD_ERRORS": "a stated choice (two standard errors), not fitted",
    "srift.spot.shipped.REGISTRY_SET": "the registry's set name",
    "srift.validation.adapter.LOOP_OVERHEAD_KEYS": "profile keys",
}
"""Constants whose docstrings mention fitting or measuring but that rest on no measurement, and why."""

SAYS_MEASURED = re.compile(r"\b(fitted|calibrated|calibrate)\b|\bTable \d|benchmarks/|\bmeasured\b", re.I)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _resolve(name: str) -> Any:
    """The constant `name` names (srift.measurements' module docstring)."""
    if "#" not in name and "/" in name:  # a repository file holding a fitted model whole
        return (REPO / name).read_bytes() if (REPO / name).is_file() else None
    if "#" in name:
        path, key = name.split("#", 1)
        text = (PACKAGE / path).read_text(encoding="utf-8")
        value: Any = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
        for part in key.split("."):
            value = value[part]
        return value
    dotted, *keys = re.split(r"[\[\]]+", name.rstrip("]"))
    module_name, attribute = dotted.rsplit(".", 1)
    value = getattr(importlib.import_module(module_name), attribute)
    for key in keys:
        value = value[key]
    return value


def test_the_shipped_registry_parses_and_separates_fits_from_checks() -> None:
    registry = shipped_registry()
    uses = {s.id: s.use for s in registry.sets.values()}
    assert uses["lambdal-single-gpu"] is Use.FIT and uses["lambdal-multi-gpu"] is Use.CHECK
    assert uses["p4de-2x8-efa"] is Use.FIT and uses["p5-1x8-nvswitch"] is Use.FIT
    assert uses["p5-2x8-efa"] is Use.SPREAD and uses["tc-cluster-setting"] is Use.CHECK
    assert uses["skypilot-spot-traces"] is Use.FIT and uses["h200-gpu-check"] is Use.CHECK
    assert uses["testbed-bandwidth-probes"] is Use.FIT and uses["timm-rtx3090-train"] is Use.CHECK
    for entry in registry.sets.values():
        assert entry.source.retrieved and entry.reader
        assert entry.source.repository or entry.source.citation or entry.source.run, entry.id


def test_every_pinned_file_is_there_with_its_hash() -> None:
    checked = 0
    for entry in shipped_registry().sets.values():
        if entry.copy is not None:
            assert entry.copy.sha256 == _sha256(PACKAGE / entry.copy.path), entry.id
            checked += 1
        if entry.source.kind in ("device", "host"):  # a run of Srift's: its files are this repository's
            for ref in entry.source.files:
                assert (REPO / ref.path).is_file(), f"{entry.id}: {ref.path}"
                if ref.sha256 is not None:
                    assert ref.sha256 == _sha256(REPO / ref.path), f"{entry.id}: {ref.path}"
                    checked += 1
    assert checked >= 10


def test_the_workspace_copies_of_the_sources_are_the_ones_registered() -> None:
    shared = shared_reference_dir().parent
    refs = [(e.id, ref) for e in shipped_registry().sets.values() for ref in e.shared]
    assert len(refs) >= 7
    for set_id, ref in refs:
        assert ref.sha256 == _sha256(shared / ref.path), f"{set_id}: {ref.path}"


def test_every_constant_named_exists_and_direct_sets_give_its_value() -> None:
    for entry in shipped_registry().sets.values():
        for constant in entry.constants:
            value = _resolve(constant.name)
            assert value is not None, f"{entry.id}: {constant.name}"
            if constant.value is not None:
                assert float(value) == pytest.approx(constant.value, rel=1e-12), (
                    f"{entry.id}: {constant.name}"
                )


def _documented_constants() -> Iterator[str]:
    """Module-level constants of srift whose docstring says they were fitted, calibrated or measured."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for statement, following in itertools.pairwise(body):
            if not isinstance(statement, ast.Assign | ast.AnnAssign):
                continue
            target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
            doc = following.value.value if isinstance(following, ast.Expr) else None
            constant = isinstance(target, ast.Name) and target.id.lstrip("_").isupper()
            if constant and isinstance(doc, str) and SAYS_MEASURED.search(doc):
                yield f"{module}.{target.id}"


def test_every_constant_that_says_it_was_fitted_or_measured_is_in_the_registry() -> None:
    named = {re.split(r"\[", c.name)[0] for e in shipped_registry().sets.values() for c in e.constants}
    found = set(_documented_constants())
    assert found, "the scan found no constant"
    outside = sorted(found - named - set(NOT_MEASUREMENTS))
    assert not outside, f"fitted or measured constants the registry does not list: {outside}"
    assert not set(NOT_MEASUREMENTS) & named
    assert set(NOT_MEASUREMENTS) <= found, "an exemption for a constant that no longer needs one"


def test_a_run_of_srifts_own_is_checked_before_a_refit_reads_it() -> None:
    path = "models/testbed-20261122-0/samples.jsonl.gz"
    data = (REPO / path).read_bytes()
    shipped_registry().check_file(path, data)
    with pytest.raises(ConfigurationError, match="a different sha256") as caught:
        shipped_registry().check_file(path, data + b"\0")
    assert caught.value.field == "source.files" and "To fix:" in str(caught.value)
    with pytest.raises(ConfigurationError, match="no sha256"):
        shipped_registry().check_file("models/other/samples.jsonl.gz", data)


def test_a_file_the_registry_does_not_pin_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="lists no set") as caught:
        shipped_registry().read("catalog/data/aws.yaml")
    assert "To fix:" in str(caught.value)


def test_a_changed_file_is_refused() -> None:
    def wrong_hash(doc: dict[str, Any]) -> None:
        for set_id in ("lambdal-single-gpu", "lambdal-multi-gpu"):
            doc["sets"][set_id]["copy"]["sha256"] = "0" * 64

    with pytest.raises(ConfigurationError, match="is not the registry's"):
        registry_with(wrong_hash).read("estimate/data/lambdal_throughput.csv")


def test_rows_must_be_exactly_the_files_rows() -> None:
    registry = shipped_registry()
    rows = list(registry.get("tc-cluster-setting").rows)
    with pytest.raises(ConfigurationError, match="not in the registry: extra"):
        registry.rows("bandwidth/data/public_allreduce.json", Use.CHECK, [*rows, "extra"])
    with pytest.raises(ConfigurationError, match="listed but not in the file"):
        registry.rows("bandwidth/data/public_allreduce.json", Use.CHECK, rows[1:])


def _edited_error(edit: Any) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        registry_with(edit)
    return caught.value


@pytest.mark.parametrize(
    ("edit", "field", "says"),
    [
        (lambda d: d["sets"]["p5-2x8-efa"].update(use="tuned"), "sets.p5-2x8-efa.use", "fit"),
        (
            lambda d: d["sets"]["erben-vm-rtt"]["source"].pop("retrieved"),
            "sets.erben-vm-rtt.source.retrieved",
            "",
        ),
        (lambda d: d["sets"]["cuda-context"].update(colour="red"), "sets.cuda-context.colour", ""),
        (
            lambda d: d["sets"]["tc-cluster-setting"]["rows"].append("tc-4x1-gloo-default"),
            "sets.tc-cluster-setting",
            "listed twice",
        ),
        (
            lambda d: d["sets"]["h200-gpu-check"].update(constants=[{"name": "x"}]),
            "sets.h200-gpu-check",
            "sets no constant",
        ),
        (
            lambda d: d["sets"]["erben-vm-rtt"].update(
                constants=[{"name": "srift.bandwidth.prior.TCP_HOP_S"}]
            ),
            "sets.erben-vm-rtt",
            "value",
        ),
        (
            lambda d: d["sets"]["lambdal-single-gpu"]["copy"].update(sha256="abc"),
            "sets.lambdal-single-gpu.copy.sha256",
            "pattern",
        ),
        (lambda d: d["sets"]["erben-vm-rtt"].update(id="erben"), "sets.erben-vm-rtt", "differs from its key"),
    ],
)
def test_a_malformed_entry_is_refused_by_name(edit: Any, field: str, says: str) -> None:
    error = _edited_error(edit)
    assert error.field == field
    assert says in str(error) and "To fix:" in str(error)


def test_a_registry_that_is_not_yaml_or_of_another_format_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not YAML"):
        parse_registry("sets: [unclosed")
    document = shipped_document()
    document["format"] = "srift-measurements/1"
    with pytest.raises(ConfigurationError) as caught:
        parse_registry(yaml.safe_dump(document))
    assert caught.value.field == "format"


def test_an_unknown_set_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError) as caught:
        shipped_registry().get("mlperf")
    assert caught.value.field == "sets.mlperf"


def test_the_registry_is_package_data() -> None:
    assert isinstance(shipped_registry(), Registry)
    assert resources.files("srift").joinpath("data/measurements.yaml").is_file()
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"data/*"' in pyproject


def test_the_benchmarks_section_is_what_the_registry_renders() -> None:
    """docs/BENCHMARKS.md "measurement registry" (python -m benchmarks.measurement_registry) is up to date."""
    text = (REPO / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    section = text.split("<!-- section:measurement registry -->", 1)[1].split("<!-- /section:", 1)[0]
    assert summary_markdown(shipped_registry()).strip() in section
    for entry in shipped_registry().sets.values():
        assert f"| {entry.id} | {entry.use.value} |" in section
