"""Emulated cloud on one machine: namespaces on veth links to a switch, tc-shaped, in CPU-quota cgroups."""

from srift.testbed.core import DownReport, Host, Testbed, TestbedStatus, down, status
from srift.testbed.spec import (
    Emulator,
    HostSpec,
    HostTypeSpec,
    TestbedSpec,
    example_spec_path,
    load_spec,
    parse_spec,
)

__all__ = [
    "DownReport",
    "Emulator",
    "Host",
    "HostSpec",
    "HostTypeSpec",
    "Testbed",
    "TestbedSpec",
    "TestbedStatus",
    "down",
    "example_spec_path",
    "load_spec",
    "parse_spec",
    "status",
]
