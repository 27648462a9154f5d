"""`srift profile import --accelerator NAME`: a name no catalog type has and no accelerator spec names is
refused (its times would never be used: every plan estimated instead, said only on its sources line); GPU
models, device names, specs, CPU types by name and the user's own imported hardware are accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srift.cli import main
from srift.optimize.synthetic import synthetic_profile

LAB_CATALOG = """\
provider: onprem
source: "Lab rate card"
as_of: 2026-11-01
instance_types:
  - name: lab-box
    gpu_model: MI300X
    gpu_count: 1
    gpu_memory_gib: 192
    vcpus: 32
    memory_gib: 256
    network_gbps: 100
    prices:
      lab-1: {on_demand: 3.0}
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A timing table and a layers profile, as the command's docstring makes them."""
    layers = tmp_path / "resnet50.json"
    layers.write_text(json.dumps(synthetic_profile("resnet50", "T4").to_dict()))
    table = tmp_path / "times.csv"
    table.write_text("batch,step_s\n8,0.21\n16,0.39\n32,0.76\n")
    return table, layers


def _import(
    capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], accelerator: str
) -> tuple[int, str]:
    table, layers = files
    out_file = table.with_suffix(".json")
    out_file.unlink(missing_ok=True)
    argv = ["profile", "import", str(table), "--layers", str(layers), "--accelerator", accelerator]
    code, _, err = _run(capsys, *argv, "--out", str(out_file), "--json")
    assert out_file.exists() == (code == 0), err
    return code, err


def test_an_accelerator_nothing_knows_is_refused_naming_the_option_and_the_choices(
    local: None, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: exit 0, a profile labelled TPU that no plan ever used for its times."""
    code, err = _import(capsys, files, "TPU")
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(
        "error: --accelerator: no instance type in the catalog has accelerator 'TPU' and no accelerator "
        "spec is named so. To fix: name a GPU model of the catalog (A100, A10G, "
    ), line
    assert "T4, V100) or, for a CPU type, the instance type; `srift catalog list` lists the types" in line
    code, err = _import(capsys, files, "V10")
    assert code == 2 and "(did you mean V100 or " in err, err


@pytest.mark.parametrize(
    "accelerator", ["T4", "Tesla T4", "NVIDIA A100-SXM4-80GB", "c5.4xlarge", "H200-SXM-141GB"]
)
def test_catalog_models_device_names_cpu_types_and_specs_are_accepted(
    local: None, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], accelerator: str
) -> None:
    code, err = _import(capsys, files, accelerator)
    assert code == 0, err


def test_the_users_own_hardware_is_accepted_once_imported_into_the_catalog(
    local: None, files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _import(capsys, files, "MI300X")
    assert code == 2 and "srift catalog import FILE` adds your own hardware" in err, err
    lab = tmp_path / "lab.yaml"
    lab.write_text(LAB_CATALOG)
    code, _, err = _run(capsys, "catalog", "import", str(lab))
    assert code == 0, err
    assert _import(capsys, files, "MI300X")[0] == 0
    assert _import(capsys, files, "lab-box")[0] == 0


def test_with_upload_the_servers_catalog_decides_not_this_machines(
    local: None, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `--upload URL --accelerator MI300X` refused here ("no instance type in the catalog has
    accelerator 'MI300X'") although the profile is for the server, whose catalog may hold the user's own
    MI300X types (POST /v1/profiles takes any accelerator). Now the profile is built, written and sent;
    nothing listens on port 9, so the upload is what fails."""
    table, layers = files
    out_file = table.with_suffix(".json")
    argv = ["profile", "import", str(table), "--layers", str(layers), "--accelerator", "MI300X"]
    code, _, err = _run(capsys, *argv, "--out", str(out_file), "--upload", "http://127.0.0.1:9")
    assert "no instance type in the catalog" not in err
    assert code != 0 and "could not reach http://127.0.0.1:9/v1/profiles" in err, err
    assert json.loads(out_file.read_text())["accelerator"] == "MI300X"
    code, _, err = _run(capsys, *argv, "--out", str(out_file))
    assert code == 2 and "no instance type in the catalog has accelerator 'MI300X'" in err, err
