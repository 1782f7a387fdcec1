"""Find secrets in text so that they are never stored, logged or returned.

The write gate refuses any candidate that holds one (`memory.policy`), and logs,
error messages and task results pass text through `memory.redaction.redact` first. Detection is
pure and fast: every pattern is compiled once at import and is tried only where
its literal anchor (``"akia"``, ``"-----begin"``, ``"pass"``...) occurs, so scanning
10 KB of ordinary prose takes about a quarter of a millisecond.

What is detected, by kind:

- ``card_number`` — 13 to 19 digits, contiguous or in groups split by a space (or
  two), a dash (alone or set off by spaces), an en dash, a dot, a slash, an
  underscore, a comma, a tab or a line break (first group of four), that pass the
  Luhn check and start like an issued card (3, 4, 5, 6, or Mastercard/Mir
  2200–2720). Long numbers that fail Luhn, decimals, ISO dates and ``+``-prefixed
  phone numbers are not flagged, nor lists: groups split by a comma, a tab or a
  line break are a card only as four groups of four, not ascending, with no
  number beside them ("rooms 6011, 6012, 6013, 6014" is a list).
- ``private_key`` — a PEM/OpenSSH/PGP private key block (four or five dashes, the
  header's words may be split across lines), to its END line or, if truncated, to
  the end of the text.
- ``aws_secret_key`` also without a label: 40 characters of mixed-case base64
  following an access key id (``AKIA…``) on the same line.
- ``password_assignment`` also as a MySQL client argument: ``mysql -pS3cret``.
- ``aws_access_key``, ``aws_secret_key``, ``github_token``, ``openai_key``,
  ``anthropic_key``, ``slack_token``, ``slack_webhook``, ``stripe_key``,
  ``google_api_key``, ``sendgrid_key``, ``jwt`` — provider token formats.
- ``bearer_token``, ``basic_auth`` — an ``Authorization:`` header value (and a
  bare ``Bearer <token>`` whose token looks random).
- ``url_password`` — the password in ``scheme://user:password@host``.
- ``password_in_prose`` — what a sentence says a password is: "my password is
  hunter2", "the wifi password is 'sunflower'". The value must be quoted or hold a
  digit, a symbol or an inner capital: "the password is expired" is English.
- ``pin`` — "PIN: 4921", "pin code is 4921": four to eight digits.
- ``password_assignment`` (password, passwd, pwd, passphrase, passcode,
  credentials, and password in German, Dutch, Spanish, Portuguese, French, Polish,
  Russian and Chinese; ``pass`` and ``pw`` only with a value mixing letters and
  digits or symbols, since "pass=120 fail=3" is a test count) and
  ``generic_api_key_assignment`` (secret, api_key, api key, token, access_key,
  private_key, auth_key, AccountKey, SharedAccessKey) — ``key=value``,
  ``key: value``, ``"key": "value"``, ``key => value``, ``key — value`` with a
  non-empty value, case-insensitive. Placeholders (``***``, ``<password>``,
  ``${VAR}``, ``{{ var }}``, ``[REDACTED:...]``, ``true``/``false``) and code
  (``token == x``, ``password: str``) are not secrets, so redacting twice changes
  nothing; nor is code that reads a value (``os.environ["API_KEY"]``,
  ``getpass.getpass()``). Prose such as "the token: expired" *is* flagged: a false alarm refuses
  one memory, a miss stores a secret.

For assignments, headers and URLs the finding covers the value only, so a redacted
log line still says which setting was there: ``password=[REDACTED:password_assignment]``.

`find_secrets` reads the text as written. `find_secrets_as_read` (what the gate
asks) also reads it as a reader or a program would: escapes decoded
(``password%3D…``, ``password&#61;…``, ``password\\u003d…``), invisible characters
dropped, compatibility forms folded, digits of every script read as digits, and
look-alike letters of other scripts read as Latin (``раssword`` with a Cyrillic р).

Example:
    >>> [f.kind for f in find_secrets("card 4111 1111 1111 1111, key AKIAIOSFODNN7EXAMPLE")]
    ['card_number', 'aws_access_key']
    >>> contains_secret("order 1234567890123 shipped 2024-05-01")
    False
"""

from __future__ import annotations

