"""What a run request keeps of an event: everything but its secrets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from schedules.definition import MAX_PAYLOAD_DEPTH, nesting_depth
from workers.runs import PayloadNotJSONError, PayloadTooDeepError, RunRequest


def test_secrets_in_a_payload_or_a_goal_are_never_kept() -> None:
    request = RunRequest(
        key="feed/acme/ana@event:1",
        agent="feed",
        tenant="acme",
        goal="log in with password=hunter2",
        payload={
            "note": "db at postgres://app:Sup3rS3cret@db/x",
            "card": 4111111111111111,
            "AKIAIOSFODNN7EXAMPLE": [{"deep": "key AKIA\u200bIOSFODNN7EXAMPLE"}],
            "login": {"user": "ana", "password": "hunter2"},
            "count": 3,
            "ok": True,
        },
    )
    assert request.goal == "log in with password=[REDACTED:password_assignment]"
    assert request.payload == {
        "note": "db at postgres://app:[REDACTED:url_password]@db/x",
        "card": "[REDACTED:card_number]",
        "[REDACTED:aws_access_key]": [{"deep": "key [REDACTED:aws_access_key]"}],
        "login": {"user": "ana", "password": "[REDACTED:password_assignment]"},
        "count": 3,
        "ok": True,
    }
    assert "Sup3rS3cret" not in str(request.row(datetime(2026, 12, 4, tzinfo=UTC)))


def nested(levels: int) -> dict[str, Any]:
    payload: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        payload = {"a": payload}
    return payload


def test_a_payload_nested_past_the_limit_is_refused_before_anything_walks_it() -> None:
    assert nesting_depth(nested(MAX_PAYLOAD_DEPTH), MAX_PAYLOAD_DEPTH) == MAX_PAYLOAD_DEPTH
    RunRequest(key="k", agent="feed", tenant="acme", payload=nested(MAX_PAYLOAD_DEPTH))
    for levels in (MAX_PAYLOAD_DEPTH + 1, 5_000):  # 5,000: past Python's recursion limit
        with pytest.raises(PayloadTooDeepError, match="nests deeper than 64 levels"):
            RunRequest(key="k", agent="feed", tenant="acme", payload=nested(levels))


def test_nesting_depth_counts_lists_and_mappings_alike() -> None:
    assert nesting_depth({}, 64) == 1 and nesting_depth(3, 64) == 0
    assert nesting_depth({"a": [1, {"b": []}], "c": "x"}, 64) == 4
    assert nesting_depth([[[[[]]]]], 2) == 3  # stops just past `stop`


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"reading": float("nan")}, "NaN or Infinity"),
        ({"deep": [{"limit": float("-inf")}]}, "NaN or Infinity"),
        ({"when": datetime(2026, 12, 4, tzinfo=UTC)}, "datetime is not JSON serializable"),
        ({"tags": {"a", "b"}}, "set is not JSON serializable"),
    ],
)
def test_a_payload_json_has_no_form_for_is_refused_at_the_door(
    payload: dict[str, Any], message: str
) -> None:
    # Kept, NaN became `NaN` in the run row and `runs --json` printed text no JSON
    # reader accepts; a set or a date failed later, inside the enqueue's transaction.
    with pytest.raises(PayloadNotJSONError, match=message):
        RunRequest(key="k", agent="feed", tenant="acme", payload=payload)
