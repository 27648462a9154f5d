"""`srift jobs list|submit` and `srift worker` on the local database: an unknown kind, state or provider
names its option and lists the choices (as `srift run list --state` does), and `--nodes` takes node
counts, not byte sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from srift.cli import build_app
from srift.errors import InvalidInput

SUBMIT = ["jobs", "submit", "probe", "--provider", "local", "--instance-type", "local"]


def refusal(argv: list[str]) -> InvalidInput:
    """The InvalidInput `srift ARGV` stops with (printed as 'error: FIELD: DETAIL. To fix: HINT')."""
    result = CliRunner().invoke(build_app(), argv)
    assert isinstance(result.exception, InvalidInput), result.output
    return result.exception


@pytest.mark.parametrize(
    ("argv", "field", "words"),
    [
        # Was: "error: 'done' is not a valid JobState. To fix: see --help for the choices."
        (
            ["jobs", "list", "--state", "done"],
            "--state",
            "unknown job state 'done'. To fix: use queued, running",
        ),
        (
            ["jobs", "list", "--kind", "probes"],
            "--kind",
            "unknown job kind 'probes'. To fix: use probe or profile",
        ),
        (["worker", "--once", "--kind", "probes"], "--kind", "unknown job kind 'probes'"),
        (
            ["worker", "--once", "--provider", "aws"],
            "--provider",
            "unknown job provider 'aws'. To fix: use local",
        ),
    ],
)
def test_an_unknown_choice_names_its_option_and_the_choices(
    local: None, argv: list[str], field: str, words: str
) -> None:
    error = refusal(argv)
    assert error.field == field and words in str(error), str(error)
    assert "JobState" not in str(error) and "JobKind" not in str(error) and "JobProvider" not in str(error)


@pytest.mark.parametrize("nodes", ["2,x", "2K", "0", "2,-4"])
def test_nodes_are_whole_counts_not_sizes(local: None, nodes: str) -> None:
    """`--nodes 2,x` said "'x' is not a positive size. To fix: write sizes like 4, 64K, 512M or 1G", and
    `--nodes 2K` queued a probe of 2048 nodes."""
    error = refusal([*SUBMIT, "--nodes", nodes])
    assert error.field == "--nodes" and error.detail == f"'{nodes}' is not a list of node counts"
    assert error.hint.startswith("write whole numbers ≥ 1") and "size" not in str(error)


def test_nodes_and_sizes_still_become_the_request(local: None) -> None:
    result = CliRunner().invoke(build_app(), [*SUBMIT, "--nodes", "2, 4", "--sizes", "4,1M", "--json"])
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)["request"]
    assert request["node_counts"] == [2, 4] and request["sizes"] == [4, 1 << 20]


EC2 = ["--image-id", "ami-0123456789abcdef0", "--results-url", "http://10.0.0.5:8000"]
PROFILE = ["--model", "srift.profiling.testmodels:cnn", "--input", "srift.profiling.testmodels:cnn_input"]


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "submit", "probe", "--provider", "ec2", "--instance-type", "g4dn.xlarge", "--nodes", "2"],
        ["jobs", "submit", "profile", "--provider", "ec2", "--instance-types", "g4dn.xlarge", *PROFILE],
    ],
)
def test_ec2_jobs_take_the_image_and_results_url_as_options(local: None, argv: list[str]) -> None:
    """An EC2 job needed --file for ec2.image_id and ec2.results_url (no option carried them)."""
    result = CliRunner().invoke(build_app(), [*argv, *EC2, "--json"])
    assert result.exit_code == 0, result.output
    ec2 = json.loads(result.stdout)["request"]["ec2"]
    assert ec2["image_id"] == "ami-0123456789abcdef0" and ec2["results_url"] == "http://10.0.0.5:8000"


def test_the_ec2_options_override_a_files_ec2_mapping_and_keep_its_other_options(
    local: None, tmp_path: Path
) -> None:
    request = tmp_path / "r.yaml"
    request.write_text(
        "provider: ec2\ninstance_type: g4dn.xlarge\nnode_counts: [2]\n"
        "ec2: {image_id: ami-0aaaaaaaaaaaaaaaa, results_url: 'http://old:8000', max_cost_usd: 5}\n"
    )
    argv = [
        "jobs",
        "submit",
        "probe",
        "--file",
        str(request),
        "--image-id",
        "ami-0123456789abcdef0",
        "--json",
    ]
    result = CliRunner().invoke(build_app(), argv)
    assert result.exit_code == 0, result.output
    ec2 = json.loads(result.stdout)["request"]["ec2"]
    assert ec2["image_id"] == "ami-0123456789abcdef0"
    assert ec2["results_url"] == "http://old:8000" and ec2["max_cost_usd"] == 5


@pytest.mark.parametrize(
    ("given", "field", "hint"),
    [
        (EC2[:2], "--results-url", "To fix: give --results-url this server's http(s) URL as the instances"),
        (["--image-id", "ami-01", *EC2[2:]], "--image-id", "To fix: give --image-id an id like ami-"),
        (
            [],
            "ec2",
            "To fix: give --image-id (an AMI with python3, e.g. ami-0123456789abcdef0) and --results-url",
        ),
    ],
)
def test_a_missing_or_malformed_ec2_option_is_named_as_the_option(
    local: None, given: list[str], field: str, hint: str
) -> None:
    argv = ["jobs", "submit", "probe", "--provider", "ec2", "--instance-type", "g4dn.xlarge", "--nodes", "2"]
    error = refusal([*argv, *given])
    assert error.field == field and hint in str(error), str(error)


@pytest.mark.parametrize(
    ("argv", "given", "field", "fix"),
    [
        (SUBMIT, EC2[:2], "--image-id", "drop --image-id, or use --provider ec2"),
        (
            ["jobs", "submit", "profile", "--provider", "testbed", "--instance-types", "tb.small"],
            [*EC2[2:], *EC2[:2]],
            "--image-id",
            "drop --image-id and --results-url, or use --provider ec2",
        ),
        (SUBMIT, EC2[2:], "--results-url", "drop --results-url, or use --provider ec2"),
    ],
)
def test_ec2_options_for_a_local_or_testbed_job_are_refused_naming_the_option_given(
    local: None, argv: list[str], given: list[str], field: str, fix: str
) -> None:
    """Was (`--provider local --image-id X`): "error: --results-url: results_url is missing. To fix: give
    --results-url ...", an option the user had not given and the job cannot use."""
    provider = argv[argv.index("--provider") + 1]
    error = refusal([*argv, "--nodes", "2", *given] if "probe" in argv else [*argv, *given])
    assert error.field == field
    assert str(error) == (
        f"{field}: only for --provider ec2, and this job's provider is {provider}. To fix: {fix}."
    )


def test_a_local_job_without_an_instance_type_is_told_what_to_name(local: None) -> None:
    """A local job's instance type is free text (docs/jobs.md): the refusal says so, not only "a catalog
    type name", which a local machine has none of."""
    refused = refusal(["jobs", "submit", "probe", "--provider", "local", "--nodes", "2"])
    assert refused.field == "--instance-type"
    assert refused.hint == "give a catalog type name (a local job: any name for this machine, e.g. local)"
