"""Landlock: confine a command agent's process to its sandbox (Linux ≥ 5.13, no privileges).

The ruleset is built in the worker (opening the allowed paths), and the child only
calls `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self` between fork and
exec. The confined program may read and run the system's programs and libraries
(/usr, /bin, /lib, /etc, …), may read and write its own sandbox, and nothing else:
no other run's sandbox, no data directory, no /tmp, no home.

Where the kernel has no Landlock, `Ruleset.build` returns None and the command
runs unconfined (a warning is logged once); the adapter's own checks (a clean
environment, the outbox as the only channel, detection of writes next to the
sandbox) still apply.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
_ALL_V1 = (1 << 13) - 1
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

READ_ONLY = EXECUTE | READ_FILE | READ_DIR
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/proc")
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/tty")

_libc = ctypes.CDLL(None, use_errno=True)
_warned = False


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable."""
    version = _libc.syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    return max(int(version), 0)


@dataclass(frozen=True, slots=True)
class Ruleset:
    """An open Landlock ruleset; `enforce` is what the child calls before exec."""

    fd: int

    @classmethod
    def build(cls, writable: Path, readable: Iterable[str | Path] = ()) -> Ruleset | None:
        abi = abi_version()
        if abi < 1:
            _warn_once()
            return None
        handled = _ALL_V1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
        handled |= IOCTL_DEV if abi >= 5 else 0
        fd = _libc.syscall(_SYS_CREATE_RULESET, struct.pack("=Q", handled), 8, 0)
        if fd < 0:
            _warn_once()
            return None
        ruleset = cls(int(fd))
        try:
            for path in (*SYSTEM_PATHS, *readable):
                ruleset._allow(Path(path), READ_ONLY & handled)
            for device in DEVICES:
                ruleset._allow(Path(device), (READ_FILE | WRITE_FILE) & handled)
            ruleset._allow(writable, handled)
        except BaseException:
            ruleset.close()
            raise
        return ruleset

    def _allow(self, path: Path, access: int) -> None:
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a path this system does not have
        try:
            if not path.is_dir():
                access &= _FILE_RIGHTS
            rule = struct.pack("=Qi", access, target)
            if _libc.syscall(_SYS_ADD_RULE, self.fd, _RULE_PATH_BENEATH, rule, 0) < 0:
                errno = ctypes.get_errno()
                raise OSError(errno, f"landlock_add_rule({path}): {os.strerror(errno)}")
        finally:
            os.close(target)

    def enforce(self) -> None:
        """In the child, between fork and exec: no new privileges, then confine."""
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.syscall(_SYS_RESTRICT_SELF, self.fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")

    def close(self) -> None:
        os.close(self.fd)


def _warn_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "Landlock is not available; command agents run without filesystem confinement",
            extra={"action": "sandbox.no_landlock"},
        )
