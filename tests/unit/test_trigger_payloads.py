"""`nightshift trigger --payload`: what the command reads of a file, and what it refuses."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from workers.cli import main_group
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
        ('{"a": 1e999}', "holds the number 1e999, past a float's range (Infinity)"),
        ('{"a": -1.5e400}', "holds the number -1.5e400, past a float's range (Infinity)"),
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


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": "x\\u0000y"}', "a NUL character in the value at a"),
        ('{"a": [1, {"b": "\\ud800"}]}', "a lone surrogate (not UTF-8) in the value at a[1].b"),
        ('{"a": [1, {"b\\u0000": 2}]}', "a NUL character in a key of the object at a[1]"),
        ('{"\\udfff": 1}', "a lone surrogate (not UTF-8) in a key of the object at the top"),
    ],
)
def test_text_no_store_keeps_is_refused_saying_where(tmp_path: Path, text: str, where: str) -> None:
    # PostgreSQL's text holds no NUL; no UTF-8 encoder takes a lone surrogate. The
    # agent would carry them into its summary or its memories, to fail there.
    path = tmp_path / "payload.json"
    path.write_text(text)
    with pytest.raises(InvalidInput) as refused:
        _read_payload(path, LIMIT)
    assert refused.value.message == (
        f"payload {path} holds {where}, which no store keeps; nothing was enqueued"
    )


@pytest.mark.parametrize("option", ["--event-id", "--goal"])
@pytest.mark.parametrize(
    ("value", "what"), [("a\x00b", "a NUL character"), ("a\ud800", "a lone surrogate")]
)
def test_an_option_no_store_keeps_is_refused_before_anything_is_made(
    tmp_path: Path, option: str, value: str, what: str
) -> None:
    # argv holds no NUL and `main` refuses what is not UTF-8; an embedding caller
    # (CliRunner, a script calling main_group) reaches the command all the same.
    data = tmp_path / "data"
    result = CliRunner().invoke(
        main_group,
        ["--data-dir", str(data), "trigger", "feed-watcher", "--tenant", "acme", option, value],
    )
    assert result.exit_code == 3, result.output
    assert f"{option} holds {what}" in result.output and "nothing was enqueued" in result.output
    assert not data.exists()


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_event_id_is_refused_not_taken_for_a_manual_run(tmp_path: Path, blank: str) -> None:
    # An unset variable in a script (`--event-id "$ID"`): a manual run would run
    # again on every retry of the script, which the event id was there to prevent.
    data = tmp_path / "data"
    result = CliRunner().invoke(
        main_group,
        [
            "--data-dir",
            str(data),
            "trigger",
            "feed-watcher",
            "--tenant",
            "acme",
            "--event-id",
            blank,
        ],
    )
    assert result.exit_code == 3, result.output
    assert "--event-id is empty" in result.output and not data.exists()