import html
import re
import sys
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from memory.cards import DIGIT_RUN, card_spans
from memory.literals import trie
from memory.phrasing import CONFUSABLES, as_read


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One secret in a text: its kind and the half-open span ``text[start:end]``."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Detector:
    """A pattern tried only where one of its anchors occurs.

    Each match starts at an anchor: a lower-case literal (the start of what the pattern
    matches) found with `str.find` in the lowered text. Finding literals in C and
    matching only there keeps `find_secrets` fast: a regex that opens with a
    look-behind or a case-insensitive alternation would be tried at every one of the
    10,000 positions of a 10 KB text.
    """

    kind: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    # Rejects a matched value that is not really a secret (e.g. a placeholder).
    accept: Callable[[str], bool] | None = None


_PLACEHOLDER = re.compile(
    r"""
    \[REDACTED[^\]]*\]      # our own redaction marker
    | \*+ | x{3,} | \.{3,} | •+
    | <[^<>]*>              # <password>
    | \$\{?\w+\}?           # $VAR, ${VAR}
    | \{\{.*\}\}            # {{ var }}
    | %\(\w+\)s             # %(password)s
    | null | none | nil | undefined | true | false
    | str | bytes | bool | int | optional\[\w+\]    # "password: str = ..." in code
    # Code that reads the value from the environment or a prompt: os.environ["API_KEY"],
    # getenv('TOKEN'), getpass.getpass(), process.env.API_KEY. An upper-case name only:
    # SecretStr("hunter2") wraps the secret itself.
    | [a-z_]\w*(?:\.[a-z_]\w*)*[(\[][ \t]*["'](?-i:[A-Z][A-Z0-9_]{0,63})["'][ \t]*[)\]]?
    | [a-z_]\w*(?:\.[a-z_]\w*)+\(\)
    | process\.env\.\w+
    """,
    re.IGNORECASE | re.VERBOSE,
)


def _not_placeholder(value: str) -> bool:
    value = value.strip()
    trimmed = value.rstrip(".,;:)]}")  # "password=***," in prose
    return not (_PLACEHOLDER.fullmatch(value) or _PLACEHOLDER.fullmatch(trimmed))


_WORDLIKE = re.compile(r"[A-Za-z][a-z]*[.,;:!?)\]]*")


def _a_password(value: str) -> bool:
    """Whether the value a sentence gives a password is one: quoted, or a word with a
    digit, a symbol or an inner capital ("hunter2", "Tr0ub4dor&3", "sunFlower"), or
    four digits or more (a PIN; "12 characters long" is a length). A plain word is how English goes on ("the password is expired", "is required"),
    so "my password is sunflower" is not found: words alone cannot tell the two apart."""
    if value[:1] in "\"'":
        return _not_placeholder(value[1:-1])
    bare = value.rstrip(".,;:!?)]")
    if bare.isdigit():  # a PIN, not "12 characters long"
        return len(bare) >= 4
    return _not_placeholder(value) and not _WORDLIKE.fullmatch(value)


def _a_mixed_value(value: str) -> bool:
    """A value with a letter and a digit or a symbol: "hunter2", not "120" or "yes"."""
    bare = value.strip("\"'`").rstrip(".,;:)]}")
    return _not_placeholder(value) and any(ch.isalpha() for ch in bare) and not bare.isalpha()


# The value of an assignment: quoted (non-empty, may hold spaces) or a bare word.
# Bounded, so that trying every anchor of "password=password=..." stays linear.
_VALUE = (
    r"""(?:"((?:[^"\\\n]|\\.){1,1024})"|"""  # "double quoted"
    r"""'((?:[^'\\\n]|\\.){1,1024})'|"""  # 'single quoted'
    r"""`([^`\n]{1,1024})`|"""  # `backticks`
    r"""(<[^<>\n]{0,64}>|\{\{[^}\n]{0,128}\}\})|"""  # <placeholder>, {{ template }}
    r"""([^\s"'`]\S{0,1023}))"""  # bare
)
# "=" but not "==" (a comparison), ":" but not "::", or a dash set off by a space.
_ASSIGN = r"""["']?[ \t]*(?:=>|:=|=(?!=)|:(?!:)|[—–](?=[ \t]))[ \t]*"""
# A token starts where a run of token characters starts, not inside one.
_START = r"(?<![A-Za-z0-9_-])"
_END = r"(?![A-Za-z0-9_])"

