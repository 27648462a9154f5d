"""timm's RTX 3090 training rows are read only through the measurement registry, only as a check, and the
estimate they are compared with is the one a user gets for the GPU."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from srift.errors import ConfigurationError
from srift.estimate import public_timm
from srift.estimate.calibration import shipped_calibration
from srift.estimate.estimator import estimate_profile
from srift.estimate.public_timm import MemoryFormat, estimated_step_s, parse_rows, read_rows
from srift.measurements import Use, shipped_registry
from srift.refmodels.build import load_structure
from srift.testing.measurements import registry_with


def test_every_row_is_a_registered_check_row_of_both_layouts_and_three_torch_versions() -> None:
    rows = read_rows()
    entry = shipped_registry().get(public_timm.SET_ID)
    assert entry.use is Use.CHECK and sorted(r.row for r in rows) == sorted(entry.rows)
    assert {r.gpu for r in rows} == {"RTX-3090"} and {r.precision.value for r in rows} == {"fp16"}
    cells = Counter((r.model, r.layout, r.torch) for r in rows)
    assert set(cells.values()) == {1}
    expected = {(m, layout) for m in ("resnet50", "vit-b16") for layout in MemoryFormat}
    assert {(m, layout) for m, layout, _ in cells} == expected
    assert {t for _, _, t in cells} == {"1.10", "1.11", "1.12"}


def test_each_rows_two_published_figures_describe_one_step() -> None:
    """timm publishes samples/s (wall time of the timed loop) and the mean timed step: a row whose columns
    were copied from two different models or files would not agree with itself."""
    for row in read_rows():
        assert row.step_ms / 1e3 == pytest.approx(row.measured_step_s, rel=0.01), row.row
        version = row.torch.replace(".", "")
        assert row.source_file.endswith(f"-{row.layout.value}-pt{version}-cu113-rtx3090.csv"), row.row


def test_a_changed_copy_is_refused() -> None:
    def wrong_hash(doc: dict[str, Any]) -> None:
        doc["sets"][public_timm.SET_ID]["copy"]["sha256"] = "0" * 64

    with pytest.raises(ConfigurationError, match="is not the registry's"):
        read_rows(registry=registry_with(wrong_hash))


def test_a_row_the_registry_does_not_list_is_refused() -> None:
    def drop_one(doc: dict[str, Any]) -> None:
        doc["sets"][public_timm.SET_ID]["rows"] = doc["sets"][public_timm.SET_ID]["rows"][1:]

    with pytest.raises(ConfigurationError, match="not in the registry"):
        read_rows(registry=registry_with(drop_one))


def test_rows_listed_for_a_fit_are_refused() -> None:
    def as_fit(doc: dict[str, Any]) -> None:
        entry = doc["sets"][public_timm.SET_ID]
        entry["use"] = "fit"
        entry["constants"] = [{"name": "estimate/data/calibration.json#efficiency.compute"}]

    with pytest.raises(ConfigurationError, match="not a check set") as caught:
        read_rows(registry=registry_with(as_fit))
    assert caught.value.field == "use" and "To fix:" in str(caught.value)


@pytest.mark.parametrize("model", ["resnet50", "vit-b16"])
def test_the_estimate_is_the_estimated_profiles_step_at_a_breakpoint(model: str) -> None:
    """At a curve breakpoint the estimated profile a plan uses gives forward + backward + update exactly;
    the check's estimate must be that number, factor included (resnet50 has one, vit-b16 none)."""
    row = next(r for r in read_rows() if r.model == model)
    structure = load_structure(model, row.precision)
    cal = shipped_calibration()
    made = estimate_profile(model=model, structure=structure, spec=row.spec, precision=row.precision)
    assert made.profile is not None
    batch = 64
    at = parse_rows(_one_row_csv(row.row, batch))[0]
    expected = made.profile.compute_s(batch) + made.profile.update_s
    assert estimated_step_s(at, structure, cal) == pytest.approx(expected, rel=1e-9)
    assert (cal.factor(model, row.precision) is None) == (model == "vit-b16")


def _one_row_csv(row_id: str, batch: int) -> str:
    """The shipped row `row_id` with its batch replaced (the rest of the CSV as shipped)."""
    text = shipped_registry().read(public_timm.TABLE_COPY)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    header, rows = lines[0], [line for line in lines[1:] if line.startswith(row_id + ",")]
    columns = header.split(",")
    cells = rows[0].split(",")
    cells[columns.index("batch")] = str(batch)
    return header + "\n" + ",".join(cells) + "\n"
