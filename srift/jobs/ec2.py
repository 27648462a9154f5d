"""EC2 jobs: launch instances whose user-data runs the probe (or `srift profile`) and posts results back.

Rendezvous is on the first node: it is launched first, and the others get its private address in their
user-data; node ranks come from the launch index. Results come back to `POST /v1/probe-results` (profiles
to `POST /v1/profile-jobs/{id}/results`) with the job's token. Instances are always terminated: after
success, failure and timeout by the worker, and by themselves (`shutdown -h` with
InstanceInitiatedShutdownBehavior=terminate) as a backstop. Capacity and throttling errors are retried
with exponential backoff, then fail the job with a clear message.
"""

from __future__ import annotations

import base64
import gzip
import math
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srift.errors import ExternalServiceError, InvalidInput
from srift.jobs.spec import Ec2Market, Ec2Options, ProbeJobSpec, ProfileJobSpec

TAG_JOB = "srift-job-id"
USER_DATA_MAX_BYTES = 16 * 1024
RETRYABLE_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "SpotMaxPriceTooLow",
        "InternalError",
        "Unavailable",
        "ServiceUnavailable",
    }
)
BACKSTOP_MARGIN_S = 300.0
_PROFILE_OUT = Path("/opt/srift/profile.json")


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


@dataclass(frozen=True, slots=True)
class Launched:
    instance_ids: tuple[str, ...]
    private_ips: tuple[str, ...]


