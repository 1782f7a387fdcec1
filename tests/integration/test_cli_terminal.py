"""What the CLI prints of text an event or an agent wrote: shown, never obeyed.

A tenant, user and goal come with an event; a summary, an error and memory content
come from an agent. Printed raw, an escape sequence in them would clear the
operator's screen, retitle the window or write the clipboard (OSC 52), and a
carriage return would print over the line it is on."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

from memory.engine import open_engine
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store
from workers import runs, schema
from workers.cli import main_group
from workers.cli.base import shown
from workers.runs import RunRequest, RunStatus

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
TITLE = "\x1b]0;owned\x07"  # set the window title (OSC)
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # put "rm -rf ~" on the clipboard (OSC 52)
C1_CSI = "\x9b31m"  # the one-byte form of ESC [
TENANT = f"acme{CLEAR}"
USER = "ana\rroot"  # the user column would read "root"
OBEYED = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


@pytest.fixture
def url(database_url: str) -> Iterator[str]:
    engine = open_engine(database_url)
    schema.upgrade(engine)
    store = Store(engine)
    scope = Scope(TENANT, USER, "triage")
    content = f"INC-7 is fixed{TITLE}{CLIPBOARD}\u202eexe.txt"
    said = Candidate(scope, Kind.FACT, content, Provenance(Source.STATED, task_id="t"))
    assert store.apply([said], handle="h", actor="t").counts() == {"stored": 1}
    key = f"triage/{TENANT}/{USER}@event:1"
    with engine.begin() as conn:
        request = RunRequest(key=key, agent="triage", tenant=TENANT, user=USER, goal=TITLE)
        runs.create(conn, [request], T0)
        assert runs.claim(conn, key, "w", T0, timedelta(seconds=30))
        runs.finish(
            conn, key, "w", T0, status=RunStatus.FAILED, error=f"{C1_CSI}boom{CLIPBOARD}\rok"
        )
    yield engine.url.render_as_string(hide_password=False)
    engine.dispose()


def invoke(url: str, *args: str) -> Result:
    # color=True: the output a terminal gets (click strips some ESC [ sequences only
    # when it writes to a pipe, and OSC, CR and C1 controls never).
    return CliRunner().invoke(main_group, ["--database-url", url, *args], color=True)


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["runs", "tree", f"triage/{TENANT}/{USER}@event:1"],
        ["memory", "show", "--tenant", TENANT, "--user", USER, "--agent", "triage"],
        ["memory", "search", "INC-7", "--tenant", TENANT, "--user", USER, "--agent", "triage"],
        ["memory", "why", f"triage/{TENANT}/{USER}@event:1"],
        ["runs", "tree", f"triage/{TENANT}/nobody{TITLE}"],  # an error quoting the input
    ],
)
def test_what_events_and_agents_wrote_is_printed_escaped(url: str, command: list[str]) -> None:
    result = invoke(url, *command)
    printed = result.output
    assert not [c for c in OBEYED if c in printed], printed
    assert "\\x1b" in printed or "\\r" in printed or "\\x9b" in printed, printed


def test_shown_escapes_what_a_terminal_obeys_and_keeps_the_rest() -> None:
    assert shown(f"a{CLEAR}b") == "a\\x1b[2J\\x1b[Hb"
    assert shown("ana\rroot\x00\x7f\x9b\u202e\u2066") == "ana\\rroot\\x00\\x7f\\x9b\\u202e\\u2066"
    assert (
        shown("two\nlines\tand Żubrówka, 日本, emoji 🎉")
        == "two\nlines\tand Żubrówka, 日本, emoji 🎉"
    )
    assert shown("two\nlines\t", one_line=True) == "two\\nlines\\t"
