from __future__ import annotations

import io
import logging

from workers.log_redaction import redact_handlers

TOKEN = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"


def _logger() -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    logger = logging.getLogger(f"test.redaction.{id(out)}")
    logger.propagate = False
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    redact_handlers(logger)
    return logger, out


def test_a_secret_in_a_message_or_its_arguments_is_redacted() -> None:
    logger, out = _logger()
    logger.warning("key %s refused", TOKEN)
    logger.warning(f"key {TOKEN} refused")
    assert TOKEN not in out.getvalue()
    assert out.getvalue().count("key [REDACTED:") == 2


def test_a_secret_in_a_traceback_is_redacted_and_the_traceback_kept() -> None:
    logger, out = _logger()
    try:
        raise RuntimeError(f"login refused for {TOKEN}")
    except RuntimeError:
        logger.exception("run failed")
    text = out.getvalue()
    assert "Traceback (most recent call last)" in text and "RuntimeError: login refused" in text
    assert TOKEN not in text


def test_a_record_without_a_secret_is_left_as_it_was() -> None:
    logger, out = _logger()
    logger.info("run %s done in %d ms", "agent/acme/*@manual:1", 12)
    logger.setLevel(logging.INFO)
    logger.info("run %s done in %d ms", "agent/acme/*@manual:1", 12)
    assert out.getvalue() == "INFO run agent/acme/*@manual:1 done in 12 ms\n"


def test_redacting_twice_adds_one_filter() -> None:
    logger, _ = _logger()
    redact_handlers(logger)
    assert len(logger.handlers[0].filters) == 1
