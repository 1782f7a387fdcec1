"""Shared CLI plumbing: the root group, settings from flags, output, and exit codes."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import amqp.exceptions
import click
import redis.exceptions
from sqlalchemy import exc

from memory.engine import missing_sqlite_file, safe_url
from memory.phrasing import INVISIBLE
from memory.storable import scope_part_problems
from workers import schema
from workers.runtime import Runtime
from workers.settings import Settings, SettingsError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_INVALID_INPUT = 3
EXIT_UNAVAILABLE = 4


# What a terminal obeys rather than shows: C0 controls but newline and tab (ESC starts
# sequences that clear the screen, retitle the window or set the clipboard; CR goes
# back over the line), DEL, C1 controls (0x9b is a one-byte ESC [), and the bidi
# overrides and isolates that reorder what follows them.
_OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_OBEYED_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: str, *, one_line: bool = False) -> str:
    """`text` as it may reach a terminal: every character the terminal would obey
    instead of show (`_OBEYED`) written as its Python escape (`\\x1b`, `\\r`,
    `\\u202e`); newlines and tabs stay. Tenants, users, goals, payloads, summaries and
    memory content come from events and agents: printed raw, they could rewrite what
    `runs`, `memory show` or `status` shows, or the terminal itself. `one_line` escapes
    newlines and tabs too (a table cell)."""
    obeyed = _OBEYED_OR_BREAK if one_line else _OBEYED
    return obeyed.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


def echo(message: str = "", *, err: bool = False) -> None:
    """`click.echo` for text that may hold what an event or an agent wrote: `shown`."""
    click.echo(shown(message), err=err)


class ShownError(click.ClickException):
    """A CLI error whose message may quote what an event or an agent wrote: `shown`."""

    def format_message(self) -> str:
        return shown(self.message)


class InvalidInput(ShownError):
    """Bad input from the user: says what and where; exit code 3."""

    exit_code = EXIT_INVALID_INPUT


class Unavailable(ShownError):
    """A service (database, broker) could not be reached; exit code 4."""

    exit_code = EXIT_UNAVAILABLE


def broker_refused(error: BaseException) -> str:
    """What to say when the broker answered and said no (`refusal`)."""
    return f"the broker refused: {error} (check NIGHTSHIFT_BROKER_URL)"


_REFUSALS = (
    amqp.exceptions.AMQPError,  # RabbitMQ: a wrong user or password, no such vhost
    redis.exceptions.AuthenticationError,  # Redis: a wrong user or password, or none given
    redis.exceptions.ResponseError,  # Redis: a database index it does not have, no permission
)


def refusal(error: BaseException) -> BaseException | None:
    """The broker's answer behind `error` (kombu wraps it) when the broker answered and
    said no: retrying will not change that answer, so a command or a process should
    say it and stop, not retry. None when the broker did not answer (it may be
    coming up, or restarting): that is for retries."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, _REFUSALS):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class Context:
    def __init__(self, overrides: dict[str, Any]) -> None:
        self._overrides = overrides
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = Settings.from_env(**self._overrides)
            except SettingsError as error:
                raise InvalidInput(str(error)) from None
        return self._settings


pass_context = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option(
    "--data-dir",
    envvar="NIGHTSHIFT_DATA_DIR",
    show_envvar=True,
    type=click.Path(path_type=Path),
    help="Folder for the embedded store, broker and sandboxes.",
)
@click.option(
    "--database-url",
    envvar="NIGHTSHIFT_DATABASE_URL",
    show_envvar=True,
    help="postgresql://… or sqlite:///…  [default: sqlite under the data dir]",
)
@click.option(
    "--broker-url",
    envvar="NIGHTSHIFT_BROKER_URL",
    show_envvar=True,
    help="redis://…, amqp://… or filesystem://  [default: filesystem://]",
)
@click.pass_context
def main_group(
    ctx: click.Context, data_dir: Path | None, database_url: str | None, broker_url: str | None
) -> None:
    """nightshift: background AI agents on Celery, with memory that outlives the sandbox."""
    ctx.obj = Context(
        {"data_dir": data_dir, "database_url": database_url, "broker_url": broker_url}
    )


