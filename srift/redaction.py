"""Keeps secrets out of logs: API and job tokens, Authorization headers, URL passwords, key=value secrets.

`install_log_redaction()` wraps the process's log-record factory once, so every record from every logger
(ours, uvicorn's access log, libraries') is scrubbed before any handler formats it. `RedactingFilter` does
the same for a single handler where the factory cannot be used.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

MASK = "***"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"srift_(?:job_)?[A-Za-z0-9_\-]{6,}"), "srift_" + MASK),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}"), r"\1 " + MASK),
    (re.compile(r"(?i)(authorization['\"]?\s*[:=,]\s*\(?['\"]?)[^'\"\s,)}]+"), r"\1" + MASK),
    (re.compile(r"(?i)(://[^/\s:@]+:)[^@/\s]+@"), r"\1" + MASK + "@"),
    (
        re.compile(
            r"(?i)(?<![a-z0-9])(password|passwd|secret|api_key|apikey|access_key|secret_access_key|session_token|token)"
            r"(['\"]?\s*[:=]\s*['\"]?)[^\s'\"&,;}]+"
        ),
        r"\1\2" + MASK,
    ),
)

_installed = False


def redact(text: str) -> str:
    """Return `text` with every secret-looking value replaced by ***."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    try:
        text = str(value)
    except Exception:
        return value
    cleaned = redact(text)
    return cleaned if cleaned != text else value


def redact_record(record: logging.LogRecord) -> None:
    """Scrub a record in place: message, arguments (keeping their shape) and any traceback text."""
    if isinstance(record.msg, str):
        record.msg = redact(record.msg)
    else:
        record.msg = _redact_value(record.msg)
    if isinstance(record.args, Mapping):
        record.args = {k: _redact_value(v) for k, v in record.args.items()}
    elif isinstance(record.args, tuple):
        record.args = tuple(_redact_value(a) for a in record.args)
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)


class RedactingFilter(logging.Filter):
    """A handler filter that scrubs each record; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def install_log_redaction() -> None:
    """Make every log record in this process pass through `redact_record` (idempotent)."""
    global _installed
    if _installed:
        return
    previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            redact_record(record)
        except Exception:  # withhold a message we cannot scrub rather than risk leaking it
            record.msg, record.args = "<log message withheld: redaction failed>", ()
        return record

    logging.setLogRecordFactory(factory)
    _installed = True
