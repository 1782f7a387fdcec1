"""What a run request keeps of an event: everything but its secrets."""

from __future__ import annotations

from datetime import UTC, datetime

from workers.runs import RunRequest


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
            "count": 3,
            "ok": True,
        },
    )
    assert request.goal == "log in with password=[REDACTED:password_assignment]"
    assert request.payload == {
        "note": "db at postgres://app:[REDACTED:url_password]@db/x",
        "card": "[REDACTED:card_number]",
        "[REDACTED:aws_access_key]": [{"deep": "key [REDACTED:aws_access_key]"}],
        "count": 3,
        "ok": True,
    }
    assert "Sup3rS3cret" not in str(request.row(datetime(2026, 12, 4, tzinfo=UTC)))
