"""A profile job's command line: a GPU type is profiled on its GPU (`--device cuda`) in the job's precision,
its profile labelled with the type; CPU types and local runs stay on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import transaction
from srift.domain.structure import Precision
from srift.jobs.ec2 import profile_user_data
from srift.jobs.runners import profile_argv, profile_device
from srift.jobs.service import TypeFacts, type_facts
from srift.jobs.spec import JobProvider, parse_profile_job
from srift.settings import Settings

MODEL = "srift.profiling.testmodels:cnn"
INPUT = "srift.profiling.testmodels:cnn_input"


def _spec(ec2_options: dict[str, Any] | None = None, **changes: Any) -> Any:
    body = {
        "provider": "ec2" if ec2_options else "local",
        "model": MODEL,
        "input": INPUT,
        **({"instance_types": ["g4dn.xlarge"], "ec2": ec2_options} if ec2_options else {}),
        **changes,
    }
    return parse_profile_job(body)


@pytest.mark.parametrize(
    ("precision", "flags"),
    [("fp32", []), ("tf32", ["--tf32"]), ("fp16", ["--amp", "fp16"]), ("bf16", ["--amp", "bf16"])],
)
def test_the_command_line_carries_the_gpu_device_and_the_precision(precision: str, flags: list[str]) -> None:
    spec = _spec(precision=precision)
    assert spec.precision is Precision(precision)
    argv = profile_argv(spec, out=Path("/tmp/p.json"), accelerator="g4dn.xlarge", threads=None, device="cuda")
    at = argv.index("--device")
    assert argv[at : at + 2 + len(flags)] == ["--device", "cuda", *flags]
    assert argv[argv.index("--accelerator") + 1] == "g4dn.xlarge"


def test_a_type_with_gpus_is_profiled_on_cuda_and_a_cpu_type_on_the_cpu() -> None:
    assert profile_device(TypeFacts(provider="aws", instance_type="g4dn.xlarge", gpu_name="T4")) == "cuda"
    assert profile_device(TypeFacts(provider="aws", instance_type="c5.xlarge")) == "cpu"
    assert profile_device(None) == "cpu"


def test_the_catalog_names_the_gpu_of_an_ec2_type(
    worker_settings: Settings, ec2_options: dict[str, Any]
) -> None:
    load_shipped_catalog(worker_settings)
    options = _spec(ec2_options).ec2
    with transaction(worker_settings.resolved_database_url) as session:
        gpu = type_facts(session=session, provider=JobProvider.EC2, instance_type="g4dn.xlarge", ec2=options)
        cpu = type_facts(session=session, provider=JobProvider.EC2, instance_type="c5.xlarge", ec2=options)
    assert gpu.gpu_name == "T4" and cpu.gpu_name == ""


def test_the_ec2_user_data_profiles_on_the_gpu(ec2_options: dict[str, Any]) -> None:
    spec = _spec(ec2_options, precision="bf16")
    data = profile_user_data(job_id=7, spec=spec, token="t", instance_type="g4dn.xlarge", device="cuda")
    line = next(x for x in data.splitlines() if x.startswith("srift profile"))
    assert "--device cuda --amp bf16" in line and "--accelerator g4dn.xlarge" in line