# Anchors may be prefixes of the words the pattern then checks ("pass" -> password).
_PASSWORD_ANCHORS = ("pass", "pwd")
_KEY_ANCHORS = ("secret", "token", "api", "access", "private", "auth", "account", "shared")
# "Password" in the languages most often met, and "credentials".
_PASSWORD_WORDS_ELSEWHERE = (
    r"credentials?|passwort|kennwort|wachtwoord|contrase(?:ñ|n)a|senha|mot[ \t]+de[ \t]+passe"
    r"|has[łl]o|пароль|密码"
)
_ELSEWHERE_ANCHORS = (
    "credential",
    "kennwort",
    "wachtwoord",
    "contrase",
    "senha",
    "mot de passe",
    "hasło",
    "haslo",
    "пароль",
    "密码",
)


def _assignment(words: str) -> re.Pattern[str]:
    return re.compile(rf"(?:{words}){_ASSIGN}{_VALUE}", re.IGNORECASE)


_DETECTORS: tuple[_Detector, ...] = (
    _Detector(
        "private_key",
        re.compile(
            r"-{4,5}BEGIN\s+(?:[A-Z0-9]+\s+){0,4}PRIVATE\s+KEY(?:\s+BLOCK)?-{4,5}"
            r".*?(?:-{4,5}END\s+(?:[A-Z0-9]+\s+){0,4}PRIVATE\s+KEY(?:\s+BLOCK)?-{4,5}|\Z)",
            re.DOTALL | re.IGNORECASE,
        ),
        anchors=("-----begin", "----begin"),
    ),
    _Detector(
        "aws_access_key",
        re.compile(rf"{_START}(?:AKIA|ASIA)[A-Z0-9]{{16}}{_END}"),
        anchors=("akia", "asia"),
    ),
    _Detector(
        "aws_secret_key",
        re.compile(
            r"aws[_ -]?secret(?:[_ -]?(?:access[_ -]?)?key)?"
            rf"(?:{_ASSIGN}|[ \t]+(?:is[ \t]+)?)[\"']?"
            r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
            re.IGNORECASE,
        ),
        anchors=("aws",),
    ),
    _Detector(
        # Unlabelled, as a credentials file or a pasted pair gives it: "AKIA…,wJalr…".
        "aws_secret_key",
        re.compile(
            r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])[^\n]{0,80}?(?<![A-Za-z0-9/+=])"
            r"((?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])[A-Za-z0-9/+]{40})"
            r"(?![A-Za-z0-9/+=])"
        ),
        anchors=("akia", "asia"),
    ),
    _Detector(
        "github_token",
        re.compile(
            rf"{_START}(?:gh[pousr]_[A-Za-z0-9]{{20,255}}|github_pat_[A-Za-z0-9_]{{20,255}}){_END}"
        ),
        anchors=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _Detector(
        "gitlab_token",
        re.compile(rf"{_START}glpat-[A-Za-z0-9_-]{{20,}}"),
        anchors=("glpat-",),
    ),
    _Detector(
        "npm_token",
        re.compile(rf"{_START}npm_[A-Za-z0-9]{{36}}{_END}"),
        anchors=("npm_",),
    ),
    _Detector(
        "huggingface_token",
        re.compile(rf"{_START}hf_[A-Za-z0-9]{{34,}}{_END}"),
        anchors=("hf_",),
    ),
    _Detector(
        "sendgrid_key",
        re.compile(rf"{_START}SG\.[A-Za-z0-9_-]{{16,32}}\.[A-Za-z0-9_-]{{16,64}}{_END}"),
        anchors=("sg.",),
    ),
    _Detector(
        "anthropic_key",
        re.compile(rf"{_START}sk-ant-[A-Za-z0-9_-]{{20,}}"),
        anchors=("sk-ant-",),
    ),
    _Detector(
        "openai_key",
        re.compile(rf"{_START}sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{{20,}}"),
        anchors=("sk-",),
    ),
    _Detector(
        "slack_token",
        re.compile(rf"{_START}(?:xox[baprs]-[A-Za-z0-9-]{{10,}}|xapp-\d-[A-Za-z0-9-]{{10,}})"),
        anchors=("xox", "xapp-"),
    ),
    _Detector(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"),
        anchors=("https://hooks.slack.com/services/",),
    ),
    _Detector(
        "stripe_key",
        re.compile(rf"{_START}(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{10,}}"),
        anchors=("sk_", "rk_"),
    ),
    _Detector(
        "google_api_key",
        re.compile(rf"{_START}AIza[0-9A-Za-z_-]{{30,}}"),
        anchors=("aiza",),
    ),
    _Detector(
        "jwt",
        re.compile(rf"{_START}eyJ[A-Za-z0-9_-]{{4,}}\.[A-Za-z0-9_-]{{4,}}\.[A-Za-z0-9_-]*"),
        anchors=("eyj",),
    ),
    _Detector(
        "bearer_token",
        re.compile(
            r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*(?:bearer|token)[ \t]+"
            r"([A-Za-z0-9._~+/=-]+)",
            re.IGNORECASE,
        ),
        anchors=("authorization",),
    ),
    _Detector(
        # A bare "Bearer <token>" only when the token looks random, not "bearer bonds".
        "bearer_token",
        re.compile(r"bearer[ \t]+((?=[A-Za-z._~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*)", re.IGNORECASE),
        anchors=("bearer",),
    ),
    _Detector(
        "basic_auth",
        re.compile(
            r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*basic[ \t]+([A-Za-z0-9+/=]+)",
            re.IGNORECASE,
        ),
        anchors=("authorization",),
    ),
    _Detector(
        "url_password",
        re.compile(r"://[^\s/:@]{0,256}:([^\s/@]{1,256})@"),
        anchors=("://",),
        accept=_not_placeholder,  # Celery logs a URL's password as "**"
    ),
    _Detector(
        "password_assignment",
        _assignment(rf"passw(?:or)?d|passphrase|passcode|pwd|{_PASSWORD_WORDS_ELSEWHERE}"),
        anchors=_PASSWORD_ANCHORS + _ELSEWHERE_ANCHORS,
        accept=_not_placeholder,
    ),
    _Detector(
        # "pass: hunter2", "db_pass=s3cret", "pw: x9y8": short words that also name
        # counts ("pass=120 fail=3"), so the value must mix letters with digits or symbols.
        "password_assignment",
        _assignment(r"(?<![a-z])(?:pass|pw)(?![a-z])"),
        anchors=("pass", "pw"),
        accept=_a_mixed_value,
    ),
    _Detector(
        # The MySQL/MariaDB clients take the password glued to -p: "mysql -u root -pS3cret".
        "password_assignment",
        re.compile(
            r"(?:mysql|mariadb)[a-z_-]{0,10}(?:[ \t]+(?!-p)\S{1,256}){0,16}?[ \t]+-p"
            r"(\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'-]\S{0,255})",
            re.IGNORECASE,
        ),
        anchors=("mysql", "mariadb"),
        accept=_not_placeholder,
    ),
    _Detector(
        "pin",
        re.compile(
            r"(?<![a-z])pin(?:[ \t]*(?:code|number))?[ \t]*(?:[:=]|is|was)[ \t]*([0-9]{4,8})(?![0-9])",
            re.IGNORECASE,
        ),
        anchors=("pin",),
    ),
    _Detector(
        # "my password is hunter2", "the wifi password for the office is 'sunflower'".
        "password_in_prose",
        re.compile(
            r"(?:passw(?:or)?d|passphrase|passcode)s?(?:[ \t]+[^\s.,;:!?]{1,40}){0,4}?"
            r"[ \t]+(?:is|was|will[ \t]+be|has[ \t]+been|(?:set|changed|reset)[ \t]+to)"
            r"(?:[ \t]+(?:now|still|set|changed|reset|updated))?(?:[ \t]+to)?"
            r"(?:[ \t]*:[ \t]*|[ \t]+)"
            r"(\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|[^\s\"'`]\S{0,255})",
            re.IGNORECASE,
        ),
        anchors=_PASSWORD_ANCHORS,
        accept=_a_password,
    ),
    _Detector(
        "generic_api_key_assignment",
        _assignment(
            r"secret(?:[_-]?(?:access[_-]?)?key)?|token|api[_ -]?key|access[_-]?key"
            r"|private[_-]?key|auth[_-]?key|account[_-]?key|shared[_-]?access[_-]?key"
        ),
        anchors=_KEY_ANCHORS,
        accept=_not_placeholder,
    ),
)

