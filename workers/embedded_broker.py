"""The embedded broker: kombu's `filesystem://` transport with an atomic put.

kombu's filesystem channel creates a message file and then writes into it, while
a consumer may take (move) and read the same file in between: it reads an empty
file, and the worker dies on a JSON decode error. Here a message is written
whole under a name no consumer picks up (`….msg.part`), then renamed to its
`.msg` name in the same folder — a rename is atomic, so a consumer sees either
no file or the whole message.

Registered under kombu's own `filesystem` name when `workers.app` is imported,
so `filesystem://` URLs (the default) use it in every nightshift process.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
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


class Transport(filesystem.Transport):
    Channel = Channel


def register() -> None:
    """Make `filesystem://` mean this transport in this process."""
    TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"
