"""The `command` adapter: any executable, run in the sandbox, talking through files.

    NIGHTSHIFT_AGENTS="triage=command:/opt/agents/triage.sh --fast"

The program starts in `$NIGHTSHIFT_SANDBOX` (its working directory) with:

    AGENTS.md          goal, earlier attempts, trigger, hot memory (untrusted data)
    memory/<id>.md     one file per loaded memory: grep them
    trigger.json       the trigger, payload marked untrusted
    outbox.jsonl       empty: where it leaves candidates, votes and its outcome
                       (format: `workers.adapters.outbox`)
    .mcp.json          the same memory tools as a stdio MCP server, for agents
                       that speak MCP (`workers.adapters.mcp`; also `$NIGHTSHIFT_MCP`)

and a clean environment: PATH, HOME and TMPDIR (both inside the sandbox), LANG,
`NIGHTSHIFT_RUN_KEY`, `NIGHTSHIFT_AGENT`, `NIGHTSHIFT_SANDBOX`, `NIGHTSHIFT_OUTBOX`,
`NIGHTSHIFT_MCP` (the MCP server's command line), plus only what `NIGHTSHIFT_COMMAND_ENV` names. It runs in its own process group,
confined by Landlock (`landlock.py`) to read the system and read-write its sandbox.
The group never outlives the worker process that started it: the program dies
with it (PR_SET_PDEATHSIG), and a watcher kills what the program started in the
background when the worker is killed (`_guard`).

What ends the run how:

- exit 0 → the outbox is read; bad lines are refused by number (`partial`);
- non-zero exit or death by signal → `failed`, with the output's tail; the outbox
  is not read, so nothing of it becomes memory;
- past the time limit → the whole process group is killed, `timed_out`;
- a file written next to the sandbox (its parent, which the program can reach) or
  a sandbox grown past `NIGHTSHIFT_SANDBOX_MAX_BYTES` → `rejected`, nothing kept.
  Writes anywhere else are refused by the kernel (Landlock).
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, ClassVar

import memory
import workers
from memory.redaction import redact
from workers.adapters import mcp, outbox
from workers.adapters.landlock import Ruleset
from workers.agents import (
    AgentResult,
    AgentTimedOut,
    RunContext,
    SandboxViolation,
    VoteRefused,
)

if TYPE_CHECKING:
    from workers.settings import Settings

PACKAGE_DIRS = tuple(  # workers/ and memory/: the MCP server imports both
    str(Path(path).resolve()) for package in (workers, memory) for path in package.__path__
)
WORKDIR = "work"  # the program's sandbox, inside the run's sandbox directory
OUTPUT_TAIL = 2000
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


class CommandFailed(Exception):
    """The command agent exited non-zero or was killed by a signal."""


@dataclass(frozen=True, slots=True)
class CommandAgent:
    reads_files: ClassVar[bool] = True  # its memory, goal and trigger come as files

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    default_time_limit: float = 600.0

    @classmethod
    def from_target(cls, target: str, settings: Settings | None = None) -> CommandAgent:
        argv = tuple(shlex.split(target))
        if not argv:
            raise ValueError("command: needs a program")
        if not Path(argv[0]).is_absolute():
            raise ValueError(f"command: program {argv[0]!r} must be an absolute path")
        env = parse_env(settings.command_env) if settings else {}
        limit = float(settings.run_time_limit) if settings else 600.0
        return cls(argv, env, limit)

    def __call__(self, ctx: RunContext) -> AgentResult:
        work = _move_projection_into_workdir(ctx.sandbox)
        out_path = work / outbox.OUTBOX_NAME
        out_path.touch()
        ruleset = Ruleset.build(work.parent, readable=self._readable())
        try:
            with tempfile.TemporaryFile() as output:
                code = self._run(ctx, work, output, ruleset)
                tail = _tail(output)
        finally:
            if ruleset is not None:
                ruleset.close()
        if code != 0:
            how = f"killed by signal {-code}" if code < 0 else f"exited with {code}"
            raise CommandFailed(f"command {how}; output ends: {tail or '(none)'}")
        stray = sorted(p.name for p in work.parent.iterdir() if p.name != WORKDIR)
        if stray:
            raise SandboxViolation(f"the command wrote outside its sandbox: {', '.join(stray)}")
        return apply_outbox(ctx, outbox.read(out_path))

    def _readable(self) -> list[str]:
        # The program itself, the interpreter prefix for agents written in Python, and
        # our packages (not under the prefix in an editable install) for the MCP server.
        return [self.argv[0], sys.prefix, sys.base_prefix, *PACKAGE_DIRS]

    def _run(self, ctx: RunContext, work: Path, output: IO[bytes], ruleset: Ruleset | None) -> int:
        env = {
            **self.env,
            "PATH": SAFE_PATH,
            "HOME": str(work),
            "TMPDIR": str(work / "tmp"),
            "LANG": "C.UTF-8",
            "NIGHTSHIFT_RUN_KEY": ctx.run_key,
            "NIGHTSHIFT_AGENT": ctx.agent,
            "NIGHTSHIFT_SANDBOX": str(work),
            "NIGHTSHIFT_OUTBOX": str(work / outbox.OUTBOX_NAME),
            "NIGHTSHIFT_MCP": shlex.join(mcp.command()),
        }
        (work / "tmp").mkdir(exist_ok=True)
        _write_mcp_config(work)
        deadline = ctx.deadline or time.monotonic() + self.default_time_limit
        proc = subprocess.Popen(
            self.argv,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=partial(_confine, ruleset),  # a few syscalls, nothing else
        )
        guard: _Guard | None = None
        try:
            guard = _guard(proc.pid)
            return proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            raise AgentTimedOut("the command ran past its time limit") from None
        finally:
            # Always: a program's background children must not outlive its sandbox.
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if guard is not None:
                guard.stand_down()


@dataclass(frozen=True, slots=True)
class _Guard:
    """A watcher of a program's process group: a `sh` in a session of its own (a kill
    of the worker's process group spares it) that waits on a pipe only this process
    can write to. When this process dies, however (SIGKILL, the hard time limit),
    the kernel closes the pipe and the watcher kills the group: what the program
    started in the background does not run on, unsupervised, after its sandbox is
    gone. PR_SET_PDEATHSIG covers only the program itself, not its children."""

    watcher: subprocess.Popen[bytes]
    pipe: int

    def stand_down(self) -> None:
        """The group was killed here: let the watcher exit without killing (by then its
        number could be another group's)."""
        with suppress(OSError):
            os.write(self.pipe, b"\n")
        os.close(self.pipe)
        self.watcher.wait()


def _guard(group: int) -> _Guard:
    readable, writable = os.pipe()  # not inheritable: the program never holds either end
    try:
        watcher = subprocess.Popen(
            ["/bin/sh", "-c", f"read _ <&{readable} || kill -s KILL -- -{group}"],
            pass_fds=(readable,),
            env={"PATH": SAFE_PATH},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        os.close(writable)
        raise
    finally:
        os.close(readable)
    return _Guard(watcher, writable)


def _confine(ruleset: Ruleset | None) -> None:
    """In the child before exec: die with the worker (a hard time limit kills the worker
    process, and its program must not outlive it), then Landlock."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if ruleset is not None:
        ruleset.enforce()


def apply_outbox(ctx: RunContext, found: outbox.Outbox) -> AgentResult:
    """Turn valid outbox lines into the run's candidates, votes, subagents and outcome."""
    summary = tried = evidence = ""
    problems = list(found.refused)
    for line in found.lines:
        if isinstance(line, outbox.RememberLine):
            ctx.remember(
                line.content,
                kind=line.kind,
                key=line.key,
                source=line.source,
                reference=line.reference,
                layer=line.layer,
                evidence=line.evidence,
            )
        elif isinstance(line, outbox.VoteLine):
            with suppress(VoteRefused):  # the context keeps the reason; the run is partial
                ctx.vote(line.memory_id, line.direction)
        elif isinstance(line, outbox.SpawnLine):
            try:
                ctx.spawn(line.agent, name=line.name, goal=line.goal, payload=line.payload)
            except RuntimeError as error:
                problems.append(f"spawn {line.agent!r}: {error}")
        else:
            summary, tried, evidence = line.summary, line.tried, line.evidence
    return AgentResult(
        summary=redact(summary), tried=tried, evidence=evidence, problems=tuple(problems)
    )


def parse_env(raw: str) -> dict[str, str]:
    """`NAME=value;…` (NIGHTSHIFT_COMMAND_ENV): the only variables a command agent inherits."""
    env = {}
    for item in filter(None, (part.strip() for part in raw.split(";"))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"command environment entry {item!r} is not NAME=value")
        env[name.strip()] = value
    return env


def _write_mcp_config(work: Path) -> None:
    """`.mcp.json`, the project MCP configuration coding agents look for in their cwd."""
    program, *args = mcp.command()
    server = {"command": program, "args": args}
    config = {"mcpServers": {"nightshift-memory": server}}
    (work / ".mcp.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


def _move_projection_into_workdir(box: Path) -> Path:
    work = box / WORKDIR
    work.mkdir(mode=0o700)
    for entry in list(box.iterdir()):
        if entry.name != WORKDIR:
            entry.rename(work / entry.name)
    return work


def _tail(output: IO[bytes]) -> str:
    output.seek(0, os.SEEK_END)
    size = output.tell()
    output.seek(max(size - OUTPUT_TAIL, 0))
    text = output.read().decode("utf-8", "replace")
    return redact(" ".join(text.split()))[-OUTPUT_TAIL:]
