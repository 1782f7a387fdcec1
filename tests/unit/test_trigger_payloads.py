"""`nightshift trigger --payload`: what the command reads of a file, and what it refuses."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from workers.cli.base import InvalidInput
from workers.cli.runs_cmds import _read_payload

LIMIT = 1024


def test_a_payload_file_that_never_ends_is_refused_after_the_limit(tmp_path: Path) -> None:
    # A FIFO that is never closed stands for /dev/zero or a 10 GB file: reading it
    # whole would block (or fill memory) forever; the limit and one byte is enough.
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb", buffering=0) as pipe:
            pipe.write(b" " * (LIMIT + 1))
            opened.wait(10)  # keep the pipe open: no end of file while the reader reads

    opened = threading.Event()
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: _refused(fifo, outcome), daemon=True)
    reader.start()
    reader.join(5)
    opened.set()
    assert not reader.is_alive(), "the payload reader read past the limit"
    [error] = outcome
    assert isinstance(error, InvalidInput) and f"larger than {LIMIT} bytes" in error.message


def _refused(path: Path, outcome: list[BaseException]) -> None:
    try:
        _read_payload(path, LIMIT)
    except InvalidInput as error:
        outcome.append(error)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1, "b": {"c": 1, "c": 2}}', "has the key 'c' twice in one object"),
        ('{"reading": NaN}', "holds NaN, which JSON has no form for"),
        ('{"limits": [Infinity, -Infinity]}', "holds Infinity, which JSON has no form for"),
    ],
)
def test_json_that_readers_disagree_on_is_refused(tmp_path: Path, text: str, message: str) -> None:
    # Python's decoder takes the last of two equal keys and reads NaN; another reader
    # (the agent's, a policy check's) may take the first or refuse the whole document.
    path = tmp_path / "payload.json"
    path.write_text(text)
    with pytest.raises(InvalidInput) as refused:
        _read_payload(path, LIMIT)
    assert refused.value.message == f"payload {path} {message}; nothing was enqueued"


def test_a_plain_payload_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "payload.json"
    path.write_text('{"a": [1, 2.5, "x"], "b": {"c": null}}')
    assert _read_payload(path, LIMIT) == {"a": [1, 2.5, "x"], "b": {"c": None}}
