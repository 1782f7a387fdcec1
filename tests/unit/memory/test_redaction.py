from __future__ import annotations

import pytest

from memory.redaction import redact, redact_json

TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789AB"


def test_redact_keeps_the_setting_and_replaces_its_value() -> None:
    assert redact("password=hunter2 and more") == (
        "password=[REDACTED:password_assignment] and more"
    )


def test_every_string_of_a_payload_is_redacted_keys_included() -> None:
    payload = {"note": f"use {TOKEN}", TOKEN: 1, "cards": [4111111111111111, "ok"]}
    assert redact_json(payload) == {
        "note": "use [REDACTED:github_token]",
        "[REDACTED:github_token]": 1,
        "cards": ["[REDACTED:card_number]", "ok"],
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"password": "hunter2"},
        {"db": {"password": "Tr0ub4dor&3"}},
        {"api_key": "abc123def456"},
        {"client_secret": "s3cr3t-value"},
        {"pin": 4921},
    ],
)
def test_a_value_that_is_a_secret_by_its_key_is_replaced_whole(payload: dict) -> None:
    redacted = redact_json(payload)
    assert "[REDACTED:" in str(redacted)
    for secret in ("hunter2", "Tr0ub4dor&3", "abc123def456", "s3cr3t-value", "4921"):
        assert secret not in str(redacted)


@pytest.mark.parametrize(
    "payload",
    [
        {"password_changed": True},
        {"password": ""},
        {"passengers": 3, "pass": 120, "fail": 3},
        {"message": "the invoice is due on 2027-03-01", "amount": 1200},
        {"token_count": 512},
    ],
)
def test_ordinary_values_are_kept(payload: dict) -> None:
    assert redact_json(payload) == payload
