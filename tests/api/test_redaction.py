"""No token or secret reaches a log: messages, arguments, tracebacks, uvicorn's access log and the API's
own error logging are scrubbed."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient
from uvicorn.logging import AccessFormatter

from srift.api.app import create_app
from srift.db.session import session_factory
from srift.db.tokens import Scope, create_token
from srift.redaction import RedactingFilter, install_log_redaction, redact
from srift.settings import Settings

API_TOKEN = "srift_Zk3vV9yQm1u0Jx7bL2cN8pR4sT6wY5aE1fG0hI3kM9o"
JOB_TOKEN = "srift_job_Q1w2E3r4T5y6U7i8O9p0AsDfGhJkL"


@pytest.fixture
def redacting() -> Iterator[None]:
    install_log_redaction()
    yield


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"token {API_TOKEN} created", API_TOKEN),
        (f"job token={JOB_TOKEN}", JOB_TOKEN),
        ("Authorization: Bearer abcdef123456789", "abcdef123456789"),
        ("headers={'authorization': 'Bearer qwertyuiop1234'}", "qwertyuiop1234"),
        ("GET /v1/health?token=hunter2hunter2 HTTP/1.1", "hunter2hunter2"),
        ("postgresql+psycopg://srift:s3cretpw@db:5432/srift", "s3cretpw"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI/K7MDENG"),
        ('{"password": "pa55word!"}', "pa55word!"),
    ],
)
def test_redact_hides_secrets(text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned and "***" in cleaned


def test_redact_keeps_ordinary_text() -> None:
    text = "plan 7: 4×p3.2xlarge@64 busbw_gbps=12.5 token_hash column, tokens: 3"
    assert redact(text) == text


def test_log_records_are_scrubbed(redacting: None, caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("srift.test.redaction")
    with caplog.at_level(logging.INFO):
        log.info("created %s for %s", API_TOKEN, "ci")
        log.warning("worker got %(token)s", {"token": JOB_TOKEN})
        log.info("header Authorization: Bearer %s", API_TOKEN)
        log.error("failed: %s", ValueError(f"bad token {API_TOKEN}"))
        try:
            raise RuntimeError(f"boom with {JOB_TOKEN}")
        except RuntimeError:
            log.exception("crashed")
    text = caplog.text
    assert "created srift_*** for ci" in text
    assert API_TOKEN not in text and JOB_TOKEN not in text
    assert API_TOKEN[6:] not in text and JOB_TOKEN[10:] not in text
    assert "RuntimeError" in text and "crashed" in text


def test_uvicorn_access_log_is_scrubbed_and_still_formats(redacting: None) -> None:
    record = logging.getLogger("uvicorn.access").makeRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5555", "GET", f"/v1/plans?token={API_TOKEN}", "1.1", 200),
        None,
    )
    line = AccessFormatter(fmt="%(client_addr)s %(request_line)s %(status_code)s", use_colors=False).format(
        record
    )
    assert API_TOKEN not in line and "GET /v1/plans?token=" in line and "200" in line


def test_redacting_filter_on_a_handler() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "key %s", (API_TOKEN,), None)
    assert RedactingFilter().filter(record) is True
    assert API_TOKEN not in record.getMessage()


def test_api_error_logs_carry_no_token(
    settings: Settings, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with session_factory(db_url)() as s:
        _, plain = create_token(session=s, name="ci", scope=Scope.WRITE)
        s.commit()
    app = create_app(settings)
    router = APIRouter()

    @router.post("/explode")
    def explode() -> None:
        raise RuntimeError(f"downstream rejected {plain}")

    app.include_router(router)
    with caplog.at_level(logging.DEBUG), TestClient(app, raise_server_exceptions=False) as c:
        r = c.post(f"/explode?token={plain}", headers={"Authorization": f"Bearer {plain}"})
        assert r.status_code == 500 and plain not in r.text
        c.post("/v1/does-not-exist", headers={"Authorization": f"Bearer {plain}"})
    assert "unhandled error" in caplog.text
    assert plain not in caplog.text and plain[6:20] not in caplog.text


def test_every_cli_process_scrubs_its_logs() -> None:
    script = (
        "import logging\n"
        "from srift.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "logging.basicConfig()\n"
        f"logging.getLogger('srift.worker').warning('posting with %s', {API_TOKEN!r})\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "posting with srift_***" in out.stderr and API_TOKEN not in out.stderr