_GENERIC_KINDS = frozenset(
    {
        "password_assignment",
        "password_in_prose",
        "pin",
        "generic_api_key_assignment",
        "bearer_token",
        "basic_auth",
    }
)


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    """The span of the first capturing group that took part, else the whole match."""
    for index in range(1, (match.re.groups or 0) + 1):
        if match.group(index) is not None:
            return match.span(index)
    return match.span()


def _anchor_positions(lowered: str, anchors: tuple[str, ...]) -> list[int]:
    positions: list[int] = []
    for anchor in anchors:
        i = lowered.find(anchor)
        while i != -1:
            positions.append(i)
            i = lowered.find(anchor, i + 1)
    return sorted(set(positions))


def _lower_aligned(text: str) -> str:
    """`text` lower-cased with every index unchanged (so spans found in it fit `text`)."""
    lowered = text.lower()
    if len(lowered) == len(text):  # lower() never shortens, so equal length means aligned
        return lowered
    return "".join(ch if len(low := ch.lower()) != 1 else low for ch in text)


_ANY_ANCHOR = re.compile(trie(sorted({a for d in _DETECTORS for a in d.anchors})))
"""Whether a lower-cased text holds any detector's anchor. Every detector is only
ever tried at one of its anchors, and a card lies inside a `memory.cards.DIGIT_RUN`, so a text
with neither has no finding: two C-level scans replace some thirty `find`s and the
card scan for the common text that holds nothing. Any other text takes the full path."""


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret in `text`, ordered by position.

    Findings may overlap when two detectors agree (an ``api_key=`` assignment whose
    value is an OpenAI key yields both kinds); `redact` merges them.
    """
    if not text:
        return []
    lowered = _lower_aligned(text)
    if _ANY_ANCHOR.search(lowered) is None and DIGIT_RUN.search(text) is None:
        return []
    return _scan(text, lowered)


def _scan(text: str, lowered: str) -> list[SecretFinding]:
    """`find_secrets` without the prefilter: every detector at every anchor."""
    found = {SecretFinding("card_number", *span) for span in card_spans(text)}
    for detector in _DETECTORS:
        resume = 0
        for pos in _anchor_positions(lowered, detector.anchors):
            if pos < resume or not (match := detector.pattern.match(text, pos)):
                continue
            start, end = _value_span(match)
            # A token is not searched again inside itself (a PEM block holds many
            # "-----BEGIN"s), but a value may hold another assignment: "token: api_key: x".
            resume = match.end() if (start, end) == match.span() else start
            if detector.accept is None or detector.accept(text[start:end]):
                found.add(SecretFinding(detector.kind, start, end))
    # On equal spans, name the specific provider rather than the generic shape.
    return sorted(found, key=lambda f: (f.start, -f.end, f.kind in _GENERIC_KINDS, f.kind))


def find_secrets_as_read(text: str) -> list[SecretFinding]:
    """`find_secrets` of `text`, else of the first of its other readings that holds
    one (`_readings`): a key split by zero-width spaces, written in full-width
    letters, in Cyrillic look-alikes or percent-escaped is still a key. Spans of
    another reading are positions in that reading, not in `text`."""
    found = find_secrets(text)
    if found or (text.isascii() and "%" not in text and "&" not in text and "\\" not in text):
        return found  # the common case: ASCII without an escape has no other reading
    return found_as_read(text)[1]


def found_as_read(text: str) -> tuple[str, list[SecretFinding]]:
    """The reading of `text` its findings index, and the findings (`find_secrets_as_read`)."""
    found = find_secrets(text)
    if not found:
        for reading in _readings(text):
            if found := find_secrets(reading):
                return reading, found
    return text, found


_ESCAPED = re.compile(r"%[0-9A-Fa-f]{2}|&#?\w{1,32};|\\(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2})")
_BACKSLASH_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|x([0-9A-Fa-f]{2}))")
_ASCII_DIGITS = {
    code: str(unicodedata.decimal(chr(code)))
    for code in range(128, sys.maxunicode + 1)
    if unicodedata.category(chr(code)) == "Nd"
}
"""Every script's decimal digits as ASCII ones ("٤" is "4"): one character each,
so a reading keeps its length. NFKC folds only the full-width ones."""


def _readings(text: str) -> Iterator[str]:
    """`text` as a program decoding it reads it (percent, HTML and backslash escapes
    undone once), then as a reader sees that (`memory.phrasing.as_read`, with every
    script's digits as ASCII), then with look-alike letters as Latin
    (`memory.phrasing.CONFUSABLES`): each only where it differs from the one before.
    ASCII text without an escape has no other reading."""
    read = text
    if _ESCAPED.search(text):
        read = _BACKSLASH_ESCAPE.sub(
            lambda m: chr(int(m.group(1) or m.group(2), 16)), unquote(html.unescape(text))
        )
        if read != text:
            yield read
    if read.isascii():
        return
    seen = as_read(read).translate(_ASCII_DIGITS)
    if seen != read:
        yield seen
    if (latin := seen.translate(CONFUSABLES)) != seen:
        yield latin


def contains_secret(text: str) -> bool:
    """Whether `text` holds any secret `find_secrets` knows, hidden or not."""
    return bool(find_secrets_as_read(text))
