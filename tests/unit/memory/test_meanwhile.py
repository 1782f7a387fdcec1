"""`memory.meanwhile.Meanwhile`: work in a thread, its result or its error handed back."""

from __future__ import annotations

import threading

import pytest

from memory.meanwhile import THREAD_ABOVE_SECONDS, Meanwhile, worth_a_thread


def test_the_caller_goes_on_while_the_work_runs_and_then_gets_its_result() -> None:
    caller_went_on = threading.Event()

    def work() -> str:
        # Finishes only once the caller has run past the constructor.
        assert caller_went_on.wait(timeout=10)
        return "rows"

    answer = Meanwhile(work)
    caller_went_on.set()
    assert answer() == "rows"


def test_the_work_s_error_is_raised_to_the_caller() -> None:
    def work() -> None:
        raise LookupError("connection dropped")

    answer = Meanwhile(work)
    with pytest.raises(LookupError, match="connection dropped"):
        answer()


def test_only_a_measured_round_trip_above_the_bar_is_worth_a_thread() -> None:
    assert not worth_a_thread(None)  # not measured: SQLite, in process
    assert not worth_a_thread(THREAD_ABOVE_SECONDS / 10)  # loopback
    assert not worth_a_thread(THREAD_ABOVE_SECONDS)
    assert worth_a_thread(THREAD_ABOVE_SECONDS * 5)  # a network hop
