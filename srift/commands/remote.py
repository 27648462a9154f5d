"""Shared by commands that read a request: load the request file, or send it to a server (`--url`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from srift.errors import (
    Conflict,
    ErrorAnswer,
    ExternalServiceError,
    Forbidden,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    SriftError,
    Unauthorized,
    foreign_answer,
    server_root,
)

if TYPE_CHECKING:
    from rich.console import Console

_BY_STATUS: dict[int, type[SriftError]] = {
    400: InvalidInput,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
}


def load_request_file(path: Path, *, field: str = "FILE") -> Any:
    """Parse a YAML or JSON request file; a missing, unreadable or malformed file is InvalidInput naming
    `field` (the argument or option that gave the path: FILE, or e.g. --profile)."""
    import json

    import yaml

    try:
        text = read_file_text(path, field=field)
        if text.lstrip().startswith(("{", "[")):
            try:
                # a JSON request (often a whole profile inline): no YAML parse
                return json.loads(
                    text, object_pairs_hook=lambda kv: _unique(kv, path=path, field=field, lines=None)
                )
            except json.JSONDecodeError:
                pass
        return yaml.load(text, Loader=_unique_key_loader(path, field=field))
    except yaml.YAMLError as exc:
        raise InvalidInput(
            f"{path} is not valid YAML/JSON: {_yaml_problem(exc)}", hint="fix the syntax there", field=field
        ) from exc


def read_file_text(path: Path, *, field: str) -> str:
    """The text of a file the command line names (`srift.documents.read_text_file`: UTF-8, or UTF-16/32
    with a BOM); a missing or unreadable file is InvalidInput on `field` saying so in words."""
    from srift.documents import read_text_file

    try:
        return read_text_file(path, field=field)
    except FileNotFoundError as exc:
        raise InvalidInput(
            f"cannot read {path}: the file does not exist", hint="check the path", field=field
        ) from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", hint="check the path", field=field) from exc


def _unique(
    pairs: list[tuple[Any, Any]], *, path: Path, field: str, lines: list[int] | None
) -> dict[Any, Any]:
    """The mapping of `pairs` (its keys at `lines`, 1-based, for YAML); a key given twice is InvalidInput on
    `field` naming the key: with one of two values silently kept, `market: spot` above `market: on_demand`
    would plan what the reader of the file does not see."""
    seen: dict[Any, int] = {}
    for k, (key, _) in enumerate(pairs):
        if key in seen:
            where = "" if lines is None else f" (lines {lines[seen[key]]} and {lines[k]})"
            if lines is not None and lines[seen[key]] == lines[k]:
                where = f" (line {lines[k]})"
            raise InvalidInput(
                f"{path} gives {key!r} twice in one mapping{where}", hint="keep one of the two", field=field
            )
        seen[key] = k
    return dict(pairs)


def _unique_key_loader(path: Path, *, field: str) -> Any:
    """PyYAML's safe loader (the C one where built) refusing a key given twice in one mapping (`_unique`),
    where PyYAML keeps the last; a key a merge (`<<: *base`) brings in may still be overridden."""
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class UniqueKeyLoader(base):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            keys = [
                key
                for key, _ in node.value
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge"
            ]
            pairs = [(self.construct_object(key), None) for key in keys]
            _unique(pairs, path=path, field=field, lines=[key.start_mark.line + 1 for key in keys])
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _yaml_problem(exc: Any) -> str:
    """A YAML parse error on one line (every CLI error is one line): what is wrong and where, as an editor
    counts (`did not find expected node content at line 2, column 1`), instead of PyYAML's several lines
    quoting the text."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def request_body(file: Path | None, *, command: str) -> dict[str, Any]:
    """The request mapping in FILE of `srift <command> FILE`: InvalidInput naming FILE when none is given,
    or when the file holds something other than a mapping."""
    if file is None:
        raise InvalidInput(
            "no request file given", hint=f"run `srift {command} --example > r.yaml`", field="FILE"
        )
    body = load_request_file(file)
    if not isinstance(body, dict):
        raise InvalidInput(
            f"{file} must hold a mapping", hint=f"see `srift {command} --example`", field="FILE"
        )
    return body


