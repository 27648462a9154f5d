"""Request and response schemas of probe and profile jobs, and of results posted by their hosts."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from srift.api.schemas.profiles import ProfileIn
from srift.api.schemas.types import NO_NUL, Timestamp
from srift.bandwidth.records import ProbeSampleDocument
from srift.documents import StrictModel, rule_error
from srift.domain.states import JobKind, JobState
from srift.jobs.spec import ProbeJobDocument, ProfileJobDocument, TypeName
from srift.limits import PROBE_RESULTS_PER_BATCH


class ProbeJobIn(ProbeJobDocument, StrictModel):
    """An allreduce probe grid to run: one run per node count over the buffer sizes (the job document of
    srift.jobs.spec; rules that depend on the provider are stated per provider in `oneOf`)."""


class ProfileJobIn(ProfileJobDocument, StrictModel):
    """A model to profile with `srift profile` on each instance type (the job document of srift.jobs.spec)."""


class JobOut(BaseModel):
    """A probe or profile job: state queued → running → succeeded | failed, with its log."""

    id: int
    kind: JobKind
    provider: str
    state: JobState
    request: dict[str, Any]
    attempts: int
    worker_id: str | None
    created_at: Timestamp
    started_at: Timestamp | None
    heartbeat_at: Timestamp | None
    finished_at: Timestamp | None
    error: str | None
    log: str
    result: dict[str, Any]


class JobCreated(JobOut):
    """The queued job and its token, shown once: it lets hosts post this job's results."""

    token: str = Field(description="send as `Authorization: Bearer <token>` to POST /v1/probe-results")


class JobList(BaseModel):
    jobs: list[JobOut]
    total: int


JobIdField = Annotated[int, Field(ge=1, le=2**31 - 1)]
ErrorText = Annotated[str, Field(min_length=1, max_length=2000, pattern=NO_NUL)]


def _probe_results_schema(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [
        {"required": ["job_id"], "properties": {"job_id": {"type": "integer"}}},
        {"properties": {"error": {"type": "null"}, "final": {"const": True}}},
    ]


class ProbeResultsIn(StrictModel):
    """Probe samples (JSON lines of probes/allreduce.py as objects), for a job or on their own; `error`
    and `final: false` need a `job_id`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_probe_results_schema)

    job_id: JobIdField | None = Field(default=None, description="the job these belong to")
    samples: list[ProbeSampleDocument] = Field(
        default_factory=list, max_length=int(PROBE_RESULTS_PER_BATCH.maximum)
    )
    final: bool = Field(default=True, description="false: stage this batch; the final batch stores all")
    error: ErrorText | None = Field(default=None, description="the hosts failed")

    @model_validator(mode="after")
    def _job_for_errors(self) -> ProbeResultsIn:
        if self.job_id is None and (self.error is not None or not self.final):
            raise rule_error(
                "error and final=false need a job_id", field="job_id", hint="post them with the job's token"
            )
        return self


class ProbeResultsOut(BaseModel):
    parsed: int
    stored: int = Field(description="new samples (re-posting the same samples adds nothing)")
    staged: int = Field(description="samples waiting for the final batch")
    job_state: str | None


def _profile_result_schema(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [
        {"required": ["error"], "properties": {"error": {"type": "string"}}},
        {
            "required": ["profile", "instance_type"],
            "properties": {"profile": {"type": "object"}, "instance_type": {"type": "string"}},
        },
    ]


class ProfileResultIn(StrictModel):
    """One instance's profile for a profile job (`profile` and `instance_type`), or the error it hit
    (`error`; a profile given with it is not stored)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_profile_result_schema)

    job_id: JobIdField | None = None
    instance_type: TypeName | None = Field(default=None, description="one the job asked for (else 409)")
    profile: ProfileIn | None = None
    error: ErrorText | None = None

    @model_validator(mode="after")
    def _profile_or_error(self) -> ProfileResultIn:
        if self.error is None and (self.profile is None or self.instance_type is None):
            raise rule_error(
                "give `profile` and `instance_type`, or `error`",
                field="profile" if self.profile is None else "instance_type",
                hint="post the profile with its instance type, or the error",
            )
        return self


class ProfileResultOut(BaseModel):
    profile_id: int | None
    job_state: str