def connect(obj: Context, *, create: bool = False) -> Runtime:
    """A runtime whose database is reachable and migrated, or a clear exit.

    The embedded SQLite store is migrated on the spot; a server database must be
    migrated by its operator (`nightshift db upgrade`) before use. Only a command
    that starts a deployment (`create`) makes a SQLite file that is not there: any
    other would answer from a new, empty store, and "nothing matches" from a
    mistyped path or another working directory reads as memory that was lost.
    """
    settings = obj.settings
    if not create and (missing := missing_sqlite_file(settings.database_url)) is not None:
        raise Unavailable(
            f"no nightshift database at {missing}: run where `nightshift up` runs (the"
            " default store is .nightshift/ in its working directory), pass --database-url,"
            " or make a new one with `nightshift db upgrade`"
        )
    with reaching_database(settings):
        rt = Runtime(settings)
        engine = rt.engine
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        if engine.dialect.name == "sqlite":
            schema.upgrade(engine)
        elif not schema.is_current(engine):
            raise Unavailable(
                f"the database at {safe_url(settings.database_url)} is not migrated to "
                f"{', '.join(sorted(schema.head_revisions()))}: run `nightshift db upgrade`"
            )
    return rt


@contextmanager
def reaching_database(settings: Settings) -> Iterator[None]:
    """What goes wrong opening and reaching `settings`' database, as a clear exit
    rather than a traceback: a URL it cannot use (exit 3); a server that does not
    answer or refuses, a file it cannot make (exit 4). Every command that touches
    the database goes through here (`connect`, `db upgrade`)."""
    where = safe_url(settings.database_url)
    try:
        yield
    except ValueError as error:  # open_engine: a URL it cannot use; it says which
        raise InvalidInput(str(error)) from None
    except exc.NoSuchModuleError as error:  # a dialect or driver SQLAlchemy does not know
        raise InvalidInput(f"cannot use the database URL {where}: {error}") from None
    except ImportError as error:  # SQLAlchemy imports the URL's driver when first used
        raise InvalidInput(
            f"the database URL {where} needs the module {error.name}, which is not installed"
        ) from None
    except exc.OperationalError as error:
        raise Unavailable(f"cannot reach the database at {where}: {_first_line(error)}") from None
    except OSError as error:  # the SQLite file's folder cannot be made
        raise Unavailable(f"cannot open the database at {where}: {error}") from None


def _first_line(error: exc.DBAPIError) -> str:
    text = str(error.orig) if error.orig is not None else str(error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        fn
    )


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def emit_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str) -> None:
    if not rows:
        click.echo(empty)
        return
    cells = [[shown(str(c), one_line=True) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    click.echo("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def fail(message: str) -> None:
    echo(f"error: {message}", err=True)
    sys.exit(EXIT_ERROR)


TRIGGER_ORIGINS = ("private", "shared", "api")
"""Where a run's trigger came from (`workers.runs.RunRequest.trigger_origin`)."""

# Characters no name is written with: controls, and what a reader does not see (a
# zero-width space makes "ana" and "an\u200ba" two people who look like one).
_CONTROL = re.compile("[\x01-\x1f\x7f-\x9f]")  # a NUL is the store's own refusal


def storable_scope_part(
    part: str, *, empty_ok: bool = True
) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback for the scope part `part` (tenant, user, agent): one the store
    cannot hold (too long, a NUL, a secret: `memory.storable.scope_part_problems`), or
    an empty one where `empty_ok` is false, is a usage error naming the option, not a
    traceback from deeper down (and a secret is never sent on to the writer)."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if not empty_ok:
            not_empty(ctx, param, value)
        if value is not None and (problems := scope_part_problems(part, value)):
            raise click.BadParameter("; ".join(problems))
        return value

    return check


def refuse_odd_scope(**parts: str) -> None:
    """A usage error naming the option when a scope part (tenant=, user=, agent=) to
    write to holds a control or an invisible character: no one means to type one.
    Reads take such scopes (an event may have made one) and print them escaped."""
    for part, value in parts.items():
        if problems := _odd(part, value):
            raise click.BadParameter("; ".join(problems), param_hint=f"'--{part}'")


def _odd(part: str, value: str) -> list[str]:
    """What in a scope part no one means to type, never quoting it."""
    problems = []
    if _CONTROL.search(value):
        problems.append(f"scope {part} holds a control character (tab, newline, escape…)")
    if INVISIBLE.search(value):
        problems.append(f"scope {part} holds an invisible character (zero-width space, bidi mark…)")
    return problems


def not_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: an option given as "" (an unset variable in a script) is a
    usage error naming the option, not a traceback from deeper down."""
    if value is not None and not value.strip():
        raise click.BadParameter("must not be empty")
    return value
