"""One entry for every launch format: a plan document in, named files out (`srift plan --emit`, the API)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from srift.launch import kubernetes, skypilot, torchrun
from srift.launch.layout import layout_of


class EmitFormat(StrEnum):
    """What a plan can be emitted as."""

    TORCHRUN = "torchrun"
    SKYPILOT = "skypilot"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True, slots=True)
class LaunchOptions:
    """What the launch files run: the user's script and its arguments, how the helper finds the plan, and
    per-format settings (ignored by the formats that do not use them)."""

    script: str = "train.py"
    script_args: tuple[str, ...] = ()
    plan_ref: str | None = None
    master_addr: str | None = None
    master_port: int = torchrun.DEFAULT_PORT
    setup: str = torchrun.DEFAULT_SETUP
    image: str = kubernetes.DEFAULT_IMAGE
    extra_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EmittedFile:
    """A launch file: suggested name, text, and the structured content it renders (for checks)."""

    name: str
    text: str
    content: Any


def emit(plan: Mapping[str, Any], fmt: EmitFormat, options: LaunchOptions | None = None) -> list[EmittedFile]:
    """The launch files of `plan` in format `fmt` (srift.launch.layout.LayoutError when it cannot be)."""
    opts = options or LaunchOptions()
    layout = layout_of(plan)
    plan_ref = opts.plan_ref or (str(layout.plan_id) if layout.plan_id is not None else "plan.json")
    common: dict[str, Any] = {"script": opts.script, "script_args": opts.script_args, "plan_ref": plan_ref}
    if fmt is EmitFormat.TORCHRUN:
        name = f"plan-{layout.plan_id}-torchrun.sh" if layout.plan_id is not None else "torchrun.sh"
        commands = torchrun.node_commands(
            layout,
            master_addr=opts.master_addr,
            master_port=opts.master_port,
            extra_env=opts.extra_env,
            **common,
        )
        return [EmittedFile(name, torchrun.render(layout, commands), commands)]
    if fmt is EmitFormat.SKYPILOT:
        return [
            EmittedFile(t.name, t.text, t.task)
            for t in skypilot.tasks(layout, setup=opts.setup, master_port=opts.master_port, **common)
        ]
    return [
        EmittedFile(m.name, m.text, m.jobset)
        for m in kubernetes.manifests(
            layout, image=opts.image, setup=opts.setup, master_port=opts.master_port, **common
        )
    ]


def joined(files: Sequence[EmittedFile]) -> str:
    """Several files as one text: each under a `# file: NAME` line, YAML documents apart by `---`."""
    if len(files) == 1:
        return files[0].text
    return "\n---\n".join(f"# file: {f.name}\n{f.text}" for f in files)
