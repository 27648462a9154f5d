"""The terminal and markdown views of plan quality say the same thing about each policy's choice."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from srift.validation.render import plan_table


def _plan() -> dict[str, object]:
    ranked = {"fleet": "2×a@32", "rank": 1, "of": 4, "ratio_to_best": 1.0, "feasible": True}
    late = {"fleet": "1×b@64", "rank": None, "of": None, "ratio_to_best": 0.8, "feasible": False}
    block = {"objective": "min_cost", "best": "2×a@32", "srift": ranked, "cap": late, "tap": None}
    return {"model": "cnn", "global_batch": 64, "configurations": 4, "primary": block, "secondary": block}


def test_plan_table_ranks_and_names_a_missed_deadline() -> None:
    out = StringIO()
    Console(file=out, width=200).print(plan_table(_plan()))
    text = out.getvalue()
    assert "1/4" in text and "misses deadline" in text and "n/a" in text


def _case(model: str, hosts: int, measured: float, p10: float, p90: float) -> dict[str, object]:
    return {
        "model": model,
        "fleet": f"{hosts}×a@32",
        "hosts": hosts,
        "type_group": "a",
        "batches": [32] * hosts,
        "predicted": {"iteration_s": 1.0, "iteration_p10_s": p10, "iteration_p90_s": p90,
                      "per_layer_iteration_s": 1.0},
        "runs": [{"ok": True}, {"ok": True}],
        "measured_iteration_s": measured,
        "error": (1.0 - measured) / measured,
        "per_layer_error": (1.0 - measured) / measured,
        "repeat_noise": 0.01,
        "iteration_cv": 0.05,
    }  # fmt: skip


def test_coverage_counts_cases_inside_above_and_below_the_band_by_group() -> None:
    from srift.validation.report import summarize_cases

    rows = [
        _case("m", 1, 1.0, 0.9, 1.1),  # inside
        _case("m", 2, 1.2, 0.9, 1.1),  # above p90
        _case("n", 2, 0.8, 0.9, 1.1),  # below p10
        _case("n", 4, 1.1, 0.9, 1.1),  # on p90: covered
    ]
    cov = summarize_cases(rows)["coverage"]
    assert cov["overall"] == {
        "cases": 4, "above_p10": 3, "below_p90": 3, "inside": 2,
        "above_p10_share": 0.75, "below_p90_share": 0.75, "inside_share": 0.5,
    }  # fmt: skip
    assert cov["by_model"]["m"]["below_p90"] == 1 and cov["by_model"]["n"]["above_p10"] == 1
    assert cov["by_hosts"]["2"]["inside"] == 0


def test_markdown_shows_the_band_coverage_and_range_limits() -> None:
    from srift.validation.render import markdown
    from srift.validation.report import acceptance, summarize_cases

    rows = [_case("m", 1, 1.0, 0.9, 1.1), _case("m", 2, 1.2, 0.9, 1.1)]
    summary = summarize_cases(rows)
    report = {
        "summary": summary,
        "effort": {"repeats": 2},
        "duration_s": 600.0,
        "level": "quick",
        "cases": rows,
        "acceptance": acceptance(summary, None, duration_s=600.0, full=False),
    }
    text = markdown(report)
    assert "measured ≤ p90 in 1/2 cases (50.0 %)" in text
    assert "| p90_coverage_80_to_97pct | 50.0 % | 80 % – 97 % | NO |" in text


def test_the_benchmark_section_of_a_spec_with_locations_is_its_own() -> None:
    from srift.validation.benchmarks import section_name

    plain = {"level": "quick", "testbed": {"spec": {}}}
    geo = {"level": "quick", "testbed": {"spec": {"locations": [{"name": "east", "hosts": ["a"]}]}}}
    assert section_name(plain) == "end-to-end accuracy (quick matrix, testbed)"
    assert section_name(geo) == "end-to-end accuracy across locations (quick matrix, testbed)"
