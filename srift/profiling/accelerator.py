"""Names of the device a profile was measured on: CUDA device name, or CPU model plus thread count."""

from __future__ import annotations

import platform
import re
from pathlib import Path

MAX_NAME_CHARS = 200


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or the platform), whitespace collapsed."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    name = match.group(1) if match else (platform.processor() or platform.machine() or "unknown")
    return " ".join(name.split())


def cpu_accelerator_name(threads: int) -> str:
    """E.g. "cpu:Intel(R) Xeon(R) Processor @ 2.50GHz:2t"."""
    suffix = f":{threads}t"
    return "cpu:" + cpu_model()[: MAX_NAME_CHARS - 4 - len(suffix)] + suffix