class Ec2Fleet:
    """Launches and terminates one job's instances through a boto3 EC2 client."""

    def __init__(
        self,
        client: Any,
        *,
        job_id: int,
        attempt: int,
        options: Ec2Options,
        sleep: Callable[[float], None] = time.sleep,
        retries: int = 5,
        base_delay_s: float = 2.0,
        log: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.attempt = attempt
        self.options = options
        self.sleep = sleep
        self.retries = retries
        self.base_delay_s = base_delay_s
        self.log = log

    def launch(self, *, instance_type: str, count: int, user_data: str, role: str) -> Launched:
        """run_instances with retries on capacity/throttling errors; every instance tagged with the job."""
        size = len(user_data.encode())
        if size > USER_DATA_MAX_BYTES:
            raise InvalidInput(
                f"the user-data is {size} bytes, above EC2's {USER_DATA_MAX_BYTES}",
                hint="shorten ec2.install_command",
                field="ec2.install_command",
            )
        o = self.options
        params: dict[str, Any] = {
            "ImageId": o.image_id,
            "InstanceType": instance_type,
            "MinCount": count,
            "MaxCount": count,
            "UserData": user_data,
            "InstanceInitiatedShutdownBehavior": "terminate",
            "ClientToken": f"srift-{self.job_id}-{self.attempt}-{role}",
            "TagSpecifications": [
                {
                    "ResourceType": "instance",
                    "Tags": [
                        {"Key": TAG_JOB, "Value": str(self.job_id)},
                        {"Key": "srift-role", "Value": role},
                        {"Key": "Name", "Value": f"srift-job-{self.job_id}-{role}"},
                    ],
                }
            ],
        }
        if o.subnet_id:
            params["SubnetId"] = o.subnet_id
        if o.security_group_ids:
            params["SecurityGroupIds"] = list(o.security_group_ids)
        if o.key_name:
            params["KeyName"] = o.key_name
        if o.iam_instance_profile:
            params["IamInstanceProfile"] = {"Name": o.iam_instance_profile}
        if o.market is Ec2Market.SPOT:
            params["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
            }
        delay = self.base_delay_s
        for attempt in range(self.retries + 1):
            try:
                reply = self.client.run_instances(**params)
                break
            except Exception as exc:
                code = error_code(exc)
                if code not in RETRYABLE_CODES:
                    raise ExternalServiceError(
                        f"EC2 refused to launch {count} × {instance_type}: "
                        f"{code or type(exc).__name__}: {exc}",
                        hint="check the AMI, subnet, security groups, quotas and credentials",
                    ) from exc
                if attempt == self.retries:
                    raise ExternalServiceError(
                        f"EC2 had no capacity for {count} × {instance_type} in {o.region} "
                        f"({code}) after {self.retries + 1} attempts",
                        hint="retry later, or use another region, subnet (availability zone) or market",
                    ) from exc
                self.log(f"ec2: {code}; retrying in {delay:g} s")
                self.sleep(delay)
                delay = min(delay * 2, 60.0)
        instances = reply.get("Instances", [])
        return Launched(
            instance_ids=tuple(i["InstanceId"] for i in instances),
            private_ips=tuple(i.get("PrivateIpAddress", "") for i in instances),
        )

    def tagged_instances(self) -> list[str]:
        """Instances of this job that are not yet terminated (found by tag)."""
        found: list[str] = []
        paginator = self.client.get_paginator("describe_instances")
        for page in paginator.paginate(
            Filters=[
                {"Name": f"tag:{TAG_JOB}", "Values": [str(self.job_id)]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
            ]
        ):
            for reservation in page.get("Reservations", []):
                found.extend(i["InstanceId"] for i in reservation.get("Instances", []))
        return found

    def terminate(self, instance_ids: Sequence[str] = ()) -> list[str]:
        """Terminate the given instances and any others tagged with the job; returns what was asked."""
        ids = list(dict.fromkeys([*instance_ids, *self.tagged_instances()]))
        if ids:
            delay = self.base_delay_s
            for attempt in range(self.retries + 1):
                try:
                    self.client.terminate_instances(InstanceIds=ids)
                    break
                except Exception as exc:
                    if error_code(exc) not in RETRYABLE_CODES or attempt == self.retries:
                        raise ExternalServiceError(
                            f"could not terminate instances {ids}: {exc}",
                            hint="terminate them in the EC2 console (they also shut themselves down)",
                        ) from exc
                    self.sleep(delay)
                    delay = min(delay * 2, 60.0)
            self.log(f"ec2: terminated {', '.join(ids)}")
        return ids


def _embed(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode(), 9)).decode()


_POST = r"""
post_json() {
python3 - "$1" "$2" <<'PY'
import json, sys, urllib.request
url, body = sys.argv[1], open(sys.argv[2]).read()
req = urllib.request.Request(url, data=body.encode(), method="POST", headers={
    "Content-Type": "application/json", "Authorization": "Bearer " + open("/opt/srift/token").read().strip()})
for attempt in range(5):
    try:
        urllib.request.urlopen(req, timeout=60).read(); break
    except Exception as exc:
        print("post failed:", exc, file=sys.stderr)
        import time; time.sleep(5 * (attempt + 1))
PY
}
fail() {
python3 - "$1" > /opt/srift/error.json <<'PY'
import json, sys
print(json.dumps({"job_id": JOB_ID, "error": sys.argv[1][:2000]}))
PY
post_json "$ERROR_URL" /opt/srift/error.json
shutdown -h now
exit 1
}
"""


def _preamble(
    *, job_id: int, token: str, options: Ec2Options, budget_s: float, role: str, error_path: str
) -> str:
    minutes = max(1, math.ceil((min(options.timeout_s, budget_s) + BACKSTOP_MARGIN_S) / 60))
    return "\n".join(
        [
            "#!/bin/bash",
            f"# srift job {job_id}, {role} node: runs the work, posts results, then shuts down (= terminate)",
            "set -u",
            "exec > /var/log/srift-job.log 2>&1",
            f"shutdown -h +{minutes}",
            "mkdir -p /opt/srift && chmod 700 /opt/srift",
            f"echo {shlex.quote(token)} > /opt/srift/token",
            f"RESULTS_URL={shlex.quote(options.results_url)}",
            f'ERROR_URL="$RESULTS_URL{error_path}"',
            _POST.replace("JOB_ID", str(job_id)),
            f"{options.install_command} || fail 'install failed: {options.install_command[:60]}'",
            "IMDS_TOKEN=$(curl -s -X PUT http://169.254.169.254/latest/api/token "
            '-H "X-aws-ec2-metadata-token-ttl-seconds: 300")',
            'imds() { curl -s -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" '
            "http://169.254.169.254/latest/meta-data/$1; }",
        ]
    )


def probe_user_data(
    *, job_id: int, attempt: int, spec: ProbeJobSpec, token: str, probe_source: str, master_ip: str | None
) -> str:
    """Bash user-data for one probe node: master (launch index 0, master_ip None) or a worker node."""
    assert spec.ec2 is not None
    role = "master" if master_ip is None else "worker"
    lines = [
        _preamble(
            job_id=job_id,
            token=token,
            options=spec.ec2,
            budget_s=spec.time_budget_s * len(spec.node_counts),
            role=role,
            error_path="/v1/probe-results",
        ),
        f"echo {_embed(probe_source)} | base64 -d | gunzip > /opt/srift/allreduce.py",
        'IDX=$(imds ami-launch-index)',
        "NODE_RANK=0" if master_ip is None else "NODE_RANK=$((IDX + 1))",
        "MASTER=$(imds local-ipv4)" if master_ip is None else f"MASTER={shlex.quote(master_ip)}",
        "PY=$(command -v python3)",
    ]  # fmt: skip
    sizes = ",".join(str(s) for s in spec.sizes)
    for k, nodes in enumerate(spec.node_counts):
        out = f"/opt/srift/samples-n{nodes}.jsonl"
        lines.append(
            f'if [ "$NODE_RANK" -lt {nodes} ]; then '
            f"$PY -m torch.distributed.run --nnodes {nodes} --nproc-per-node {spec.ranks_per_node} "
            f"--node-rank $NODE_RANK --master-addr $MASTER --master-port {29500 + k} "
            f"/opt/srift/allreduce.py --from-imds --provider aws --backend {spec.backend} --sizes {sizes} "
            f"--repeats {spec.repeats} --warmup {spec.warmup} --async-count {spec.async_count} "
            f"--nodes {nodes} --ranks-per-node {spec.ranks_per_node} --time-budget-s {spec.time_budget_s:g} "
            f"--instance-type {shlex.quote(spec.instance_type)} --collective {spec.collective} "
            f"--run-id srift-job-{job_id}-a{attempt}-n{nodes} --out {out} "
            f"|| {{ [ \"$NODE_RANK\" = 0 ] && fail 'probe with {nodes} nodes failed'; }}; fi"
        )
    if master_ip is None:
        lines += [
            "cat /opt/srift/samples-n*.jsonl > /opt/srift/samples.jsonl",
            "python3 - > /opt/srift/results.json <<'PY'",
            "import json",
            "rows = [json.loads(l) for l in open('/opt/srift/samples.jsonl') if l.strip()]",
            f'print(json.dumps({{"job_id": {job_id}, "samples": rows, "final": True}}))',
            "PY",
            'post_json "$RESULTS_URL/v1/probe-results" /opt/srift/results.json',
        ]
    lines.append("shutdown -h now")
    return "\n".join(lines) + "\n"


def profile_user_data(
    *, job_id: int, spec: ProfileJobSpec, token: str, instance_type: str, device: str = "cpu"
) -> str:
    """Bash user-data that profiles the model on this instance (on its GPU: `device` "cuda") and posts the
    profile."""
    assert spec.ec2 is not None
    from srift.jobs.runners import profile_argv

    argv = profile_argv(spec, out=_PROFILE_OUT, accelerator=instance_type, threads=None, device=device)
    argv[0] = "srift"
    command = " ".join(shlex.quote(a) for a in argv)
    lines = [
        _preamble(
            job_id=job_id,
            token=token,
            options=spec.ec2,
            budget_s=spec.time_budget_s,
            role="profile",
            error_path=f"/v1/profile-jobs/{job_id}/results",
        ),
        f"{command} || fail 'srift profile failed on {instance_type}'",
        "python3 - > /opt/srift/results.json <<'PY'",
        "import json",
        f"print(json.dumps({{'profile': json.load(open('{_PROFILE_OUT}')), "
        f"'instance_type': {instance_type!r}}}))",
        "PY",
        f'post_json "$RESULTS_URL/v1/profile-jobs/{job_id}/results" /opt/srift/results.json',
        "shutdown -h now",
    ]
    return "\n".join(lines) + "\n"
