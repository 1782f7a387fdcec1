"""The writer's shortcuts change no decision: the secret prefilter, the one joined
text the gate scans, the content hash made once, the id made without `uuid`, and
the queued updates of an apply."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory import cards, policy, secrets
from memory.pending import PendingWrites
from memory.policy import Action, AgentRules, Rule, judge
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.writing import _idempotency_key, new_id

ANA = Scope("acme", "ana", "triage")

# One example of every kind `find_secrets` knows.
SECRET_OF_EACH_KIND = {
    "card_number": "card 4111 1111 1111 1111 on file",
    "private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "aws_access_key": "id AKIAIOSFODNN7EXAMPLE in the log",
    "aws_secret_key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github_token": "push with ghp_16C7e42F292c6912E7710c838347Ae178B4a and retry",
    "gitlab_token": "gitlab glpat-Ab3dEf6hIj9kLm2nOp5q ok",
    "npm_token": "npm npm_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123 ok",
    "huggingface_token": "hf hf_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z01 ok",
    "openai_key": "the key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_-Q7 works",
    "anthropic_key": "use sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 now",
    "slack_token": "bot xoxb-1234567890-abcdefghijkl ok",
    "slack_webhook": "post to https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXX",
    "stripe_key": "stripe rk_live_4eC39HqLyjWDarjtT1zdp7dc ok",
    "google_api_key": "maps AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW in config",
    "jwt": "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fwpMeJf36P",
    "bearer_token": "curl -H 'Authorization: Bearer abc123.xyz' url",
    "basic_auth": "Authorization: Basic dXNlcjpwYXNz",
    "url_password": "DATABASE_URL=postgres://app:s3cr3t@db:5432/app",
    "password_assignment": "DB_PASSWORD=abc123 ./run",
    "password_in_prose": "my password is hunter2",
    "pin": "the door PIN: 4921",
    "sendgrid_key": "key SG.abcdefghijklmnopqrstuv.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq",
    "generic_api_key_assignment": "client_secret => 's3kr1t'",
}


def test_the_examples_cover_every_kind() -> None:
    kinds = {d.kind for d in secrets._DETECTORS} | {"card_number"}
    assert set(SECRET_OF_EACH_KIND) == kinds


@pytest.mark.parametrize(("kind", "text"), sorted(SECRET_OF_EACH_KIND.items()))
@pytest.mark.parametrize("field", ["content", "key", "evidence", "reference", "meta"])
def test_the_gate_refuses_every_kind_of_secret_in_every_field(
    kind: str, text: str, field: str
) -> None:
    content, key, evidence, reference, meta = "a plain note", "", "", "", {}
    if field == "content":
        content = text
    elif field == "key":
        key = text[:256]
    elif field == "evidence":
        evidence = text
    elif field == "reference":
        reference = text
    else:
        meta = {"nested": [{"value": text}]}
    candidate = Candidate(
        ANA,
        Kind.FACT,
        content,
        Provenance(Source.STATED, reference=reference),
        key=key,
        evidence=evidence,
        meta=meta,
    )
    verdict = judge(candidate, AgentRules.default())
    assert (verdict.action, verdict.rule) == (Action.REFUSE, Rule.SECRET)
    assert kind in verdict.reason


@pytest.mark.parametrize("anchor", sorted({a for d in secrets._DETECTORS for a in d.anchors}))
def test_every_anchor_passes_the_prefilter(anchor: str) -> None:
    for written in (anchor, anchor.upper(), f"x {anchor.title()} y"):
        assert secrets._ANY_ANCHOR.search(secrets._lower_aligned(written)), written


# Text made of the pieces secrets are made of, so that the prefilter is tried on
# near misses as well as on hits.
PIECES = st.sampled_from(
    sorted({a for d in secrets._DETECTORS for a in d.anchors})
    + ["=", ": ", "'", '"', " ", "-", "\n", "4111", "1111 ", "5500", "0000", "0004", "12", "9"]
    + ["AKIA", "IOSFODNN7EXAMPLE", "password", "Bearer ", "abc123def456ghi789", "@db", "Zoë"]
)


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(PIECES | st.text(max_size=6), max_size=24).map("".join))
def test_the_prefilter_never_changes_a_finding(text: str) -> None:
    full = secrets._scan(text, secrets._lower_aligned(text)) if text else []
    assert secrets.find_secrets(text) == full


def test_ordinary_text_is_answered_by_the_prefilter_alone() -> None:
    text = "w180 w0 w64 customer invoice server, renewal due in May"
    assert secrets._ANY_ANCHOR.search(text.lower()) is None
    assert cards.DIGIT_RUN.search(text) is None
    assert secrets.find_secrets(text) == []


@pytest.mark.parametrize(
    "candidate",
    [
        Candidate(ANA, Kind.FACT, "plain", Provenance(Source.OBSERVED)),
        Candidate(
            ANA,
            Kind.GOAL,
            "text",
            Provenance(Source.SUBAGENT, "ref", "run", "task", "agent", "sub", "sched", "ana"),
            key="k",
            idempotency_key="i",
            evidence="e",
            subagent_state="succeeded",
            meta={"a": [1, {"b": b"bytes"}], "n": None, "t": True, 4: 4.5},
        ),
    ],
)
def test_the_joined_scan_text_is_every_stored_text(candidate: Candidate) -> None:
    expected = policy._FIELD_BREAK.join(t for _, t in policy._stored_texts(candidate) if t)
    assert policy._all_stored_text(candidate) == expected


@pytest.mark.parametrize(
    ("key", "idempotency_key", "task_id", "run_id"),
    [("", "", "t", "r"), ("slot", "", "t", "r"), ("", "", "", "r"), ("slot", "mine", "t", "r")],
)
def test_the_idempotency_key_made_from_a_known_hash(
    key: str, idempotency_key: str, task_id: str, run_id: str
) -> None:
    from memory.records import content_hash

    candidate = Candidate(
        ANA,
        Kind.FACT,
        "Some  Content",
        Provenance(Source.OBSERVED, task_id=task_id, run_id=run_id),
        key=key,
        idempotency_key=idempotency_key,
    )
    made = _idempotency_key(candidate, content_hash(candidate.content))
    assert made == candidate.effective_idempotency_key()


def test_new_ids_are_version_7_uuids_of_their_millisecond() -> None:
    at = datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=UTC)
    ids = {new_id(at) for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
        assert str(parsed) == text
        assert parsed.int >> 80 == int(at.timestamp() * 1000)


def test_later_ids_sort_after_earlier_ones() -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    made = [new_id(start + timedelta(milliseconds=n)) for n in range(0, 5000, 7)]
    assert made == sorted(made)


def test_an_update_is_queued_only_when_one_statement_can_carry_it() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    queue = PendingWrites()
    assert queue.queue_update("a", {"content": "x", "version": 2})
    assert queue.queue_update("a", {"status": "superseded", "version": 3})
    assert queue.updates == {"a": {"content": "x", "status": "superseded", "version": 3}}
    assert not queue.queue_update("b", {"valid_to": None})  # NULL is "keep" in the statement
    assert not queue.queue_update("b", {"score": 0.5})  # not a column an apply changes
    queue.successors.append(("c", "d", at))
    assert not queue.queue_update("c", {"content": "y"})  # would write "c" twice
    assert "b" not in queue.updates and "c" not in queue.updates
