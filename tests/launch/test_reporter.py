"""The helper's background reporter: it never slows or fails the training step, whether the server is
down or hangs, retries what failed, and marks its last report final."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from srift.launch.helper import IterationReporter, NullReporter


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Recorder(ThreadingHTTPServer):
    def __init__(self, fail_first: int = 0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.headers_seen: list[str] = []
        self.fail_first = fail_first
        self.final = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    server: _Recorder

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.headers_seen.append(self.headers.get("Authorization", ""))
        if self.server.fail_first > 0:
            self.server.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        self.server.bodies.append(body)
        if body["final"]:
            self.server.final.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder(request: pytest.FixtureRequest) -> Iterator[_Recorder]:
    server = _Recorder(fail_first=getattr(request, "param", 0))
    # shutdown() waits for serve_forever's next check, every poll_interval (0.5 s by default)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class _Clock:
    """An injected clock: each tick of the training loop advances it by `step_s`."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _train(reporter: IterationReporter, clock: _Clock, steps: int, step_s: float = 0.25) -> None:
    for step in range(steps):
        clock.now += step_s
        reporter.tick(step)


def test_every_step_arrives_once_with_the_token_and_the_last_report_is_final(recorder: _Recorder) -> None:
    clock = _Clock()
    reporter = IterationReporter(
        url=f"http://127.0.0.1:{recorder.server_port}",
        clock=clock,
        run_id=4,
        token="srift_run_x",
        plan_id=9,
        batch_steps=16,
        flush_every_s=0.01,
    )
    _train(reporter, clock, 101)
    assert reporter.close(timeout_s=30)
    steps = [s["step"] for b in recorder.bodies for s in b["steps"]]
    assert sorted(steps) == list(range(1, 101))  # the first tick only starts the clock
    assert all(s["iteration_s"] == pytest.approx(0.25) for b in recorder.bodies for s in b["steps"])
    assert recorder.bodies[-1]["final"] and sum(b["final"] for b in recorder.bodies) == 1
    assert {b["plan_id"] for b in recorder.bodies} == {9}
    assert set(recorder.headers_seen) == {"Bearer srift_run_x"}
    assert reporter.sent == 100 and reporter.dropped == 0


@pytest.mark.parametrize("recorder", [2], indirect=True)
def test_a_failed_report_is_sent_again(recorder: _Recorder) -> None:
    clock = _Clock()
    reporter = IterationReporter(
        url=f"http://127.0.0.1:{recorder.server_port}",
        clock=clock,
        run_id=4,
        token="t",
        batch_steps=8,
        flush_every_s=0.01,
    )
    _train(reporter, clock, 9)
    assert reporter.close(timeout_s=60)
    assert reporter.failures == 2
    assert sorted(s["step"] for b in recorder.bodies for s in b["steps"]) == list(range(1, 9))


def test_a_server_that_is_down_never_fails_or_holds_the_step() -> None:
    clock = _Clock()
    reporter = IterationReporter(
        url=f"http://127.0.0.1:{_free_port()}",
        clock=clock,
        run_id=1,
        token="t",
        batch_steps=4,
        flush_every_s=0.01,
        max_pending=50,
    )
    _train(reporter, clock, 2000)
    assert reporter.close(timeout_s=0.5) is False
    assert reporter.failures >= 1 and reporter.sent == 0
    assert reporter.last_error is not None and "Connect" in reporter.last_error


def test_a_server_that_hangs_does_not_hold_the_step() -> None:
    """The sender is stuck inside a request the server never answers; the loop's ticks still return."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    connected = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        connected.set()

    threading.Thread(target=accept, daemon=True).start()
    clock = _Clock()
    reporter = IterationReporter(
        url=f"http://127.0.0.1:{listener.getsockname()[1]}",
        clock=clock,
        run_id=1,
        token="t",
        batch_steps=1,
        flush_every_s=0.01,
        timeout_s=2.0,
    )
    _train(reporter, clock, 2)
    assert connected.wait(30)
    _train(reporter, clock, 5000)  # would hang (pytest-timeout) if a tick waited for the network
    assert reporter._queue.qsize() >= 4999
    assert reporter.close(timeout_s=0.1) is False
    for conn in held:
        conn.close()
    listener.close()


def test_ranks_other_than_0_and_untracked_runs_report_nothing() -> None:
    env = {"SRIFT_URL": "http://x", "SRIFT_RUN_ID": "3", "SRIFT_RUN_TOKEN": "t", "RANK": "1"}
    assert isinstance(IterationReporter.from_env(env=env), NullReporter)
    assert isinstance(IterationReporter.from_env(env={"RANK": "0"}), NullReporter)
    quiet = NullReporter()
    quiet.tick(0)
    assert quiet.close()