def put_given(body: dict[str, Any], **fields: Any) -> None:
    """Set each field the command line gave (not None) in the request body, over the file's value."""
    body.update({key: value for key, value in fields.items() if value is not None})


def answer_request(
    body: dict[str, Any],
    *,
    url: str | None,
    path: str,
    token: str | None,
    local: Callable[[dict[str, Any]], Any],
    busy: Console,
    status: str,
    timeout_s: float = 300,
) -> Any:
    """The answer to a request: POSTed to the server at `url` (`path` under it, with the token given or
    $SRIFT_TOKEN), else computed here by `local` with `status` spinning on `busy` meanwhile."""
    if url:
        return call_api("POST", url, path, body=body, token=env_token(token), timeout_s=timeout_s)
    with busy.status(status, spinner="dots"):
        return local(body)


def env_token(token: str | None) -> str | None:
    """The token --token gave, else $SRIFT_TOKEN (the commands whose --token has no envvar of its own)."""
    import os

    return token or os.environ.get("SRIFT_TOKEN")


CLI_TOKEN_HINT = (
    "pass a token with --token TOKEN or set SRIFT_TOKEN (on the server: "
    "`srift tokens create --scope write --name cli`)"
)
"""The CLI's answer to a 401: its own option, not the server's header (which the CLI sets itself)."""

FOREIGN_HINT = (
    "point --url at the root of a running `srift serve`, e.g. http://127.0.0.1:8000 (behind a proxy: see "
    "its log)"
)
"""The CLI's answer to a server that answers no JSON: --url names something else."""


def call_api(
    method: str, base: str, path: str, *, token: str | None, body: Any = None, timeout_s: float = 300
) -> Any:
    """Send one request to `base` + `path` (path includes /v1) and return the JSON answer; a `base`
    without a scheme (`127.0.0.1:8000`) is taken as http, one ending in /v1 as the server's root. An answer
    that is no JSON (not a Srift server at `base`) is ExternalServiceError.

    A 4xx answer in Srift's {error, detail, hint, field} shape is raised as the matching SriftError, so the
    CLI prints and exits the same way as when it computes locally.
    """
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = server_root(base)
    try:
        response = httpx.request(method, base + path, json=body, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ExternalServiceError(
            f"cannot reach {base} ({exc})", hint="check --url and that the server runs"
        ) from exc
    foreign = foreign_answer(response, url=base + path, hint=FOREIGN_HINT)
    if foreign is not None:
        raise foreign
    if response.status_code < 400:
        return response.json() if response.content else None
    answer = ErrorAnswer.read(response, detail="request failed", hint="see the server log")
    detail, hint, field = answer.detail, answer.hint, answer.field
    if response.status_code == 401:
        hint = CLI_TOKEN_HINT if not token else f"the token was refused: {CLI_TOKEN_HINT}"
    if answer.error == "infeasible":
        raise _infeasible(response, detail=detail, hint=hint, field=field)
    kind = _BY_STATUS.get(response.status_code)
    if kind is None:
        raise ExternalServiceError(f"{response.status_code}: {detail}", hint=hint, field=field)
    raise kind(detail, hint=hint, field=field)


def _infeasible(response: Any, *, detail: str, hint: str, field: str | None) -> SriftError:
    """A 409 "no plan meets the limits" as the solver raised it on the server (`PlanInfeasible`), with the
    nearest relaxations and whether that is proven, so a caller of the CLI's code sees what a local solve
    gives; a body without them (an older server) keeps empty relaxations and `proven` False."""
    from srift.optimize.solver import PlanInfeasible

    body = response.json()  # a JSON object: ErrorAnswer.read found its "error"
    raw = body.get("relaxations")
    relaxations = {
        str(k): (float(v) if isinstance(v, int | float) else None)
        for k, v in (raw.items() if isinstance(raw, dict) else ())
    }
    proven = body.get("proven") is True
    return PlanInfeasible(detail, hint=hint, field=field, relaxations=relaxations, proven=proven)
