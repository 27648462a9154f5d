"""`srift profile import`'s core: compute tables (formats, units, medians, errors) and the profile built."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from srift.domain.profile import LayerGrad, LayerProfile
from srift.domain.profile_document import read_profile
from srift.errors import InvalidInput
from srift.profiling.imports import (
    DEFAULT_STRAGGLER_CV,
    FORWARD_FRACTION,
    TableKind,
    build_profile,
    parse_compute_table,
)

LAYERS = LayerProfile(
    model="bertish",
    layers=(
        LayerGrad(name="head", grad_bytes=4_000, ready_frac=0.02),
        LayerGrad(name="block", grad_bytes=8_000_000, ready_frac=0.5),
        LayerGrad(name="embed", grad_bytes=90_000_000, ready_frac=0.98),
    ),
    trainable_bytes=98_004_000,
    device="cpu",
)


@pytest.mark.parametrize(
    "text",
    [
        "batch,step_s\n8,0.2\n16,0.4\n",
        "# measured on a T4\nbatch\tstep_s\n8\t0.2\n16\t0.4\n",
        "batch step_ms\n8 200\n16 400\n",
        "Batch;Step_S\n8;0.2\n16;0.4\n",
        '[{"batch": 16, "step_s": 0.4}, {"batch": 8, "step_s": 0.2}]',
        '{"rows": [{"batch": 8, "step_ms": 200}, {"batch": 16, "step_ms": 400}]}',
        "batch,samples_per_s\n8,40\n16,40\n",
    ],
)
def test_every_table_format_gives_the_same_step_times(text: str) -> None:
    table = parse_compute_table(text)
    assert table.batches == (8, 16)
    assert table.step_s == pytest.approx((0.2, 0.4))


def test_repeated_batches_keep_the_median_and_count_rows() -> None:
    table = parse_compute_table("batch,step_s\n8,0.2\n8,0.9\n8,0.21\n4,0.1\n")
    assert table.batches == (4, 8)
    assert table.step_s == pytest.approx((0.1, 0.21))
    assert table.rows == (1, 3)
    assert table.kind is TableKind.STEP


def test_forward_and_backward_columns_are_kept_apart() -> None:
    table = parse_compute_table("batch,forward_ms,backward_ms\n8,50,110\n16,90,210\n")
    assert table.kind is TableKind.FORWARD_BACKWARD
    assert table.forward_s == pytest.approx((0.05, 0.09))
    assert table.backward_s == pytest.approx((0.11, 0.21))
    profile = build_profile(table=table, layers=LAYERS, accelerator="T4")
    assert profile.forward.times_s == pytest.approx((0.05, 0.09))
    assert profile.backward.times_s == pytest.approx((0.11, 0.21))
    assert not any("forward =" in a for a in profile.extra["assumptions"])


@pytest.mark.parametrize(
    ("text", "needles", "field"),
    [
        ("batch,step_s\n8,0.2\n16,-1\n", ["line 3", "step_s", "-1"], "table.step_s"),
        ("batch,step_s\n8.5,0.2\n", ["line 2", "whole number"], "table.batch"),
        ("batch,step_s\n0,0.2\n", ["line 2", "batch"], "table.batch"),
        ("batch,step_s\n8,nan\n", ["line 2", "nan"], "table.step_s"),
        ("batch,step_s\n8,0.2,3\n", ["line 2", "3 cells"], "table"),
        ("batch,seconds\n8,0.2\n", ["columns", "seconds"], "table"),
        ("batch,step_s,step_ms\n8,0.2,200\n", ["step twice"], "table"),
        ("batch,forward_s\n8,0.2\n", ["columns"], "table"),
        ("batch,step_s,samples_per_s\n8,0.2,40\n", ["columns"], "table"),
        ('[{"batch": 8, "step_s": true}]', ["line 1", "True"], "table.step_s"),
        ("[1, 2]", ["list of objects"], "table"),
    ],
)
def test_bad_tables_name_the_line_and_column(text: str, needles: list[str], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_compute_table(text, source="t4.csv")
    message = caught.value.detail
    for needle in needles:
        assert needle in message, message
    assert caught.value.field == field
    assert caught.value.hint


def test_empty_tables_are_refused() -> None:
    for text in ("", "# only a comment\n", "batch,step_s\n"):
        with pytest.raises(InvalidInput):
            parse_compute_table(text)


def test_step_times_are_split_by_the_stated_assumption_and_round_trip() -> None:
    table = parse_compute_table("batch,step_s\n8,0.3\n16,0.6\n")
    profile = build_profile(table=table, layers=LAYERS, accelerator="Tesla T4", created_at="2026-01-01")
    assert profile.forward.times_s == pytest.approx((0.3 * FORWARD_FRACTION, 0.6 * FORWARD_FRACTION))
    assert profile.compute_s(8) == pytest.approx(0.3)
    assert profile.compute_s(12) == pytest.approx(0.45)
    assert profile.max_batch == 16
    assert profile.straggler_cv == pytest.approx(0.067)
    assert profile.layers == LAYERS.layers
    text = " | ".join(profile.extra["assumptions"])
    for needle in ("per GPU", "Kaplan", "max_batch 16", "Table 1", "readiness"):
        assert needle in text
    again = read_profile(json.loads(json.dumps(profile.to_dict())))
    assert again == profile
    assert again.extra["imported"]["batches"] == [8, 16]


def test_overrides_replace_the_assumptions() -> None:
    table = parse_compute_table("batch,step_s\n32,1.0\n")
    profile = build_profile(
        table=table,
        layers=LAYERS,
        accelerator="A100",
        model_name="mine",
        max_batch=64,
        forward_fraction=0.4,
        straggler_cv=0.01,
        update_s=0.1,
    )
    assert profile.model == "mine" and profile.max_batch == 64
    assert profile.forward.time_s(32) == pytest.approx(0.36)
    assert profile.backward.time_s(32) == pytest.approx(0.54)
    assert profile.update_s == pytest.approx(0.1)
    assert profile.compute_s(64) == pytest.approx(1.8)
    text = " | ".join(profile.extra["assumptions"])
    assert "--forward-fraction" in text and "extrapolate" in text and "proportion" in text
    assert "Table 1" not in text


def test_an_unknown_gpu_gets_the_median_spread() -> None:
    profile = build_profile(table=parse_compute_table("batch,step_s\n8,1\n"), layers=LAYERS, accelerator="L4")
    assert profile.straggler_cv == DEFAULT_STRAGGLER_CV == pytest.approx(0.052)
    assert "median" in " ".join(profile.extra["assumptions"])


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"forward_fraction": 1.0}, "forward_fraction"),
        ({"forward_fraction": 0.0}, "forward_fraction"),
        ({"update_s": 0.5}, "update_s"),
        ({"update_s": -1.0}, "update_s"),
        ({"straggler_cv": -0.1}, "straggler_cv"),
        ({"accelerator": "  "}, "accelerator"),
        ({"max_batch": 0}, "max_batch"),
    ],
)
def test_bad_overrides_name_the_field(over: dict[str, Any], field: str) -> None:
    kwargs: dict[str, Any] = {"accelerator": "T4", **over}
    with pytest.raises(InvalidInput) as caught:
        build_profile(table=parse_compute_table("batch,step_s\n8,0.5\n"), layers=LAYERS, **kwargs)
    assert caught.value.field == field


def test_layers_documents_round_trip_and_stay_apart_from_full_profiles(profile_doc: dict[str, Any]) -> None:
    doc = LAYERS.to_dict()
    assert doc["kind"] == "layers"
    assert LayerProfile.from_dict(json.loads(json.dumps(doc))) == LAYERS
    with pytest.raises(InvalidInput) as caught:
        read_profile(doc)
    assert caught.value.field == "kind" and "srift profile import" in caught.value.hint
    taken = LayerProfile.from_dict(profile_doc)
    assert [x.name for x in taken.layers] == ["fc", "conv2", "conv1"]
    assert taken.trainable_bytes == 2052 + 73856 + 1792
    for bad, field in (
        ({**doc, "kind": "other"}, "kind"),
        ({**doc, "layers": []}, "layers"),
        ({**doc, "trainable_bytes": -1}, "trainable_bytes"),
        ({**doc, "schema_version": 9}, "schema_version"),
    ):
        with pytest.raises(InvalidInput) as caught:
            LayerProfile.from_dict(copy.deepcopy(bad))
        assert caught.value.field == field


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("batch,step_s\n8,0.2\n16,1e9\n", "table.step_s"),
        ("batch,step_ms\n8,0.0001\n", "table.step_ms"),
        ("batch,forward_s,backward_s\n8,0.1,100000\n", "table.backward_s"),
        ("batch,samples_per_s\n8,1e-6\n", "table.samples_per_s"),
    ],
)
def test_a_pass_a_stored_profile_may_not_hold_is_refused_on_the_time_column(text: str, field: str) -> None:
    """The import wrote such profiles, which POST /v1/profiles and `srift predict --profile` then refused
    (a pass lasts 1 µs to a day): it is refused here, naming the table's column and its units."""
    table = parse_compute_table(text)
    with pytest.raises(InvalidInput) as caught:
        build_profile(table=table, layers=LAYERS, accelerator="T4")
    assert caught.value.field == field
    assert "units" in caught.value.hint


def test_a_max_batch_below_a_timed_batch_is_refused() -> None:
    """`--max-batch 4` over a table timed at batch 8 and 16 wrote a profile with breakpoints above its
    max_batch, which the server refuses (a batch that does not fit cannot have been timed)."""
    table = parse_compute_table("batch,step_s\n8,0.2\n16,0.4\n")
    with pytest.raises(InvalidInput) as caught:
        build_profile(table=table, layers=LAYERS, accelerator="T4", max_batch=4)
    assert caught.value.field == "max_batch" and "--max-batch 16" in caught.value.hint
    at_top = build_profile(table=table, layers=LAYERS, accelerator="T4", max_batch=16)
    assert read_profile(json.loads(json.dumps(at_top.to_dict()))).max_batch == 16
