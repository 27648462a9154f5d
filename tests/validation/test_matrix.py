"""The validation matrix: fleets the testbed holds within the CPU cap, quick vs full, mixed batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from srift.errors import InvalidInput
from srift.testbed import parse_spec
from srift.validation.context import DEFAULT_SPEC, Effort, ValidationOptions
from srift.validation.matrix import Fleet, Group, build_matrix, check_spec, compositions
from srift.validation.steps import iterations_for, run_timeout_s

SPEC = {
    "types": [
        {"name": "s", "cpu_cores": 0.25, "rate_mbit": 200, "price_usd_per_hr": 0.1},
        {"name": "l", "cpu_cores": 0.5, "rate_mbit": 800, "price_usd_per_hr": 0.2},
    ],
    "hosts": [{"type": "s", "count": 4}, {"type": "l", "count": 4}],
}


def test_quick_matrix_covers_one_to_four_hosts_and_mixed_fleets_within_the_cap() -> None:
    spec = parse_spec(SPEC, cores=2)
    cases = build_matrix(spec, models=["cnn"], full=False, max_cores=1.5)
    labels = [c.fleet.label() for c in cases]
    assert labels == [
        "1×s@32", "2×s@32", "4×s@32", "1×l@32", "2×l@32",
        "1×s@32 + 1×l@32", "1×s@16 + 1×l@48", "2×s@32 + 2×l@32", "2×s@16 + 2×l@48",
    ]  # fmt: skip
    assert "4×l@32" not in labels  # 2 cores of quota > 1.5
    assert all(c.fleet.cores(spec) <= 1.5 for c in cases)
    assert {c.fleet.hosts for c in cases} == {1, 2, 4}


def test_full_matrix_has_every_composition_up_to_four_hosts() -> None:
    spec = parse_spec(SPEC, cores=2)
    comps = compositions(spec, max_hosts=4, max_cores=1.5, full=True)
    assert {"s": 3} in comps and {"l": 3} in comps and {"s": 3, "l": 1} in comps
    assert {"l": 4} not in comps and {"s": 1, "l": 3} not in comps  # 1.75 cores
    cases = build_matrix(spec, models=["cnn", "transformer"], full=True, max_cores=1.5)
    assert len({c.fleet.hosts for c in cases}) == 4
    assert len(cases) == 2 * len({c.fleet.label() for c in cases})


def test_fleet_ranks_get_their_group_batches() -> None:
    fleet = Fleet((Group("s", 2, 16), Group("l", 1, 48)))
    assert fleet.batches == (16, 16, 48)
    assert fleet.mixed and fleet.hosts == 3
    assert fleet.composition() == "2×s + 1×l"


def test_unknown_model_and_single_type_specs_are_refused() -> None:
    spec = parse_spec(SPEC, cores=2)
    with pytest.raises(InvalidInput) as info:
        build_matrix(spec, models=["resnet"], full=False, max_cores=1.5)
    assert info.value.field == "models"
    one = parse_spec({**SPEC, "types": SPEC["types"][:1], "hosts": [{"type": "s", "count": 2}]}, cores=2)
    with pytest.raises(InvalidInput) as info2:
        check_spec(one)
    assert "differ" in info2.value.detail


def test_shipped_spec_is_valid_for_validation() -> None:
    from srift.testbed import load_spec

    spec = load_spec(DEFAULT_SPEC, cores=2)
    check_spec(spec)
    assert len(build_matrix(spec, models=["cnn"], full=False, max_cores=1.5)) == 9


def test_iterations_follow_the_prediction_within_bounds() -> None:
    effort = Effort.quick()
    assert effort.min_iters < 20 < effort.max_iters
    assert iterations_for(effort, effort.target_run_s / 19.5) == 20
    assert iterations_for(effort, 10.0) == effort.min_iters
    assert iterations_for(effort, 0.0001) == effort.max_iters


def test_short_steps_fill_the_time_budget() -> None:
    for effort in (Effort.quick(), Effort.full()):
        assert iterations_for(effort, 0.004) * 0.004 >= effort.target_run_s


def test_run_timeout_follows_the_budget_not_the_iteration_cap() -> None:
    effort = Effort.quick()
    assert run_timeout_s(effort, 2, 0.01) == pytest.approx(120.0 + 10.0 * 2.0 + 30.0 * 4 * 0.05)
    long_s = 2.0
    assert run_timeout_s(effort, 1, long_s) == pytest.approx(120.0 + 20.0 + 30.0 * 3 * long_s)
    assert run_timeout_s(effort, 1, long_s) < effort.max_iters * long_s


def test_user_models_pair_by_position_and_are_named_as_given(tmp_path: pytest.TempPathFactory) -> None:
    from srift.validation.context import ValidationOptions
    from srift.validation.matrix import DEFAULT_LOSS, user_models

    mine = user_models(
        ["pkg.models:big", "models.py:small"], ["pkg.models:batch", "models.py:batch"], ["pkg.losses:ce"]
    )
    assert [m.name for m in mine] == ["pkg.models:big", "models.py:small"]
    assert mine[0].loss == "pkg.losses:ce" and mine[1].loss == "pkg.losses:ce"
    assert mine[1].factory.endswith("/models.py:small") and mine[1].factory.startswith("/")
    assert mine[0].module == "pkg.models" and mine[1].module is None
    assert user_models(["a:b"], ["a:c"])[0].run_loss == DEFAULT_LOSS

    options = ValidationOptions(models=(), user_models=mine)
    assert list(options.model_specs()) == ["pkg.models:big", "models.py:small"]
    assert options.resolved_plan_model() == "pkg.models:big"
    both = ValidationOptions(models=("cnn", "transformer"), user_models=mine)
    assert list(both.model_specs())[:2] == ["cnn", "transformer"]
    assert both.resolved_plan_model() == "transformer"
    spec = parse_spec(SPEC, cores=2)
    cases = build_matrix(spec, models=list(both.model_specs()), known=list(both.model_specs()), full=False,
                         max_cores=1.5)  # fmt: skip
    assert {c.model for c in cases} == {"cnn", "transformer", "pkg.models:big", "models.py:small"}


@pytest.mark.parametrize(
    ("factories", "inputs", "losses", "field"),
    [
        (["a:b"], [], [], "input"),
        (["a:b", "a:c"], ["a:d", "a:e"], ["x:l", "y:l", "z:l"], "loss"),
        (["a.b"], ["a:d"], [], "model[0]"),
        (["a:b"], ["a:"], [], "input[0]"),
        (["a:b", "a:b"], ["a:d", "a:d"], [], "model"),
        (["cnn"], ["a:d"], [], "model[0]"),
    ],
)
def test_user_models_refuse_what_cannot_be_paired_or_imported(
    factories: list[str], inputs: list[str], losses: list[str], field: str
) -> None:
    from srift.validation.matrix import user_models

    with pytest.raises(InvalidInput) as info:
        user_models(factories, inputs, losses)
    assert info.value.field == field
    assert info.value.hint


def test_user_model_typos_are_refused_before_the_testbed_comes_up() -> None:
    from srift.validation.context import ValidationOptions
    from srift.validation.matrix import user_models
    from srift.validation.pipeline import check_user_models

    good = "srift.profiling.testmodels"
    options = ValidationOptions(
        user_models=user_models([f"{good}:cnn", f"{good}:wide_mlp"], [f"{good}:cnn_input", f"{good}:nope"])
    )
    with pytest.raises(InvalidInput) as info:
        check_user_models(options)
    assert info.value.field == "input[1]"


_MODELS = """
import torch
from torch import nn


