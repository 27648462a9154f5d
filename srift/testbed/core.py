"""The Testbed: bring hosts up and down, run commands inside them, and report their status."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from srift.errors import Conflict, EnvironmentProblem, InvalidInput, NotFound
from srift.testbed import cgroups, network, system
from srift.testbed.spec import Emulator, TestbedSpec, parse_spec
from srift.testbed.state import StateFile, known_prefixes

SWITCH_READY_S = 15.0
_EXEC_SCRIPT = 'while [ "$1" != "--" ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


def default_root() -> Path:
    """Where state files live: <settings.data_dir>/testbed."""
    from srift.settings import get_settings

    return get_settings().data_dir / "testbed"


@dataclass(frozen=True, slots=True)
class Host:
    """One testbed host: its namespace, address, cgroup directories and type."""

    name: str
    type_name: str
    index: int
    address: str
    netns: str
    cgroups: tuple[str, ...]
    cpu_cores: float
    memory_mib: int | None
    rate_mbit: float
    delay_ms: float
    iface: str = network.HOST_IFACE
    location: str | None = None


@dataclass(frozen=True, slots=True)
class HostStatus:
    name: str
    type_name: str
    address: str
    netns_present: bool
    cgroups_present: bool
    processes: int


@dataclass(frozen=True, slots=True)
class TestbedStatus:
    """What `srift testbed status` prints."""

    __test__ = False

    prefix: str
    phase: str
    emulator: str
    healthy: bool
    hosts: tuple[HostStatus, ...]
    switch_pid: int | None
    switch_alive: bool
    switch_stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "phase": self.phase,
            "emulator": self.emulator,
            "healthy": self.healthy,
            "switch": {"pid": self.switch_pid, "alive": self.switch_alive, **self.switch_stats},
            "hosts": [
                {
                    "name": h.name,
                    "type": h.type_name,
                    "address": h.address,
                    "netns": h.netns_present,
                    "cgroups": h.cgroups_present,
                    "processes": h.processes,
                }
                for h in self.hosts
            ],
        }


@dataclass(frozen=True, slots=True)
class DownReport:
    prefix: str
    removed: tuple[str, ...]


class Testbed:
    """A testbed that is up (or partly up); build one with `Testbed.up(spec)` or `Testbed.attach(prefix)`.

    Commands run inside a host with `exec_in` (waits, returns a CompletedProcess) or `popen_in` (returns
    a Popen in its own session, so `os.killpg(p.pid, SIGTERM)` stops it and its children).
    """

    __test__ = False

    def __init__(self, state: dict[str, Any], store: StateFile) -> None:
        self.state = state
        self.store = store
        self.spec: TestbedSpec = parse_spec(state["spec"], cores=10**6)
        self.prefix: str = state["prefix"]
        self.emulator: str = state.get("emulator") or ""
        self.hosts: tuple[Host, ...] = tuple(self._host(h) for h in state["hosts"])

    def _host(self, h: Mapping[str, Any]) -> Host:
        t = self.spec.type_named(h["type"])
        return Host(
            name=h["name"],
            type_name=h["type"],
            index=h["index"],
            address=h["address"],
            netns=h["netns"],
            cgroups=tuple(h["cgroups"]),
            cpu_cores=t.cpu_cores,
            memory_mib=t.memory_mib,
            rate_mbit=t.rate_mbit,
            delay_ms=t.delay_ms,
            location=self.spec.location_of(h["name"]),
        )

    # ----- life cycle -------------------------------------------------------------------------------

    @classmethod
    def up(cls, spec: TestbedSpec, *, root: Path | None = None, prefix: str | None = None) -> Testbed:
        """Create the testbed (idempotent: an identical healthy one is returned as is).

        A partial or broken testbed of the same prefix is removed and rebuilt; a healthy one built from a
        different spec is a Conflict (run `down` first).
        """
        if prefix is not None:
            spec = spec.with_prefix(prefix)
        tools = system.require_tools()
        layout = cgroups.detect_layout()
        uses_memory = any(t.memory_mib is not None for t in spec.types)
        if uses_memory and layout.memory_parent is None:
            raise EnvironmentProblem(
                "the spec sets memory_mib but no memory cgroup controller is available",
                hint="drop memory_mib from the spec, or enable the memory controller",
            )
        store = StateFile(root or default_root(), spec.prefix)
        with store.locked() as lock_fd:
            existing = store.load()
            if existing is not None:
                if existing.get("phase") == "up" and _healthy(existing):
                    if existing.get("fingerprint") == spec.fingerprint():
                        return cls(existing, store)
                    raise Conflict(
                        f"testbed {spec.prefix!r} is already up with a different spec",
                        hint=f"run `srift testbed down --prefix {spec.prefix}` first, or use another prefix",
                    )
                _teardown(existing, store, tools=tools, layout=layout)
            else:
                _teardown({"prefix": spec.prefix, "resources": []}, store, tools=tools, layout=layout)
            state = _Builder(spec, store, tools, layout, lock_fd).build()
        return cls(state, store)

    @classmethod
    def attach(cls, prefix: str | None = None, *, root: Path | None = None) -> Testbed:
        """The testbed that is up under `prefix` (or the only one, when there is exactly one)."""
        root = root or default_root()
        prefix = resolve_prefix(prefix, root=root)
        store = StateFile(root, prefix)
        state = store.load()
        if state is None or "spec" not in state or "hosts" not in state:
            raise NotFound(
                f"no testbed {prefix!r} is up (no state in {store.path})",
                hint="bring one up with `srift testbed up --spec FILE.yaml`",
                field="prefix",
            )
        return cls(state, store)

    def down(self) -> DownReport:
        return down(self.prefix, root=self.store.root)

    def status(self) -> TestbedStatus:
        return _status(self.state, self.store)

    # ----- running commands -------------------------------------------------------------------------

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise NotFound(
            f"no host {name!r} in testbed {self.prefix!r}",
            hint=f"use one of: {', '.join(h.name for h in self.hosts)}",
            field="host",
        )

    def hosts_of_type(self, type_name: str) -> list[Host]:
        return [h for h in self.hosts if h.type_name == type_name]

    def host_env(self, name: str) -> dict[str, str]:
        """Variables every command in the host gets: which interface gloo/NCCL use, who the host is."""
        h = self.host(name)
        threads = str(max(1, math.ceil(h.cpu_cores)))
        return {
            "GLOO_SOCKET_IFNAME": h.iface,
            "TP_SOCKET_IFNAME": h.iface,
            "NCCL_SOCKET_IFNAME": h.iface,
            "OMP_NUM_THREADS": threads,
            "SRIFT_TESTBED_PREFIX": self.prefix,
            "SRIFT_TESTBED_HOST": h.name,
            "SRIFT_TESTBED_ADDR": h.address,
            "SRIFT_TESTBED_TYPE": h.type_name,
            "SRIFT_TESTBED_CPU_CORES": f"{h.cpu_cores:g}",
            "SRIFT_TESTBED_MEMORY_MIB": str(h.memory_mib or ""),
            "SRIFT_TESTBED_RATE_MBIT": f"{h.rate_mbit:g}",
            "SRIFT_TESTBED_LOCATION": h.location or "",
        }

    def command_in(self, name: str, argv: Sequence[str]) -> list[str]:
        """The argv that runs `argv` inside host `name`: its network namespace, then its cgroups."""
        if not argv:
            raise InvalidInput("no command given", hint="pass the command after `--`", field="command")
        h = self.host(name)
        procs = [str(Path(d) / "cgroup.procs") for d in h.cgroups]
        nsenter = shutil.which("nsenter")
        if nsenter:
            enter = [nsenter, f"--net={system.NETNS_DIR / h.netns}", "--"]
        else:
            enter = [shutil.which("ip") or "ip", "netns", "exec", h.netns]
        return ["/bin/sh", "-c", _EXEC_SCRIPT, "srift-exec", *procs, "--", *enter, *argv]

    def _env(self, name: str, env: Mapping[str, str] | None) -> dict[str, str]:
        merged = dict(os.environ)
        merged.update(self.host_env(name))
        if env:
            merged.update(env)
        return merged

    def exec_in(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        timeout_s: float | None = None,
        input_text: str | None = None,
        capture: bool = True,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` in host `name` and wait; on timeout its whole process group is killed."""
        proc = self.popen_in(
            name,
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture else None,
            text=True,
        )
        try:
            out, err = proc.communicate(input_text, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(list(argv), timeout_s or 0, out, err) from None
        except BaseException:
            _kill_group(proc)
            raise
        result = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
        if check:
            result.check_returncode()
        return result

    def popen_in(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        stdin: int | IO[Any] | None = subprocess.DEVNULL,
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
        text: bool = False,
    ) -> subprocess.Popen[Any]:
        """Start `argv` in host `name` in a new session (process group) and return at once."""
        return subprocess.Popen(
            self.command_in(name, argv),
            env=self._env(name, env),
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=text,
            start_new_session=True,
        )


def _kill_group(proc: subprocess.Popen[Any], *, grace_s: float = 2.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def resolve_prefix(prefix: str | None, *, root: Path) -> str:
    if prefix:
        return prefix
    prefixes = known_prefixes(root)
    if len(prefixes) == 1:
        return prefixes[0]
    if not prefixes:
        raise NotFound(
            "no testbed is up", hint="bring one up with `srift testbed up --spec FILE.yaml`", field="prefix"
        )
    raise InvalidInput(
        f"several testbeds are up ({', '.join(prefixes)})", hint="choose one with --prefix", field="prefix"
    )


# ----- building -------------------------------------------------------------------------------------


class _Builder:
    """Creates resources in order, journaling each one in the state file before making it."""

    def __init__(
        self,
        spec: TestbedSpec,
        store: StateFile,
        tools: system.Tools,
        layout: cgroups.CgroupLayout,
        lock_fd: int,
    ) -> None:
        self.spec = spec
        self.store = store
        self.tools = tools
        self.layout = layout
        self.fds = (lock_fd,)
        self.prefix = spec.prefix
        self.state: dict[str, Any] = {
            "version": 1,
            "prefix": spec.prefix,
            "phase": "creating",
            "fingerprint": spec.fingerprint(),
            "spec": spec.to_dict(),
            "emulator": None,
            "cgroup_version": layout.version,
            "created_at": time.time(),
            "pid": os.getpid(),
            "resources": [],
            "hosts": [],
        }
        for h in spec.hosts:
            t = spec.type_named(h.type_name)
            ns = network.netns_name(self.prefix, h.name)
            dirs = cgroups.planned_dirs(
                layout, network.cgroup_name(self.prefix, h.name), memory=t.memory_mib is not None
            )
            self.state["hosts"].append(
                {
                    "name": h.name,
                    "type": h.type_name,
                    "index": h.index,
                    "address": spec.address_of(h.name),
                    "netns": ns,
                    "mac": network.host_mac(h.index),
                    "port": network.port_name(h.index),
                    "cgroups": [str(d) for d in dirs],
                }
            )

    def _intend(self, resource: dict[str, Any]) -> None:
        self.state["resources"].append(resource)
        self.store.save(self.state)

    def _run(self, argv: list[str], *, input_text: str | None = None, what: str) -> None:
        system.run(argv, input_text=input_text, pass_fds=self.fds, what=what)

    def _netns(self, name: str) -> None:
        self._intend({"kind": "netns", "name": name})
        if not system.netns_exists(name):
            self._run([self.tools.ip, "netns", "add", name], what=f"creating namespace {name}")

    def _has_netem(self, ns: str) -> bool:
        probe = system.run(
            [self.tools.tc, "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            check=False,
            pass_fds=self.fds,
        )
        if probe.returncode != 0:
            return False
        system.run(
            [self.tools.tc, "-n", ns, "qdisc", "del", "dev", "lo", "root"], check=False, pass_fds=self.fds
        )
        return True

    def _choose_emulator(self, ns: str) -> str:
        wanted = self.spec.emulator
        needs = self.spec.needs_emulation
        if wanted is Emulator.USERSPACE:
            return "userspace"
        netem = self._has_netem(ns)
        if wanted is Emulator.NETEM:
            if not netem:
                raise EnvironmentProblem(
                    "the kernel has no netem qdisc (sch_netem)",
                    hint="load it (`modprobe sch_netem`) or set `emulator: userspace` (or auto) in the spec",
                )
            return "netem"
        if netem:
            return "netem"
        return "userspace" if needs else "bridge"

    def build(self) -> dict[str, Any]:
        spec, ip, tc = self.spec, self.tools.ip, self.tools.tc
        self.store.save(self.state)
        self.store.run_dir.mkdir(parents=True, exist_ok=True)
        sw = network.switch_netns(self.prefix)
        self._netns(sw)
        emulator = self._choose_emulator(sw)
        self.state["emulator"] = emulator
        netem = emulator == "netem"
        if self.layout.version == 2:
            cgroups.enable_v2_controllers(self.layout, memory=any(t.memory_mib for t in spec.types))
        for h in self.state["hosts"]:
            t = spec.type_named(h["type"])
            self._netns(h["netns"])
            for d in h["cgroups"]:
                self._intend({"kind": "cgroup", "path": d})
                cgroups.create(self.layout, Path(d), cpu_cores=t.cpu_cores, memory_mib=t.memory_mib)
            self._intend({"kind": "link", "netns": h["netns"], "name": network.HOST_IFACE, "peer": h["port"]})
            present = system.run([ip, "-n", h["netns"], "link", "show", network.HOST_IFACE], check=False)
            if present.returncode != 0:
                self._run(
                    [
                        ip, "link", "add", network.HOST_IFACE, "netns", h["netns"],
                        "address", h["mac"], "mtu", str(spec.mtu), "type", "veth",
                        "peer", "name", h["port"], "netns", sw,
                        "address", network.port_mac(h["index"]), "mtu", str(spec.mtu),
                    ],
                    what=f"creating the link of host {h['name']}",
                )  # fmt: skip
        for h in self.state["hosts"]:
            t = spec.type_named(h["type"])
            neighbours = [(o["address"], o["mac"]) for o in self.state["hosts"] if o is not h]
            batch = network.host_ip_batch(
                address=h["address"],
                prefix_len=spec.prefix_len,
                neighbours=neighbours,
                gso_off=t.loss_pct > 0 and emulator == "userspace",
                mtu=spec.mtu,
            )
            self._run(
                [ip, "-n", h["netns"], "-batch", "-"], input_text="\n".join(batch) + "\n", what="ip batch"
            )
            self._run([ip, "netns", "exec", h["netns"], "sh", "-c", network.NO_IPV6], what="disabling IPv6")
            shape = network.half_shape(t)
            upload = network.upload_batch(
                network.HOST_IFACE, shape, self._remotes(h["name"]), mtu=spec.mtu, netem=netem
            )
            self._run(
                [tc, "-n", h["netns"], "-batch", "-"],
                input_text="\n".join(upload) + "\n",
                what=f"shaping the upload of host {h['name']}",
            )
        ports = [h["port"] for h in self.state["hosts"]]
        bridge = emulator != "userspace"
        if bridge:
            self._intend({"kind": "bridge", "netns": sw, "name": network.BRIDGE})
            present = system.run([ip, "-n", sw, "link", "show", network.BRIDGE], check=False)
            if present.returncode == 0:
                system.run([ip, "-n", sw, "link", "del", network.BRIDGE], pass_fds=self.fds)
        self._run([ip, "netns", "exec", sw, "sh", "-c", network.NO_IPV6], what="disabling IPv6")
        self._run(
            [ip, "-n", sw, "-batch", "-"],
            input_text="\n".join(network.switch_ip_batch(ports, bridge=bridge)) + "\n",
            what="wiring the switch",
        )
        lines: list[str] = []
        for h in self.state["hosts"]:
            shape = network.half_shape(spec.type_named(h["type"]))
            lines += network.shaping_batch(h["port"], shape, mtu=spec.mtu, netem=netem)
        self._run([tc, "-n", sw, "-batch", "-"], input_text="\n".join(lines) + "\n", what="shaping downloads")
        if emulator == "userspace":
            self._start_switch(sw)
        self.state["phase"] = "up"
        self.store.save(self.state)
        return self.state

    def _remotes(self, host: str) -> list[network.RemoteClass]:
        """The other locations `host` reaches over a link: their hosts' addresses, rate and delay."""
        spec = self.spec
        here = spec.location_of(host)
        out = []
        for loc in spec.locations:
            link = spec.link_between(here, loc.name) if here is not None else None
            if link is not None:
                addresses = tuple(spec.address_of(name) for name in loc.hosts)
                out.append(network.RemoteClass(addresses, link.rate_mbit, link.delay_ms))
        return out

    def _start_switch(self, sw: str) -> None:
        run_dir = self.store.run_dir
        ready = run_dir / "switch.ready"
        ready.unlink(missing_ok=True)
        config = {
            "seed": self.spec.seed,
            "ready_file": str(ready),
            "stats_file": str(run_dir / "switch.stats.json"),
            "ports": [
                {
                    "iface": h["port"],
                    "mac": h["mac"],
                    "delay_ms": self.spec.type_named(h["type"]).delay_ms,
                    "jitter_ms": self.spec.type_named(h["type"]).jitter_ms,
                    "loss_pct": self.spec.type_named(h["type"]).loss_pct,
                    "location": self.spec.location_of(h["name"]),
                }
                for h in self.state["hosts"]
            ],
            "links": [
                {"between": list(k.between), "delay_ms": k.delay_ms}
                for k in self.spec.links
                if k.delay_ms > 0
            ],
        }
        config_path = run_dir / "switch.json"
        config_path.write_text(json.dumps(config, indent=1))
        resource: dict[str, Any] = {"kind": "process", "role": "switch", "netns": sw, "pid": None}
        self._intend(resource)
        log = open(run_dir / "switch.log", "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [
                    self.tools.ip,
                    "netns",
                    "exec",
                    sw,
                    sys.executable,
                    "-m",
                    "srift.testbed.switch",
                    str(config_path),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        resource["pid"] = proc.pid
        self.state["switch_pid"] = proc.pid
        # The switch's identity (`_switch_alive`): `ip netns exec` execs it in place, so the pid and start
        # time of the process just started are the switch's. Not yet reaped, it is still in /proc.
        self.state["switch_started_ticks"] = system.process_started_ticks(proc.pid)
        self.store.save(self.state)
        deadline = time.monotonic() + SWITCH_READY_S
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (run_dir / "switch.log").read_text(errors="replace")[-1500:]
                raise EnvironmentProblem(
                    f"the userspace switch did not start: {tail.strip() or 'no output'}",
                    hint="check AF_PACKET support; run `srift testbed down` to clean up",
                )
            time.sleep(0.02)


# ----- status and teardown --------------------------------------------------------------------------


def _healthy(state: Mapping[str, Any]) -> bool:
    for h in state.get("hosts", []):
        if not system.netns_exists(h["netns"]) or not all(Path(d).is_dir() for d in h["cgroups"]):
            return False
    if not system.netns_exists(network.switch_netns(state["prefix"])):
        return False
    return not (state.get("emulator") == "userspace" and not _switch_alive(state))


def _switch_alive(state: Mapping[str, Any]) -> bool:
    """Whether the userspace switch `_start_switch` started still runs: the process of its recorded pid
    and start time (a pid reused by another process does not count, whatever its command line). A
    journal without the start time (written before it was recorded) counts as not alive: `srift testbed
    up` then rebuilds the testbed."""
    return system.process_alive(state.get("switch_pid"), state.get("switch_started_ticks"))


def _status(state: Mapping[str, Any], store: StateFile) -> TestbedStatus:
    hosts = []
    for h in state.get("hosts", []):
        procs: set[int] = set()
        for d in h["cgroups"]:
            procs.update(cgroups.procs_in(Path(d)))
        hosts.append(
            HostStatus(
                name=h["name"],
                type_name=h["type"],
                address=h["address"],
                netns_present=system.netns_exists(h["netns"]),
                cgroups_present=all(Path(d).is_dir() for d in h["cgroups"]),
                processes=len(procs),
            )
        )
    stats: dict[str, Any] = {}
    stats_file = store.run_dir / "switch.stats.json"
    if state.get("emulator") == "userspace" and stats_file.exists():
        try:
            stats = {k: v for k, v in json.loads(stats_file.read_text()).items() if k != "pid"}
        except (OSError, ValueError):
            stats = {}
    pid = state.get("switch_pid")
    return TestbedStatus(
        prefix=state["prefix"],
        phase=state.get("phase", "unknown"),
        emulator=state.get("emulator") or "",
        healthy=state.get("phase") == "up" and _healthy(state),
        hosts=tuple(hosts),
        switch_pid=pid,
        switch_alive=_switch_alive(state),
        switch_stats=stats,
    )


def _kill_netns_processes(names: Sequence[str], *, grace_s: float = 2.0) -> None:
    me = os.getpid()
    deadline = time.monotonic() + grace_s
    sig = signal.SIGTERM
    while True:
        pids = [p for n in names for p in system.pids_in_netns(n) if p != me]
        if not pids:
            return
        if time.monotonic() > deadline:
            sig = signal.SIGKILL
        if time.monotonic() > deadline + 5:
            raise EnvironmentProblem(
                f"processes {pids} in the testbed's namespaces would not exit",
                hint="kill them by hand, then run `srift testbed down` again",
            )
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        time.sleep(0.05)


def _teardown(
    state: Mapping[str, Any],
    store: StateFile,
    *,
    tools: system.Tools,
    layout: cgroups.CgroupLayout | None,
) -> list[str]:
    """Remove everything the journal names, plus anything else carrying the prefix's names."""
    prefix = state.get("prefix") or store.prefix
    stem = f"srift-{prefix}-"
    namespaces: list[str] = []
    cgroup_dirs: list[Path] = []
    for r in state.get("resources", []):
        if r.get("kind") == "netns":
            namespaces.append(r["name"])
        elif r.get("kind") == "cgroup":
            cgroup_dirs.append(Path(r["path"]))
    for h in state.get("hosts", []):
        namespaces.append(h["netns"])
        cgroup_dirs.extend(Path(d) for d in h["cgroups"])
    namespaces.extend(n for n in system.list_netns() if n.startswith(stem))
    parents = {d.parent for d in cgroup_dirs}
    if layout is not None:
        parents.add(layout.cpu_parent)
        if layout.memory_parent is not None:
            parents.add(layout.memory_parent)
    for parent in parents:
        with contextlib.suppress(OSError):
            cgroup_dirs.extend(p for p in parent.iterdir() if p.is_dir() and p.name.startswith(stem))
    namespaces = list(dict.fromkeys(namespaces))
    removed: list[str] = []
    for d in dict.fromkeys(cgroup_dirs):
        for pid in cgroups.procs_in(d):
            if pid != os.getpid():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
    _kill_netns_processes([n for n in namespaces if system.netns_exists(n)])
    for n in namespaces:
        if system.netns_exists(n):
            system.run([tools.ip, "netns", "del", n], what=f"deleting namespace {n}")
            removed.append(f"netns {n}")
    for d in dict.fromkeys(cgroup_dirs):
        if d.exists():
            cgroups.remove(d)
            removed.append(f"cgroup {d}")
    store.delete()
    return removed


def down(prefix: str | None = None, *, root: Path | None = None) -> DownReport:
    """Remove a testbed: its processes, namespaces (and with them every link), cgroups and files.

    Works from the journal, so a testbed whose `up` crashed midway is removed too; also sweeps anything
    named after the prefix that the journal lacks. Removing an absent testbed is not an error.
    """
    root = root or default_root()
    if prefix is None:
        prefix = resolve_prefix(None, root=root)
    store = StateFile(root, prefix)
    tools = system.require_tools()
    try:
        layout: cgroups.CgroupLayout | None = cgroups.detect_layout()
    except EnvironmentProblem:
        layout = None
    with store.locked():
        state = store.load() or {"prefix": prefix, "resources": []}
        removed = _teardown(state, store, tools=tools, layout=layout)
    return DownReport(prefix=prefix, removed=tuple(removed))


def status(prefix: str | None = None, *, root: Path | None = None) -> TestbedStatus:
    root = root or default_root()
    prefix = resolve_prefix(prefix, root=root)
    store = StateFile(root, prefix)
    state = store.load()
    if state is None:
        raise NotFound(f"no testbed {prefix!r}", hint="list them with `srift testbed status`", field="prefix")
    return _status(state, store)
