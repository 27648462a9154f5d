"""Request files in the encodings editors and shells write: UTF-8, UTF-8 with a BOM, UTF-16 with a BOM
(Windows PowerShell's `>`) are read everywhere a request file is read; anything else is a clear error."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import pytest

from srift.documents import read_text_file
from srift.errors import InvalidInput
from srift.optimize.synthetic import synthetic_profile

TEXT = '{"name": "Grüße", "global_batch": 256}\n'
ENCODINGS = {
    "utf-8": TEXT.encode(),
    "utf-8 with BOM": codecs.BOM_UTF8 + TEXT.encode(),
    "utf-16 LE with BOM": codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"),
    "utf-16 BE with BOM": codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
    "utf-32 LE with BOM": codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"),
}


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_every_supported_encoding_reads_the_same_text(tmp_path: Path, name: str) -> None:
    path = tmp_path / "request.json"
    path.write_bytes(ENCODINGS[name])
    assert read_text_file(path) == TEXT


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (TEXT.encode("latin-1"), TEXT.index("ü")),
        (TEXT.encode("utf-16-le"), 1),
        (codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le") + b"\x00", None),
    ],
    ids=["latin-1", "utf-16 without BOM", "truncated utf-16"],
)
def test_anything_else_is_invalid_input_naming_the_byte(
    tmp_path: Path, data: bytes, offset: int | None
) -> None:
    path = tmp_path / "request.json"
    path.write_bytes(data)
    with pytest.raises(InvalidInput) as err:
        read_text_file(path, field="file")
    assert err.value.field == "file" and str(path) in err.value.detail
    assert "UTF-8" in err.value.hint and "UTF-16" in err.value.hint
    if offset is not None:
        assert f"at offset {offset}" in err.value.detail


def _cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from srift.cli import main
    from srift.settings import get_settings

    monkeypatch.setenv("SRIFT_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    return main


def test_a_utf16_request_file_plans_and_a_latin1_one_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from srift.settings import get_settings

    main = _cli(tmp_path, monkeypatch)
    request = {
        "profiles": [synthetic_profile("resnet50", "T4").to_dict()],
        "global_batch": 64,
        "iterations": 1000,
        "objective": "min_cost",
        "provider": "aws",
        "region": "us-east-1",
        "market": "spot",
        "availability": {"g4dn.xlarge": 16},
        "batch_policy": "pow2",
    }
    try:
        path = tmp_path / "plan.json"
        path.write_bytes(codecs.BOM_UTF16_LE + json.dumps(request, indent=2).encode("utf-16-le"))
        with pytest.raises(SystemExit) as done:
            main(["plan", str(path), "--json"])
        out = capsys.readouterr().out
        assert done.value.code == 0, out
        assert json.loads(out)["choices"][0]["instance_type"] == "g4dn.xlarge"
        path.write_bytes(json.dumps({**request, "note": "Grüße"}, ensure_ascii=False).encode("latin-1"))
        for verb in ("plan", "predict"):
            with pytest.raises(SystemExit) as done:
                main([verb, str(path)])
            err = capsys.readouterr().err
            assert done.value.code == 2, err
            assert "not UTF-8 text" in err and "To fix" in err and "Traceback" not in err
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["plan"], "FILE"),
        (["predict"], "FILE"),
        (["jobs", "submit", "probe", "--file"], "--file"),
        (["jobs", "submit", "profile", "--file"], "--file"),
    ],
)
def test_a_yaml_syntax_error_is_one_line_naming_where(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    field: str,
) -> None:
    """Every CLI error is one line: a malformed request file says what and where (line, column as an editor
    counts) on it, not PyYAML's quoted excerpt over several lines; job files are read as plan files are,
    naming --file."""
    main = _cli(tmp_path, monkeypatch)
    path = tmp_path / "request.yaml"
    path.write_text("global_batch: 64\n  iterations: 5\n")
    with pytest.raises(SystemExit) as done:
        main([*argv, str(path)])
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert err.count("\n") == 1 and err.startswith(f"error: {field}: ")
    assert "request.yaml is not valid YAML/JSON: mapping values are not allowed" in " ".join(err.split())
    assert "at line 2, column 13. To fix: fix the syntax there." in " ".join(err.split())
    with pytest.raises(SystemExit) as done:
        main([*argv, str(tmp_path / "missing.yaml")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(f"error: {field}: cannot read ")
    assert "the file does not exist. To fix: check the path." in " ".join(err.split())


def test_a_key_given_twice_is_refused_not_silently_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan file that says `market: spot` and, further down, `market: on_demand` is refused naming both
    lines (YAML) or the key (JSON), as is a key twice in a nested mapping; a YAML merge's key may still be
    overridden."""
    from srift.commands.remote import load_request_file

    main = _cli(tmp_path, monkeypatch)
    path = tmp_path / "request.yaml"
    path.write_text("model: resnet50\nmarket: spot\nglobal_batch: 64\niterations: 10\nmarket: on_demand\n")
    with pytest.raises(SystemExit) as done:
        main(["plan", str(path)])
    err = capsys.readouterr().err
    assert done.value.code == 2
    twice = f"{path} gives 'market' twice in one mapping (lines 2 and 5)"
    assert " ".join(err.split()) == f"error: FILE: {twice}. To fix: keep one of the two."
    path.write_text("availability: {p3.8xlarge: 2, p3.8xlarge: 4}\n")
    with pytest.raises(InvalidInput, match=r"'p3.8xlarge' twice in one mapping \(line 1\)"):
        load_request_file(path)
    path.write_text('{"global_batch": 64, "iterations": 10, "iterations": 20}')
    with pytest.raises(InvalidInput, match="'iterations' twice in one mapping"):
        load_request_file(path, field="--file")
    path.write_text("base: &b {x: 1, y: 1}\nother:\n  <<: *b\n  x: 2\n")
    assert load_request_file(path)["other"] == {"x": 2, "y": 1}