class Skips(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 2)
        self.skipped = nn.Linear(4, 2)  # built, never called: no gradient

    def forward(self, x):
        return self.used(x)


def skips():
    return Skips()


def whole():
    return nn.Sequential(nn.Linear(4, 2))


def frozen():
    model = Skips()
    model.skipped.requires_grad_(False)
    return model


def rows(batch):
    return torch.randn(batch, 4)


def wrong_width(batch):
    return torch.randn(batch, 5)
"""


def _options_for(tmp_path: Path, factory: str, input_factory: str = "rows") -> ValidationOptions:
    from srift.validation.matrix import user_models

    module = tmp_path / "usermodels.py"
    module.write_text(_MODELS)
    return ValidationOptions(user_models=user_models([f"{module}:{factory}"], [f"{module}:{input_factory}"]))


def test_a_user_model_whose_parameters_do_not_all_get_a_gradient_is_refused(tmp_path: Path) -> None:
    from srift.validation.pipeline import check_user_models

    with pytest.raises(InvalidInput) as info:
        check_user_models(_options_for(tmp_path, "skips"))
    assert info.value.field == "model[0]"
    assert "skipped.weight, skipped.bias" in info.value.detail and "DDP" in info.value.detail
    assert "To fix:" in str(info.value)
    check_user_models(_options_for(tmp_path, "whole"))
    check_user_models(_options_for(tmp_path, "frozen"))


def test_a_user_model_that_cannot_take_a_step_names_the_option_at_fault(tmp_path: Path) -> None:
    from srift.validation.pipeline import check_user_models

    with pytest.raises(InvalidInput) as info:
        check_user_models(_options_for(tmp_path, "whole", "wrong_width"))
    assert info.value.field == "input[0]"


def test_cli_validate_refuses_a_model_without_its_input() -> None:
    from srift.cli import main

    with pytest.raises(SystemExit) as info:
        main(["validate", "--quick", "--model", "mymodels:build"])
    assert info.value.code == 2


def test_a_spec_with_locations_adds_fleets_across_its_link_and_keeps_the_rest_in_one_location() -> None:
    from srift.testbed import load_spec
    from srift.validation.context import GEO_SPEC
    from srift.validation.steps import testbed_links

    spec = load_spec(GEO_SPEC, cores=2)
    check_spec(spec)
    cases = build_matrix(spec, models=["cnn"], full=False, max_cores=1.5)
    across = [c.fleet for c in cases if c.fleet.across]
    assert [f.label() for f in across] == [
        "1×tbv.small@32 [east] + 1×tbv.small@32 [west]",
        "2×tbv.small@32 [east] + 2×tbv.small@32 [west]",
        "1×tbv.large@32 [east] + 1×tbv.large@32 [west]",
        "1×tbv.small@32 [east] + 1×tbv.large@32 [east] + 1×tbv.small@32 [west] + 1×tbv.large@32 [west]",
    ]
    # 2 + 2 large hosts would need 2 cores, above the cap.
    assert all(f.cores(spec) <= 1.5 for f in across)
    inside = [c.fleet for c in cases if not c.fleet.across]
    assert inside and all(f.locations == ("east",) and f.hosts <= 4 for f in inside)
    assert max(f.hosts for f in inside if not f.mixed) == 2  # east holds two hosts of each type
    assert testbed_links(spec) == [
        {"from": "testbed/east", "to": "testbed/west", "bandwidth_gbps": 0.1, "rtt_ms": 20.0}
    ]
    assert not any(
        c.fleet.across
        for c in build_matrix(parse_spec(_spec_doc()), models=["cnn"], full=False, max_cores=1.5)
    )


def _spec_doc() -> dict[str, object]:
    import yaml

    return dict(yaml.safe_load(DEFAULT_SPEC.read_text()))
