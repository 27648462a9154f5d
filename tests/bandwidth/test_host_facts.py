"""Host facts are defined once (srift.domain.host) and carried, flat, by every value that knows a host."""

from __future__ import annotations

import json
from dataclasses import fields

from srift.bandwidth.nccl_tests import NcclTestsHost, parse_nccl_tests
from srift.bandwidth.records import ProbeRecord
from srift.domain.host import HOST_FIELDS, HostFacts
from srift.jobs.service import TypeFacts

TEXT = """#       size         count      type   redop    root     time   algbw   busbw #wrong
     1048576        262144     float     sum      -1    100.0   10.49   19.66      0
"""


def test_every_carrier_has_the_host_fields_of_one_definition() -> None:
    for carrier in (ProbeRecord, NcclTestsHost, TypeFacts):
        assert issubclass(carrier, HostFacts)
        assert [f.name for f in fields(carrier)][: len(HOST_FIELDS)] == list(HOST_FIELDS)


def test_an_imported_record_carries_the_hosts_facts_and_keeps_its_flat_format() -> None:
    host = NcclTestsHost(
        provider="aws",
        instance_type="p4d.24xlarge",
        nodes=2,
        gpus_per_node=8,
        region="us-east-1",
        gpu_name="A100",
        cpu_cores=96,
        memory_gib=1152.0,
        rated_gbps=400.0,
    )
    (record,) = parse_nccl_tests(TEXT, host=host)
    assert record.host_facts() == host.host_facts()
    line = json.loads(record.to_json())
    assert {"rated_gbps", "cpu_cores", "memory_gib", "instance_type", "busbw_gbps"} <= line.keys()
    assert ProbeRecord.from_dict(line) == record
