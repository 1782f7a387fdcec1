"""`schedules.api.Schedules` on a real database: what the CLI's show, next, pause,
trigger and backfill do."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedules.api import MAX_BACKFILL, BackfillRangeError, BackfillTooLargeError, Schedules
from schedules.catalog import ScheduleNotFoundError
from schedules.definition import Cron, DefinitionError, Heartbeat, Overlap, Schedule
from schedules.fires import FireOutcome, SkipReason, run_key
from tests.integration.beat_fixtures import T0, Beats, make_beats
from workers.beat import schedules_api

pytestmark = pytest.mark.integration

BERLIN_0230 = Schedule(
    name="nightly",
    agent="demo",
    tenant="acme",
    trigger=Cron("30 2 * * *", timezone="Europe/Berlin"),
)


@pytest.fixture
def beats(database_url: str, tmp_path: Path) -> Iterator[Beats]:
    yield from make_beats(database_url, tmp_path)


@pytest.fixture
def api(beats: Beats) -> Schedules:
    found = schedules_api(beats.app, beats.engine, actor="test")
    found.clock = beats.clock
    return found


def test_next_fires_are_in_the_schedules_zone_across_the_spring_change(
    beats: Beats, api: Schedules
) -> None:
    beats.apply(BERLIN_0230)
    upcoming = api.next("nightly", 3, after=datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert [t.isoformat() for t in upcoming] == [
        "2026-03-29T03:00:00+02:00",  # 02:30 does not exist that night
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_pause_resume_and_show(beats: Beats, api: Schedules) -> None:
    beats.apply(BERLIN_0230)
    api.pause("nightly", note="mail server migration")
    shown = api.show("nightly")
    assert shown.applied.paused and shown.applied.pause_note == "mail server migration"
    assert shown.next_fires == ()
    api.resume("nightly")
    shown = api.show("nightly")
    assert not shown.applied.paused and len(shown.next_fires) == 10
    assert shown.to_json()["definition"]["trigger"]["timezone"] == "Europe/Berlin"


def test_a_command_line_pause_survives_an_edit_until_the_file_changes_its_pause(
    beats: Beats, api: Schedules
) -> None:
    """The pause follows whichever changed last: the file's paused/pause_note, or
    `schedules pause`/`resume`."""

    def state() -> tuple[bool, str]:
        applied = api.get("nightly")
        return applied.paused, applied.pause_note

    beats.apply(BERLIN_0230)
    api.pause("nightly", note="mail server migration")
    beats.apply(BERLIN_0230.replace(goal="summarise"))  # an edit of something else
    assert state() == (True, "mail server migration")
    beats.apply(BERLIN_0230.replace(goal="summarise", paused=True, pause_note="retired"))
    assert state() == (True, "retired")  # the file changed its pause: it wins
    api.resume("nightly")
    beats.apply(BERLIN_0230.replace(goal="digest", paused=True, pause_note="retired"))
    assert state() == (False, "")  # a resume survives an edit too
    beats.apply(BERLIN_0230.replace(goal="digest"))  # the file unpauses: already so
    assert state() == (False, "")
    api.pause("nightly")
    beats.apply(BERLIN_0230.replace(goal="digest", paused=True, pause_note="file says"))
    assert state() == (True, "file says")


def test_a_pause_note_with_a_control_character_is_refused(beats: Beats, api: Schedules) -> None:
    beats.apply(BERLIN_0230)
    with pytest.raises(DefinitionError, match=r"note holds a NUL character \(U\+0000\)"):
        api.pause("nightly", note="db\x00move")
    assert not api.get("nightly").paused


def test_unknown_names_say_so(api: Schedules) -> None:
    with pytest.raises(ScheduleNotFoundError, match="no schedule named 'ghost'"):
        api.show("ghost")


def test_trigger_runs_now_and_respects_overlap(beats: Beats, api: Schedules) -> None:
    beats.apply(BERLIN_0230)
    first = api.trigger("nightly")
    assert first.started == (run_key("nightly", T0),)
    beats.clock.advance(1)
    second = api.trigger("nightly")
    assert second.started == () and [r.reason for r in second.skipped] == [SkipReason.OVERLAP]
    third = api.trigger("nightly", overlap=Overlap.ALLOW_ALL)
    assert third.started == (run_key("nightly", T0 + timedelta(seconds=1)),)
    shown = api.show("nightly")
    assert {r.key for r in shown.runs} == {first.started[0], third.started[0]}
    assert [r.reason for r in shown.not_run] == [SkipReason.OVERLAP]


APRIL = datetime(2026, 4, 1, tzinfo=UTC)
"""A clock after the March ranges the backfill tests run: a backfill ends by now."""


def test_backfill_runs_each_fire_once_even_when_repeated(beats: Beats, api: Schedules) -> None:
    beats.apply(BERLIN_0230)
    beats.clock.at = APRIL
    start, end = datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC)
    done = api.backfill("nightly", start, end, overlap=Overlap.ALLOW_ALL)
    expected = [
        run_key("nightly", datetime(2026, 3, 27, 1, 30, tzinfo=UTC)),
        run_key("nightly", datetime(2026, 3, 28, 1, 30, tzinfo=UTC)),
        run_key("nightly", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),  # 03:00 CEST
        run_key("nightly", datetime(2026, 3, 30, 0, 30, tzinfo=UTC)),
    ]
    assert list(done.started) == expected
    again = api.backfill("nightly", start, end, overlap=Overlap.ALLOW_ALL)
    assert again.started == () and list(again.existed) == expected
    assert sorted(beats.run_keys("nightly")) == sorted(expected)


def test_backfill_with_skip_runs_the_first_and_records_the_rest(
    beats: Beats, api: Schedules
) -> None:
    beats.apply(BERLIN_0230)
    beats.clock.at = APRIL
    done = api.backfill(
        "nightly", datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 3, 29, tzinfo=UTC)
    )
    assert len(done.started) == 1
    assert [(r.outcome, r.reason) for r in done.skipped] == [
        (FireOutcome.SKIPPED, SkipReason.OVERLAP)
    ]


def test_backfill_buffer_one_leaves_one_fire_for_the_beat(beats: Beats, api: Schedules) -> None:
    beats.apply(BERLIN_0230)
    beats.clock.at = APRIL
    done = api.backfill(
        "nightly",
        datetime(2026, 3, 27, tzinfo=UTC),
        datetime(2026, 3, 30, tzinfo=UTC),
        overlap=Overlap.BUFFER_ONE,
    )
    assert len(done.started) == 1 and done.buffered == datetime(2026, 3, 28, 1, 30, tzinfo=UTC)
    assert api.get("nightly").pending_fire_at == done.buffered
    beat = beats.beat()
    beat.tick()
    assert len(beats.run_keys("nightly")) == 1  # still waiting for the first
    beats.finish(done.started[0])
    beats.clock.advance(1.5)
    beat.tick()
    assert run_key("nightly", done.buffered) in beats.run_keys("nightly")
    assert api.get("nightly").pending_fire_at is None


def test_backfill_refuses_a_range_too_large(beats: Beats, api: Schedules) -> None:
    beats.apply(
        Schedule(name="fast", agent="demo", tenant="acme", trigger=Heartbeat(timedelta(seconds=1)))
    )
    beats.clock.advance(MAX_BACKFILL + 5)
    with pytest.raises(BackfillTooLargeError, match="backfill a shorter range"):
        api.backfill("fast", T0, T0 + timedelta(seconds=MAX_BACKFILL + 5))
    assert beats.run_keys("fast") == []


def test_backfill_refuses_a_range_that_ends_in_the_future(beats: Beats, api: Schedules) -> None:
    """Fires still to come are the timer's: run now, they took the run keys the
    timer would use, and the real fires were later dropped as duplicates."""
    beats.apply(BERLIN_0230)
    with pytest.raises(BackfillRangeError, match="the backfill ends in the future"):
        api.backfill("nightly", T0 - timedelta(days=2), T0 + timedelta(days=2))
    with pytest.raises(BackfillRangeError, match="ends .* before it starts"):
        api.backfill("nightly", T0 - timedelta(days=1), T0 - timedelta(days=2))
    assert beats.run_keys("nightly") == []
    done = api.backfill("nightly", T0 - timedelta(days=2), T0)  # up to now is fine
    assert len(done.started) == 1
