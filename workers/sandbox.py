"""Disposable sandboxes: a fresh directory per run, deleted on every exit path.

A sandbox is named after its run so an operator can tell whose it is. A worker
killed outright (SIGKILL, a hard time limit) cannot run its `finally`, so
`sweep` removes every sandbox whose run no longer holds a live lease; the
reaper and worker start-up call it.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def sandbox_prefix(run_key: str) -> str:
    return _UNSAFE.sub("_", run_key)[:80] + "-"


def plan(root: str | Path, run_key: str) -> Path:
    """The path a new sandbox for `run_key` will have (unique; not created yet)."""
    return Path(root).resolve() / f"{sandbox_prefix(run_key)}{secrets.token_hex(6)}"


def make(root: str | Path, run_key: str, path: Path | None = None) -> Path:
    """A new private (0700) directory under `root` for one run, at `path` if planned.

    The caller removes it. An existing directory is never reused.
    """
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    if path is None:
        return Path(tempfile.mkdtemp(prefix=sandbox_prefix(run_key), dir=base))
    path.mkdir(mode=0o700)
    return path


def size(path: Path, *, stop_after: int | None = None) -> int:
    """Bytes of regular files under `path` (symlinks not followed); stops early past `stop_after`."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
            if stop_after is not None and total > stop_after:
                return total
    return total


@contextmanager
def sandbox(root: str | Path, run_key: str) -> Iterator[Path]:
    """A new private directory under `root` for one run; removed when the block ends."""
    path = make(root, run_key)
    try:
        yield path
    finally:
        remove(path)


def remove(path: Path) -> None:
    # A program in the sandbox may have made read-only files; make them writable first.
    def _retry_writable(func, target, _info):
        Path(target).chmod(0o700)
        func(target)

    if path.exists():
        shutil.rmtree(path, onerror=_retry_writable)


def sweep(root: str | Path, keep: Iterable[str], *, min_age: float = 120.0) -> list[Path]:
    """Delete sandboxes under `root` not in `keep` (the live runs' sandboxes).

    A sandbox younger than `min_age` seconds is left alone: its run may not have
    recorded it yet.
    """
    base = Path(root)
    if not base.is_dir():
        return []
    alive = {Path(k).resolve() for k in keep}
    oldest = time.time() - min_age
    removed = []
    for path in base.iterdir():
        if path.is_dir() and path.resolve() not in alive and path.stat().st_mtime < oldest:
            remove(path)
            removed.append(path)
    return removed


def leftovers(root: str | Path) -> list[Path]:
    base = Path(root)
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
