"""Browser-test harness: a live Srift server (uvicorn in a thread) on the embedded default; headless Chromium.

The server runs on a fresh SQLite file bootstrapped like `make run` (migrations, shipped catalog and bandwidth
models) plus stored profiles (T4, V100, A10G), probe samples on one type, and a write token. Pages get the
token through localStorage, as a user would paste it. Every request leaving 127.0.0.1 is blocked and
recorded, so a page that needs the internet fails. Screenshots land in test-artifacts/dashboard/.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_harness import (
    ARTIFACTS,
    Browsed,
    LiveServer,
    probe_records,
    profile_document,
)

from srift.api.app import create_app
from srift.api.auth import Scope, create_token
from srift.bandwidth.samples import store_samples
from srift.bootstrap import bootstrap
from srift.db.session import get_engine, transaction
from srift.domain.profile_document import read_profile
from srift.settings import Settings
from srift.testing.browser import CHROMIUM, CHROMIUM_ARGS
from srift.testing.server import serving_in_thread

NETWORK_SCHEMES = ("http", "https", "ws", "wss")
"""The schemes of requests that could leave the machine (`browsed` records those not for the live server)."""
OFFLINE_ARGS = ("--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1")
"""Every other host's requests go to a proxy on the discard port, where nothing listens: they fail at once."""


def _store_profiles(url: str, model: str) -> list[int]:
    from srift.profiling.store import save_profile

    documents = [
        profile_document(model=model, accelerator="T4", speed=1.0),
        profile_document(model=model, accelerator="V100", speed=2.2),
        profile_document(model=model, accelerator="A10G", speed=1.8),
    ]
    with transaction(url) as session:
        return [save_profile(session=session, profile=read_profile(d)) for d in documents]


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("dashboard")
    settings = Settings(
        database_url=f"sqlite:///{root / 'srift.db'}", data_dir=root / "data", models_dir=root / "models"
    )
    bootstrap(settings)
    url = settings.resolved_database_url
    model = "resnet50-dashboard"
    profile_ids = _store_profiles(url, model)
    with transaction(url) as session:
        store_samples(session=session, records=probe_records(), origin="jsonl")
    with transaction(url) as session:
        _, token = create_token(session=session, name="dashboard-tests", scope=Scope.WRITE)
    with serving_in_thread(create_app(settings)) as base_url:
        yield LiveServer(base_url, token, model, profile_ids, settings)
    get_engine(url).dispose()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser_context(live_server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Chromium profile for the session, kept on disk so that pages share its HTTP cache and V8's cache
    of compiled scripts: an in-memory (incognito) context compiled Plotly's 4.8 MB again on every new page,
    1.5 s for each chart page of a test, against 0.4 s from the third load on. Chromium sends every request
    for another host to a proxy on a closed port (the loopback is never proxied), so nothing leaves the
    machine; `browsed` records such requests. (Intercepting requests instead, page.route, turns the HTTP
    cache off.)"""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (`make system-deps`); browser tests never skip"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            args=[*CHROMIUM_ARGS, *OFFLINE_ARGS],
            viewport={"width": 1440, "height": 1000},
        )
        context.add_init_script(
            f"window.localStorage.setItem('srift.token', {json.dumps(live_server.token)});"
        )
        yield context
        context.close()


@pytest.fixture
def browsed(
    browser_context: Any, live_server: LiveServer, artifacts: Path, request: pytest.FixtureRequest
) -> Iterator[Browsed]:
    """The session's tab, blank, with this test's listeners: what it logs is this test's alone.

    Tests share one tab and each loads its pages afresh (new document, scripts and DOM; the tab is left on
    about:blank after each test): a new tab per test started a renderer process of its own, which compiled
    Plotly again (a chart page took 0.37 s in a new tab against 0.21 s in the same one). So a test adds no
    listener of its own to the page (it would outlive the test): what the page sent is in `requests`."""
    page = next((p for p in browser_context.pages if not p.is_closed()), None) or browser_context.new_page()
    page.set_default_timeout(45_000)
    result = Browsed(page=page, server=live_server, artifacts=artifacts)

    def record(sent: Any) -> None:
        url = sent.url
        result.requests.append(f"{sent.method} {url}")
        if url.split(":", 1)[0] in NETWORK_SCHEMES and not url.startswith(live_server.url + "/"):
            result.offhost_requests.append(url)

    def console(msg: Any) -> None:
        if msg.type == "error":
            result.console_errors.append(msg.text)

    def uncaught(exc: Any) -> None:
        result.console_errors.append(f"uncaught: {exc}")

    listeners = (("request", record), ("console", console), ("pageerror", uncaught))
    for event, listener in listeners:
        page.on(event, listener)
    yield result
    try:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            result.screenshot(f"FAILED-{request.node.name}")
    finally:
        for event, listener in listeners:
            page.remove_listener(event, listener)
        try:
            page.goto("about:blank")
        except Exception:
            page.close()  # a tab that cannot leave its page (crashed): the next test opens a new one
            raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test item, so fixtures can screenshot failed tests."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
