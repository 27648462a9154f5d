"""`srift profile` end to end: bad factories exit 2 naming the culprit; a run writes and uploads a profile."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from srift.cli import main
from srift.domain.profile_document import read_profile

TM = "srift.profiling.testmodels"
BAD_TAIL = ["--input", f"{TM}:cnn_input", "--out"]
QUICK = ["--max-batch", "4", "--repeats", "1", "--warmup", "0", "--iterations", "2", "--threads", "1"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    out, err = capsys.readouterr()
    return int(caught.value.code or 0), out, err


@pytest.mark.parametrize(
    ("model", "input_", "needles"),
    [
        ("no_such_module_xyz:build", f"{TM}:cnn_input", ["no_such_module_xyz:build", "ModuleNotFoundError"]),
        (f"{TM}:cnn_input", f"{TM}:cnn_input", [f"{TM}:cnn_input", "TypeError"]),
        (f"{TM}:CNN_IMAGE", f"{TM}:cnn_input", [f"{TM}:CNN_IMAGE", "not a callable"]),
        (f"{TM}:cnn", f"{TM}:wide_mlp_input", [f"{TM}:wide_mlp_input", "RuntimeError", "conv2d"]),
        (f"{TM}:cnn", f"{TM}:nope", [f"{TM}:nope", "no attribute"]),
    ],
)
def test_bad_factories_exit_2_naming_factory_and_cause(
    model: str, input_: str, needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "p.json"
    code, _, err = _run(["profile", model, "--input", input_, "--out", str(out_file), *QUICK], capsys)
    assert code == 2
    flat = " ".join(err.split())
    for needle in needles:
        assert needle in flat, flat
    assert "To fix:" in flat
    assert not out_file.exists()


def test_a_factory_returning_the_wrong_type_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = tmp_path / "user_models.py"
    models.write_text("def build():\n    return {'not': 'a module'}\n")
    code, _, err = _run(
        ["profile", f"{models}:build", "--input", f"{TM}:cnn_input", "--out", str(tmp_path / "p.json")],
        capsys,
    )
    assert code == 2
    assert "build" in err and "returned dict, not a torch.nn.Module" in " ".join(err.split())


def test_exit_code_through_the_console_script(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from srift.cli import main; main()",
            "profile",
            "missing_mod_q:f",
            *BAD_TAIL,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "missing_mod_q:f" in result.stderr and "ModuleNotFoundError" in result.stderr


def test_profile_writes_a_valid_file_and_prints_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "out" / "seq.json"
    argv = [
        "profile",
        f"{TM}:sequential",
        "--input",
        f"{TM}:sequential_input",
        "--out",
        str(out_file),
        *QUICK,
    ]
    code, out, _ = _run([*argv, "--accelerator", "c5.large"], capsys)
    assert code == 0
    profile = read_profile(json.loads(out_file.read_text()))
    assert profile.model == "sequential" and profile.accelerator == "c5.large" and profile.max_batch == 4
    assert "max batch" in out and "ms per sample" in out and "6 trainable" in out
    assert "curve" in out and "segment" in out

    code, out, _ = _run([*argv, "--max-batch", "9", "--paper-curve"], capsys)
    assert code == 0
    profile = read_profile(json.loads(out_file.read_text()))
    assert profile.forward.batches == (1, 3, 6, 9)
    assert profile.extra["bend_checks"] is None
    assert "3 segments" in out and "split at" not in out


def test_upload_posts_to_a_running_server(
    live_server_url: str,
    write_headers: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out_file = tmp_path / "seq.json"
    argv = [
        "profile",
        f"{TM}:sequential",
        "--input",
        f"{TM}:sequential_input",
        "--out",
        str(out_file),
        *QUICK,
    ]
    code, _, err = _run([*argv, "--upload", live_server_url], capsys)
    assert code == 2 and "401" in err and "--token" in " ".join(err.split())
    assert out_file.exists()
    monkeypatch.setenv("SRIFT_TOKEN", write_headers["Authorization"].removeprefix("Bearer "))
    code, out, _ = _run([*argv, "--upload", live_server_url, "--model-name", "seq-net", "--json"], capsys)
    assert code == 0
    answer = json.loads(out)["uploaded"]
    assert answer["created"] is True and answer["model"] == "seq-net"
    import httpx

    stored = httpx.get(f"{live_server_url}/v1/profiles/{answer['id']}", headers=write_headers).json()
    assert stored["model"] == "seq-net" and stored == {"id": answer["id"], **json.loads(out_file.read_text())}


def test_layers_only_then_import_builds_a_profile_without_a_timing_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layers_file = tmp_path / "seq.layers.json"
    code, out, _ = _run(
        [
            "profile",
            f"{TM}:sequential",
            "--input",
            f"{TM}:sequential_input",
            "--layers-only",
            "--threads",
            "1",
            "--out",
            str(layers_file),
        ],
        capsys,
    )
    assert code == 0 and "6 trainable" in out and "srift profile import" in " ".join(out.split())
    doc = json.loads(layers_file.read_text())
    assert doc["kind"] == "layers" and doc["extra"]["iterations"] == 5
    assert [x["grad_bytes"] for x in doc["layers"]] == [(256 * 256 + 256) * 4] * 6
    assert [x["name"] for x in doc["layers"]] == [str(i) for i in (10, 8, 6, 4, 2, 0)]
    assert "measured" not in doc["extra"] and "max_batch" not in doc

    table = tmp_path / "v100.csv"
    table.write_text("batch,step_ms\n8,30\n32,90\n32,95\n64,170\n")
    out_file = tmp_path / "seq-v100.json"
    code, out, _ = _run(
        [
            "profile",
            "import",
            str(table),
            "--layers",
            str(layers_file),
            "--accelerator",
            "V100",
            "--out",
            str(out_file),
        ],
        capsys,
    )
    assert code == 0 and "assumptions" in out and "Kaplan" in out
    profile = read_profile(json.loads(out_file.read_text()))
    assert profile.accelerator == "V100" and profile.max_batch == 64 and profile.model == "sequential"
    assert profile.compute_s(32) == pytest.approx(0.0925)
    assert profile.straggler_cv == pytest.approx(0.052)
    assert [x.grad_bytes for x in profile.layers] == [x["grad_bytes"] for x in doc["layers"]]

    code, _, err = _run(
        [
            "profile",
            "import",
            str(table),
            "--layers",
            str(out_file),
            "--accelerator",
            "V100",
            "--out",
            str(tmp_path / "again.json"),
            "--json",
        ],
        capsys,
    )
    assert code == 0, err


def test_profile_cli_forms_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["profile", "--help"], capsys)
    assert code == 0 and "import" in out and "measure" in out
    code, out, _ = _run(["profile", "import", "--help"], capsys)
    assert code == 0 and "samples_per_s" in out
    out_file = tmp_path / "seq.json"
    code, _, _ = _run(
        [
            "profile",
            "measure",
            f"{TM}:sequential",
            "--input",
            f"{TM}:sequential_input",
            "--out",
            str(out_file),
            *QUICK,
        ],
        capsys,
    )
    assert code == 0 and read_profile(json.loads(out_file.read_text())).max_batch == 4
    code, _, err = _run(
        [
            "profile",
            f"{TM}:sequential",
            "--input",
            f"{TM}:sequential_input",
            "--layers-only",
            "--out",
            str(tmp_path / "l.json"),
            "--upload",
            "http://127.0.0.1:9",
        ],
        capsys,
    )
    assert code == 2 and "cannot be uploaded" in " ".join(err.split())
    code, _, err = _run(
        [
            "profile",
            "import",
            str(tmp_path / "nope.csv"),
            "--layers",
            str(out_file),
            "--accelerator",
            "T4",
            "--out",
            str(tmp_path / "x.json"),
        ],
        capsys,
    )
    assert code == 2 and "does not exist" in err and not (tmp_path / "x.json").exists()


def test_no_parameter_help_points_below_the_parameter_panels() -> None:
    """`srift profile import --help` described TABLE as "(see below)", but Typer prints the parameters after
    the command's description and nothing follows them (no command has an epilog): a parameter's help
    that points somewhere points above."""
    import typer

    from srift.cli import build_app

    def walk(command: object) -> Iterator[object]:
        yield command
        for sub in getattr(command, "commands", {}).values():
            yield from walk(sub)

    pointing_below = []
    for command in walk(typer.main.get_command(build_app())):
        if getattr(command, "epilog", None):
            continue
        for param in getattr(command, "params", []):
            if "below" in (getattr(param, "help", None) or ""):
                pointing_below.append(f"{getattr(command, 'name', '?')} {param.name}")
    assert pointing_below == []


def test_tf32_and_strict_fp32_are_refused_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--tf32 --strict-fp32` profiled under TF32 and labelled the profile tf32: --strict-fp32 was dropped
    without a word. Nothing is measured or written now."""
    out = tmp_path / "p.json"
    argv = ["profile", f"{TM}:cnn", "--input", f"{TM}:cnn_input", "--out", str(out), *QUICK]
    code, stdout, err = _run([*argv, "--tf32", "--strict-fp32"], capsys)
    assert code == 2 and stdout == "", err
    text = " ".join(err.split())
    assert text.startswith("error: strict_fp32: --tf32 and --strict-fp32 exclude each other. To fix: pick")
    assert not out.exists()
