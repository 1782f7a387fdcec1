"""The LLM loop's tool calls: bad arguments are error results the model reads."""

from __future__ import annotations

import json

from workers.adapters.llm import _call_tool


def test_arguments_nested_past_the_decoders_limit_are_an_error_result() -> None:
    deep = "[" * 20_000 + "]" * 20_000
    reply = _call_tool(
        {"remember": lambda args: args},
        {"id": "c1", "function": {"name": "remember", "arguments": deep}},
    )
    assert reply["tool_call_id"] == "c1"
    assert json.loads(reply["content"])["error"].startswith("RecursionError")


def test_arguments_that_are_not_an_object_are_an_error_result() -> None:
    reply = _call_tool(
        {"remember": lambda args: args},
        {"id": "c2", "function": {"name": "remember", "arguments": "[1]"}},
    )
    assert "must be a JSON object" in json.loads(reply["content"])["error"]
