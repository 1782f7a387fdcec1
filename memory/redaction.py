"""Text and JSON with every secret replaced by a marker that names its kind
(``[REDACTED:github_token]``): what run records, logs and error messages keep
where the secret was (`memory.secrets` finds them).
"""

from __future__ import annotations

from typing import Any

from memory.secrets import find_secrets, found_as_read


def redact(text: str) -> str:
    """`text` with every secret replaced by ``[REDACTED:<kind>]``.

    Overlapping findings are merged into one marker named after the finding that
    starts first (the longest, on a tie), so no part of any secret survives.
    """
    # A secret only another reading shows: the text is given as so read, so that the
    # marker can stand where the secret was.
    text, findings = found_as_read(text)
    if not findings:
        return text
    out: list[str] = []
    pos = 0
    current = findings[0]
    end = current.end
    for finding in findings[1:]:
        if finding.start < end:
            end = max(end, finding.end)
            continue
        out += [text[pos : current.start], f"[REDACTED:{current.kind}]"]
        pos, current, end = end, finding, finding.end
    out += [text[pos : current.start], f"[REDACTED:{current.kind}]", text[end:]]
    return "".join(out)


def redact_json(value: Any) -> Any:
    """`value` (parsed JSON) with every secret in it replaced by its marker: in each
    string, keys included; a number that is one (a card number sent as an integer);
    and a value that is one because of its key. `{"password": "hunter2"}` holds
    what `password=hunter2` does, though neither string does alone: such a value is
    replaced whole."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_json(k): _redact_value(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and (found := find_secrets(str(value)))
    ):
        return f"[REDACTED:{found[0].kind}]"
    return value


def _redact_value(key: Any, value: Any) -> Any:
    if isinstance(key, str) and isinstance(value, str | int) and not isinstance(value, bool):
        text = str(value)
        alone = {f.kind for part in (key, text) for f in found_as_read(part)[1]}
        if by_key := [f.kind for f in found_as_read(f"{key}={text}")[1] if f.kind not in alone]:
            return f"[REDACTED:{by_key[0]}]"
    return redact_json(value)
