"""The embedded broker's put is atomic: a consumer never takes a half-written message."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kombu import Connection

from workers import app as _app  # noqa: F401  (registers the transport)
from workers.embedded_broker import Channel


def connection(folder: Path) -> Connection:
    folder.mkdir(exist_ok=True)
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    return Connection("filesystem://", transport_options=options)


def test_filesystem_urls_use_the_atomic_channel(tmp_path: Path) -> None:
    with connection(tmp_path / "q") as conn:
        assert isinstance(conn.default_channel, Channel)


def test_a_message_is_written_whole_then_appears_under_its_name(tmp_path: Path) -> None:
    folder = tmp_path / "q"
    with connection(folder) as conn:
        channel = conn.default_channel
        channel._put("memory.write", {"body": "x" * 100_000})
        names = os.listdir(folder)
        assert len(names) == 1 and names[0].endswith(".memory.write.msg")
        assert json.loads((folder / names[0]).read_text())["body"] == "x" * 100_000


def test_a_message_still_being_written_is_not_taken(tmp_path: Path) -> None:
    folder = tmp_path / "q"
    with connection(folder) as conn:
        channel = conn.default_channel
        (folder / "1_abc.memory.write.msg.part").write_text("")  # a put in progress
        channel._put("memory.write", {"n": 1})
        assert channel._get("memory.write") == {"n": 1}
        assert os.listdir(folder) == ["1_abc.memory.write.msg.part"]  # left alone
