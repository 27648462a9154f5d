"""The headless browser the dashboard's tests and benchmarks drive (Playwright launches it; it is a system
package, see `make system-deps`)."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Headless, no sandbox (CI runs as root), no GPU, and no traffic of Chromium's own: a test's only network
peer is the server it started."""
