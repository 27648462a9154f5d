"""CLI commands for the emulated testbed: `srift testbed up|down|status|exec|example`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from srift.commands.options import JsonFlag, add_group

if TYPE_CHECKING:
    from srift.testbed.core import TestbedStatus
    from srift.testbed.spec import TestbedSpec

console = Console()


def _root() -> Path:
    from srift.testbed.core import default_root

    return default_root()


Prefix = Annotated[
    str | None,
    typer.Option(
        "--prefix", help="testbed name prefix (default: the spec's `prefix`, or the only testbed that is up)"
    ),
]


def up(
    spec: Annotated[Path, typer.Option("--spec", help="testbed spec YAML (see `srift testbed example`)")],
    prefix: Annotated[str | None, typer.Option("--prefix", help="override the spec's prefix")] = None,
    no_register: Annotated[
        bool, typer.Option("--no-register", help="do not add the types to the catalog")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the status as JSON")] = False,
) -> None:
    """Create (or confirm) the testbed described by SPEC; running it again changes nothing.

    Example: `sudo srift testbed up --spec srift/testbed/examples/two-types.yaml --prefix tb`
    """
    from srift.testbed import Testbed, load_spec

    parsed = load_spec(spec)
    testbed = Testbed.up(parsed, root=_root(), prefix=prefix)
    snapshot: int | None = None
    if not no_register:
        snapshot = _register(testbed.spec)
    status = testbed.status()
    if as_json:
        typer.echo(json.dumps({**status.to_dict(), "catalog_snapshot": snapshot}, indent=2))
        return
    _print_status(status)
    if snapshot is not None:
        names = ", ".join(t.name for t in testbed.spec.types)
        console.print(f"catalog: registered {names} under provider testbed, region local")


def down(
    prefix: Prefix = None,
    as_json: Annotated[bool, typer.Option("--json", help="print what was removed as JSON")] = False,
) -> None:
    """Remove the testbed: its processes, namespaces, links, cgroups and state (also after a crash).

    Example: `sudo srift testbed down --prefix tb`
    """
    from srift.testbed import down as do_down

    report = do_down(prefix, root=_root())
    if as_json:
        typer.echo(json.dumps({"prefix": report.prefix, "removed": list(report.removed)}, indent=2))
        return
    console.print(f"testbed {report.prefix}: removed {len(report.removed)} resources")


def status(prefix: Prefix = None, as_json: JsonFlag = False) -> None:
    """Show each host's address, type, namespace and cgroup, and the switch.

    Example: `srift testbed status --json`
    """
    from srift.testbed import status as get_status
    from srift.testbed.state import known_prefixes

    root = _root()
    prefixes = [prefix] if prefix else known_prefixes(root)
    statuses = [get_status(p, root=root) for p in prefixes]
    if as_json:
        typer.echo(json.dumps([s.to_dict() for s in statuses], indent=2))
        return
    if not statuses:
        console.print("no testbed is up (bring one up with `srift testbed up --spec FILE.yaml`)")
    for s in statuses:
        _print_status(s)


def exec_(
    ctx: typer.Context,
    host: Annotated[str, typer.Argument(help="host name, as `srift testbed status` lists it")],
    prefix: Prefix = None,
) -> None:
    """Run a command inside HOST (its network namespace and cgroup); exits with the command's code.

    The command sees GLOO_SOCKET_IFNAME=eth0, OMP_NUM_THREADS and SRIFT_TESTBED_* (host, address, type).

    Example: `srift testbed exec small0 -- python -c "import os; print(os.environ['SRIFT_TESTBED_ADDR'])"`
    """
    from srift.errors import InvalidInput
    from srift.testbed import Testbed

    argv = list(ctx.args[1:] if ctx.args[:1] == ["--"] else ctx.args)
    if not argv:
        raise InvalidInput("no command given", hint="put the command after `--`", field="command")
    testbed = Testbed.attach(prefix, root=_root())
    proc = testbed.popen_in(host, argv, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        code = proc.wait()
    sys.exit(code)


def check(
    prefix: Prefix = None,
    seconds: Annotated[
        float, typer.Option("--seconds", min=0.5, max=30, help="length of each transfer")
    ] = 2.0,
    as_json: JsonFlag = False,
) -> None:
    """Measure TCP throughput and round trip from each host to the next, next to what the spec asks.

    Expected throughput is the smaller of the two link rates; expected round trip is the sum of the two
    types' delay_ms (each direction of a path sees their mean).

    Example: `srift testbed check --seconds 3`
    """
    from srift.testbed import Testbed, measure

    testbed = Testbed.attach(prefix, root=_root())
    rows = []
    hosts = testbed.hosts
    for a, b in zip(hosts, hosts[1:] + hosts[:1], strict=True):
        if a.name == b.name:
            continue
        tput = measure.throughput(testbed, a.name, b.name, seconds=seconds)
        rtt = measure.median_rtt_ms(testbed, a.name, b.name, count=10)
        rows.append(
            {
                "src": a.name,
                "dst": b.name,
                "expected_mbit": min(a.rate_mbit, b.rate_mbit),
                "measured_mbit": round(tput.rate_mbit, 1),
                "expected_rtt_ms": a.delay_ms + b.delay_ms,
                "measured_rtt_ms": round(rtt, 2),
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"testbed {testbed.prefix}: measured links")
    for col in ("src → dst", "Mbit/s asked", "Mbit/s measured", "RTT ms asked", "RTT ms measured"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            f"{r['src']} → {r['dst']}",
            f"{r['expected_mbit']:g}",
            f"{r['measured_mbit']:g}",
            f"{r['expected_rtt_ms']:g}",
            f"{r['measured_rtt_ms']:g}",
        )
    console.print(table)


def example() -> None:
    """Print the shipped example spec (two types differing in CPU quota and link rate).

    Example: `srift testbed example > tb.yaml`
    """
    from srift.testbed import example_spec_path

    typer.echo(example_spec_path().read_text(), nl=False)


def register(app: typer.Typer) -> None:
    """Add the `testbed` group."""
    tb = add_group(
        app,
        "testbed",
        help=(
            "Emulated cloud on this machine (needs root): hosts are network namespaces on veth links to a "
            "switch, each link shaped with tc (rate, delay, jitter, loss), each host in a cgroup with a CPU "
            "quota. `up` registers the spec's types in the catalog (provider `testbed`, region `local`).\n\n"
            "Example: `srift testbed example > tb.yaml && sudo srift testbed up --spec tb.yaml && "
            "srift testbed exec small0 -- ip -br addr`"
        ),
    )
    tb.command("up")(up)
    tb.command("down")(down)
    tb.command("status")(status)
    tb.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(exec_)
    tb.command("check")(check)
    tb.command("example")(example)


def _register(spec: TestbedSpec) -> int:
    from srift.commands.local import migrated_url
    from srift.db.session import transaction
    from srift.testbed.catalog import register_types

    with transaction(migrated_url()) as session:
        return register_types(session=session, spec=spec)


def _print_status(status: TestbedStatus) -> None:
    health = "[green]healthy[/]" if status.healthy else "[red]not healthy[/]"
    switch = ""
    if status.emulator == "userspace":
        switch = f", switch pid {status.switch_pid} ({'alive' if status.switch_alive else 'DEAD'})"
    table = Table(
        title=f"testbed {status.prefix}: {status.phase}, {health}, emulator {status.emulator}{switch}"
    )
    for col in ("host", "type", "address", "netns", "cgroup", "processes"):
        table.add_column(col)
    for h in status.hosts:
        table.add_row(
            h.name,
            h.type_name,
            h.address,
            "yes" if h.netns_present else "MISSING",
            "yes" if h.cgroups_present else "MISSING",
            str(h.processes),
        )
    console.print(table)
