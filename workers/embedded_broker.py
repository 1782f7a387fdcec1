"""The embedded broker: kombu's `filesystem://` transport with an atomic put and acks.

kombu's filesystem channel creates a message file and then writes into it, while
a consumer may take (move) and read the same file in between: it reads an empty
file, and the worker dies on a JSON decode error. Here a message is written
whole under a name no consumer picks up (`….msg.part`), then renamed to its
`.msg` name in the same folder — a rename is atomic, so a consumer sees either
no file or the whole message.

kombu's channel also deletes a message the moment a consumer takes it, so a
consumer killed before it acknowledged (a writer SIGKILLed mid-apply, out of
memory) lost the message for good: the write batch was never applied and its
receipt never came, though its run said it wrote. Here a taken message moves to
the consumer's own folder under `unacked/`, held by an exclusive `flock` for the
consumer's life, and is deleted when acknowledged. A consumer whose lock is free
has died (the kernel drops the lock with the process): any consumer that polls
moves its messages back to the queue, as Redis restores unacknowledged messages,
marked `redelivered` as Redis and RabbitMQ mark them (`workers.write_attempts`
counts them).
A consumer that asked for no acknowledgements (kombu's `no_ack`: control
replies) gets the old behaviour.

Registered under kombu's own `filesystem` name when `workers.app` is imported,
so `filesystem://` URLs (the default) use it in every nightshift process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

RESTORE_EVERY = 2.0
"""Seconds between a polling consumer's looks for a dead consumer's messages."""
_LOCK = "owner.lock"
_AGAIN = "-again"
"""Ends the first part of a restored message's file name: it is delivered marked
`redelivered`, as Redis and RabbitMQ mark a message that comes back."""


class Channel(filesystem.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = self.connection.client.transport_options
        self._unacked_root = options.get("unacked_folder") or f"{self.data_folder_in}.unacked"
        self._mine = ""  # this consumer's folder under the unacked root, made on first take
        self._lock_fd = -1
        self._taken: dict[str, str] = {}  # delivery tag → the file holding the message
        self._no_ack: set[str] = set()
        self._restored_at = float("-inf")

    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".part"
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def basic_consume(self, queue: Any, no_ack: Any, *args: Any, **kwargs: Any) -> Any:
        if no_ack:
            self._no_ack.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        if queue in self._no_ack:
            return super()._get(queue)
        if monotonic() - self._restored_at >= RESTORE_EVERY:
            self._restored_at = monotonic()
            restore_orphans(self._unacked_root, self.data_folder_in, skip=self._mine)
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            taken = os.path.join(self._own_folder(), name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
            except OSError:  # another consumer took it first
                continue
            try:
                with open(taken, "rb") as f:
                    payload = loads(bytes_to_str(f.read()))
            except (OSError, ValueError) as exc:
                raise ChannelError(f"Cannot read file {taken!r} from queue.") from exc
            if name.partition(".")[0].endswith(_AGAIN):
                _mark_redelivered(payload.setdefault("properties", {}))
            tag = payload.get("properties", {}).get("delivery_tag")
            if tag is None:  # nothing can acknowledge it: taken is consumed, as before
                os.remove(taken)
            else:
                self._taken[tag] = taken
            return payload
        raise virtual.Empty()

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple)
        self._drop(delivery_tag)

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().basic_reject(delivery_tag, requeue)  # a requeue puts a copy back first
        self._drop(delivery_tag)

    def _restore(self, message: Any) -> None:
        # Unacknowledged at a clean shutdown (or rejected with requeue): a copy goes
        # back to the queue, so the taken file must go or it would come back twice.
        # kombu marks the copy at its top level, where no consumer reads it.
        _mark_redelivered(message.properties)
        super()._restore(message)
        self._drop(message.delivery_tag)

    def close(self) -> None:
        super().close()  # restores what is still unacknowledged
        if self._lock_fd >= 0:
            if not _messages(self._mine):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self._mine, _LOCK))
                    os.rmdir(self._mine)
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _drop(self, delivery_tag: Any) -> None:
        path = self._taken.pop(delivery_tag, None)
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def _own_folder(self) -> str:
        if self._lock_fd < 0:
            self._mine = os.path.join(self._unacked_root, f"{os.getpid()}-{uuid.uuid4().hex}")
            os.makedirs(self._mine)
            fd = os.open(os.path.join(self._mine, _LOCK), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_fd = fd
        return self._mine


def restore_orphans(root: str, queue_folder: str, *, skip: str = "") -> int:
    """Move the messages of every dead consumer under `root` back to `queue_folder`,
    under their own names (so they keep their place in the queue); return how many."""
    try:
        folders = [os.path.join(root, name) for name in os.listdir(root)]
    except FileNotFoundError:
        return 0
    moved = 0
    for folder in folders:
        if folder == skip:
            continue
        try:
            fd = os.open(os.path.join(folder, _LOCK), os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # being made or being removed: not ours to judge now
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its consumer holds it: alive
            os.close(fd)
            continue
        try:
            for name in _messages(folder):
                with contextlib.suppress(FileNotFoundError):
                    os.rename(os.path.join(folder, name), os.path.join(queue_folder, _again(name)))
                    moved += 1
            with contextlib.suppress(OSError):
                os.remove(os.path.join(folder, _LOCK))
                os.rmdir(folder)
        finally:
            os.close(fd)
    return moved


def _again(name: str) -> str:
    """`name` marked as a message that comes back; its order in the queue unchanged."""
    first, dot, rest = name.partition(".")
    return name if first.endswith(_AGAIN) else f"{first}{_AGAIN}{dot}{rest}"


def _mark_redelivered(properties: dict[str, Any]) -> None:
    """Where a consumer reads it: Celery's `request.delivery_info["redelivered"]`."""
    properties.setdefault("delivery_info", {})["redelivered"] = True


def _messages(folder: str) -> list[str]:
    try:
        return [name for name in os.listdir(folder) if name != _LOCK]
    except FileNotFoundError:  # another consumer restored and removed it meanwhile
        return []


class Transport(filesystem.Transport):
    Channel = Channel


def register() -> None:
    """Make `filesystem://` mean this transport in this process."""
    TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"
