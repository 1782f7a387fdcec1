"""The MCP memory server: JSON-RPC framing, errors, and the tools over a sandbox's files."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from workers.adapters import outbox
from workers.adapters.mcp import MemoryTools, Server


@pytest.fixture
def server(tmp_path: Path) -> Server:
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "m1.md").write_text("---\nid: m1\nkind: fact\n---\nthe billing outage was Monday\n")
    (folder / "m2.md").write_text("---\nid: m2\nkind: fact\n---\nsearch is slow\n")
    (tmp_path / outbox.OUTBOX_NAME).touch()
    return Server(MemoryTools(tmp_path, tmp_path / outbox.OUTBOX_NAME))


def call(server: Server, name: str, arguments: Any) -> dict[str, Any]:
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )
    reply = server.handle(line)
    assert reply is not None
    result: dict[str, Any] = reply["result"]
    return result


def text(result: dict[str, Any]) -> str:
    value: str = result["content"][0]["text"]
    return value


def test_serve_answers_requests_line_by_line_and_ignores_notifications(server: Server) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-03-26"},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    out = io.StringIO()
    server.serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests) + "\n"), out)
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["result"]["protocolVersion"] == "2025-03-26"
    assert replies[0]["result"]["capabilities"] == {"tools": {}}


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("{not json", -32700),
        ("[" * 20_000 + "]" * 20_000, -32700),  # past the decoder's recursion limit
        ('["a list"]', -32600),
        ('{"jsonrpc": "2.0", "id": 3, "method": "resources/list"}', -32601),
        ('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": [1]}', -32602),
    ],
)
def test_protocol_errors_are_json_rpc_errors(server: Server, line: str, code: int) -> None:
    reply = server.handle(line)
    assert reply is not None and reply["error"]["code"] == code


def test_search_ranks_loaded_memory_by_shared_words_and_marks_it_untrusted(server: Server) -> None:
    found = json.loads(text(call(server, "search_memory", {"query": "billing outage", "limit": 5})))
    assert found == {"untrusted_data": [{"id": "m1", "excerpt": "the billing outage was Monday"}]}


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("search_memory", {"query": "!!!"}, "query has no words"),
        ("search_memory", {"query": "x", "limit": "5"}, "limit must be an integer"),
        ("read_memory", {"id": "../../etc/passwd"}, "not a memory id"),
        ("read_memory", {"id": "m9"}, "was not loaded for this run"),
        ("read_memory", {}, "argument 'id' (a string) is required"),
        ("remember", {"content": "x", "source": "stated"}, "field 'source'"),
        ("remember", {"content": "x", "colour": "red"}, "field 'colour'"),
        ("vote", {"memory_id": "m1", "direction": "sideways"}, "field 'direction'"),
        ("delete_everything", {}, "unknown tool"),
        ("remember", ["not", "an", "object"], "arguments must be an object"),
    ],
)
def test_bad_tool_calls_are_error_results_and_write_nothing(
    server: Server, tmp_path: Path, name: str, arguments: Any, reason: str
) -> None:
    result = call(server, name, arguments)
    assert result["isError"] is True and reason in text(result), text(result)
    assert (tmp_path / outbox.OUTBOX_NAME).read_bytes() == b""


def test_remember_and_vote_append_lines_the_outbox_reader_accepts(
    server: Server, tmp_path: Path
) -> None:
    assert (
        call(server, "remember", {"content": "deploys cause outages", "source": "observed"})[
            "isError"
        ]
        is False
    )
    assert call(server, "vote", {"memory_id": "m1", "direction": "down"})["isError"] is False
    found = outbox.read(tmp_path / outbox.OUTBOX_NAME)
    assert found.refused == ()
    assert [type(line).__name__ for line in found.lines] == ["RememberLine", "VoteLine"]


def test_an_outbox_line_nested_past_the_decoders_limit_is_refused_by_number() -> None:
    deep = b"[" * 8_000 + b"]" * 8_000  # within the line limit, past the recursion limit
    found = outbox.parse(b'{"type":"remember","content":"ok","source":"observed"}\n' + deep)
    assert found.refused == ("line 2: not JSON (nested too deeply)",)
    assert len(found.lines) == 1


def test_a_vote_on_a_memory_not_loaded_for_the_run_is_refused_with_the_reason(
    server: Server, tmp_path: Path
) -> None:
    result = call(server, "vote", {"memory_id": "0190a1b2-victim", "direction": "down"})
    assert result["isError"] is True
    assert "vote refused: memory 0190a1b2-victim was not given to this run" in text(result)
    assert (tmp_path / outbox.OUTBOX_NAME).read_bytes() == b""


def test_the_persons_word_cannot_be_voted_down_from_the_sandbox(
    server: Server, tmp_path: Path
) -> None:
    (tmp_path / "memory" / "m3.md").write_text(
        "---\nid: m3\nkind: fact\nsource: stated\n---\nsource: observed (in the content)\n"
    )
    down = call(server, "vote", {"memory_id": "m3", "direction": "down"})
    assert down["isError"] is True and "the person's word (source stated)" in text(down)
    assert call(server, "vote", {"memory_id": "m3", "direction": "up"})["isError"] is False
    found = outbox.read(tmp_path / outbox.OUTBOX_NAME)
    assert [(line.memory_id, line.direction) for line in found.lines] == [("m3", "up")]  # type: ignore[union-attr]
