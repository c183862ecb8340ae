"""A precision-oriented scan of text for credentials.

``qmem_store`` refuses memory text in which :func:`scan` finds something, and
the Hermes importer scans each record's text, mapped metadata and provenance
with :func:`scan_values` before it marks the record ``secret_scan="passed"``.

What it promises.  :func:`scan` reports every non-overlapping match of the
families below as a :class:`Finding` -- a family name and the offsets of the
credential-bearing text -- and never returns, logs or formats the matched text
itself, so a finding is safe to show, store or raise.  It is pure (no I/O, no
global state) and runs in time linear in the length of the text: every pattern
is anchored at a boundary and no repetition in it can match the same text in
two ways, so the regular expressions cannot backtrack quadratically.

What it does not promise.  It is not a secret detector of record, and a clean
scan is not a proof that the text is safe.  It looks only for the shapes
listed here, so it misses credentials that are unknown, encoded, split,
encrypted, novel, short, context-dependent or deliberately obfuscated.  It
also rejects some benign strings: documentation examples, test fixtures and
look-alikes are refused along with real credentials.  Use upstream secret
management and independent scanners where that matters.

Families (a stable name each; offsets cover the part named in brackets):

``github-token``          ``ghp_ gho_ ghu_ ghs_ ghr_`` + 36 alphanumerics;
                          ``github_pat_`` + 22 + ``_`` + 59 alphanumerics
``gitlab-token``          ``glpat-`` + 20 or more
``slack-token``           ``xoxb- xoxa- xoxp- xoxr- xoxs-`` + numeric parts + 10 or more
``anthropic-key``         ``sk-ant-`` + 32 or more
``openai-key``            ``sk-proj- sk-svcacct- sk-admin-`` + 32 or more;
                          ``sk-`` + exactly 48 alphanumerics
``aws-access-key``        ``AKIA`` or ``ASIA`` + 16 upper-case alphanumerics
``google-api-key``        ``AIza`` + 35
``npm-token``             ``npm_`` + 36 alphanumerics
``pypi-token``            ``pypi-AgE`` + 50 or more (a PyPI macaroon)
``huggingface-token``     ``hf_`` + 30 or more letters of both cases
``private-key``           a PEM ``-----BEGIN … PRIVATE KEY-----`` header [the header]
``jwt``                   ``eyJ….eyJ….<signature>`` whose header decodes to a
                          JSON object with an ``alg``
``credential-url``        ``scheme://user:password@host`` [the password], or a
                          URL whose query or fragment sets ``token``,
                          ``access_token``, ``api_key``, ``key``, ``sig``,
                          ``password``, ``secret``, … [the value]
``bearer-token``          ``Bearer`` + a token of 16 or more characters [the token]
``basic-auth``            ``Authorization: Basic`` + base64 of ``user:password``
                          [the base64]
``credential-assignment`` ``name = value``, ``name: value``, ``"name": "value"``,
                          ``--name=value`` … where the name ends in
                          ``password``, ``passwd``, ``passphrase``, ``secret``,
                          ``secret_key``, ``api_key``, ``private_key``,
                          ``token``, ``credentials`` … (any case or separator,
                          so ``AWS_SECRET_ACCESS_KEY`` and ``clientSecret``
                          count; ``next_page_token`` and ``csrf_token`` do
                          not) [the value]

A token must not follow a letter, digit or underscore, and a fixed-length one
must not run on past its end either, so ``ghp_`` inside a longer identifier is
not a finding.  Where two findings overlap, the one earlier in
the list above wins (``GITHUB_TOKEN=ghp_…`` is a ``github-token``).

Values.  A generic value -- of an assignment, a URL query parameter or a
bearer header -- counts only when it reads as a credential rather than as a
word, a reference or a placeholder:

* it has at least 6 characters and no whitespace (an unquoted value ends at
  whitespace, a quote or one of ``, ; & = : ( ) [ ] { } < >``; a final ``.``
  is taken to end the sentence);
* it contains a digit or a symbol other than ``_ . -`` -- words and
  identifiers (``required``, ``db_password``, ``os.environ``) are how prose
  and code *mention* a secret, while real ones almost always mix in digits or
  symbols;
* it is not followed by ``(`` or ``[`` (code that fetches the secret);
* it is not a placeholder: it does not start with ``$ % < { [`` or ``your``,
  repeat one character (``********``), contain ``...``, ``***``, ``xxxx``,
  ``redacted``, ``placeholder`` or ``changeme``, or equal a word such as
  ``password`` or ``token``.

So ``password=hunter22`` is a finding, while ``password: required``,
``password = os.environ["PW"]``, ``token=${TOKEN}``, ``api_key=<redacted>``
and ``password=letmein`` are not.  A password in a URL's userinfo is strong
evidence on its own: it needs only 3 characters and not to be a placeholder.

AWS documentation keys.  ``AKIAIOSFODNN7EXAMPLE`` and
``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`` *are* findings (the latter when
assigned, as in ``aws_secret_access_key = wJalr…``).  They are
credential-shaped, a scanner with a list of exempt strings invites adding more,
and refusing a documentation example in a memory record costs its author a
rewording.  A bare 40-character base64 string is not a finding, because
nothing distinguishes an AWS secret key from any other such string.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["Finding", "FAMILIES", "scan", "first_finding", "scan_values", "describe"]


@dataclass(frozen=True)
class Finding:
    """One suspected credential: its family and where it is, never what it is.

    ``text[start:end]`` is the credential-bearing part (see the module
    docstring for what that is in each family).
    """

    family: str
    start: int
    end: int


# A check looks closer at a candidate match and returns the spans to report:
# none when the match does not hold up, several when one URL carries several.
_Check = Callable[[re.Match], list[tuple[int, int]]]


@dataclass(frozen=True)
class _Rule:
    family: str
    pattern: re.Pattern[str]
    check: _Check


def _whole(match: re.Match[str]) -> list[tuple[int, int]]:
    return [match.span()]


# --- values ---------------------------------------------------------------

_MIN_VALUE = 6
_PLACEHOLDER_PREFIXES = ("$", "%", "<", "{", "[", "your")
_PLACEHOLDER_MARKERS = ("...", "\u2026", "***", "xxxx", "redacted", "placeholder",
                        "changeme", "change_me", "change-me")
_PLACEHOLDER_WORDS = frozenset({"pass", "password", "passwd", "pwd", "pw", "secret",
                                "token", "apikey", "api_key", "key"})


def _is_placeholder(value: str) -> bool:
    lowered = value.lower()
    return (lowered.startswith(_PLACEHOLDER_PREFIXES)
            or len(set(value)) == 1
            or any(marker in lowered for marker in _PLACEHOLDER_MARKERS)
            or lowered in _PLACEHOLDER_WORDS)


def _is_credential_value(value: str) -> bool:
    """Whether a generic value reads as a credential (see "Values" above)."""
    if len(value) < _MIN_VALUE or _is_placeholder(value):
        return False
    # Words and identifiers ("required", "db_password", "os.environ") are how
    # prose and code mention a secret; real ones almost always mix in digits
    # or symbols.
    return any(c.isdigit() or not (c.isalpha() or c in "_.-") for c in value)


# --- token families -------------------------------------------------------

def _mixed_case(match: re.Match[str]) -> list[tuple[int, int]]:
    _, _, body = match.group().partition("_")
    return [match.span()] if body != body.lower() and body != body.upper() else []


def _jwt(match: re.Match[str]) -> list[tuple[int, int]]:
    header = match.group("header")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, RecursionError):  # bad base64, UTF-8 or JSON; absurd nesting
        return []
    if isinstance(decoded, dict) and isinstance(decoded.get("alg"), str):
        return [match.span()]
    return []


# --- URLs -----------------------------------------------------------------

_URL_TRAILING_PUNCTUATION = ".,;:!?)]}"
_URL_PARAMETER = re.compile(r"[^&;#?]+")


def _credential_url(match: re.Match[str]) -> list[tuple[int, int]]:
    url = match.group().rstrip(_URL_TRAILING_PUNCTUATION)
    base = match.start()
    authority_at = url.index("://") + 3
    authority_end = _find_any(url, "/?#", authority_at)
    spans = []
    at = url.rfind("@", authority_at, authority_end)
    colon = url.find(":", authority_at, at) if at != -1 else -1
    if colon != -1:
        password = url[colon + 1:at]
        if len(password) >= 3 and not _is_placeholder(unquote(password)):
            spans.append((base + colon + 1, base + at))
    # OAuth implicit flows put tokens in the fragment, so read it as well.
    for parameter in _URL_PARAMETER.finditer(url, _find_any(url, "?#", authority_end)):
        name, equals, value = parameter.group().partition("=")
        if (equals and _is_url_secret_name(unquote(name))
                and _is_credential_value(unquote(value))):
            start = base + parameter.start() + len(name) + 1
            spans.append((start, start + len(value)))
    return spans


def _find_any(text: str, chars: str, start: int) -> int:
    """Return the index of the first of *chars* in text[start:], or len(text)."""
    found = [i for i in (text.find(c, start) for c in chars) if i != -1]
    return min(found, default=len(text))


def _is_url_secret_name(name: str) -> bool:
    compact = _compact(name)
    return (_is_secret_name(name) or compact in ("key", "sig", "auth")
            or compact.endswith("signature"))


# --- authorization headers ------------------------------------------------

def _bearer(match: re.Match[str]) -> list[tuple[int, int]]:
    return [match.span("token")] if _is_credential_value(match.group("token")) else []


def _basic(match: re.Match[str]) -> list[tuple[int, int]]:
    try:
        decoded = base64.b64decode(match.group("token"), validate=True)
    except binascii.Error:
        return []
    user, colon, password = decoded.partition(b":")
    return [match.span("token")] if colon and user and password else []


# --- assignments ----------------------------------------------------------

_SECRET_NAME_ENDINGS = ("password", "passwd", "passphrase", "secret", "secretkey",
                        "secretaccesskey", "apikey", "privatekey", "token",
                        "credential", "credentials")
# Tokens that page through results or guard forms are not credentials.
_NOT_SECRET_NAME_ENDINGS = ("pagetoken", "nexttoken", "continuationtoken",
                            "synctoken", "csrftoken", "xsrftoken", "resumetoken")


def _compact(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _is_secret_name(name: str) -> bool:
    compact = _compact(name)
    return (compact.endswith(_SECRET_NAME_ENDINGS)
            and not compact.endswith(_NOT_SECRET_NAME_ENDINGS))


def _assignment(match: re.Match[str]) -> list[tuple[int, int]]:
    if not _is_secret_name(match.group("name")):
        return []
    group = next(g for g in ("dq", "sq", "bare") if match.group(g) is not None)
    value = match.group(group)
    start, end = match.span(group)
    if group == "bare":
        if match.string[end:end + 1] in ("(", "["):
            return []  # a call or subscript: code that fetches the secret
        value = value.rstrip(".")  # the end of a sentence, not of the value
    return [(start, start + len(value))] if _is_credential_value(value) else []


def _rule(family: str, pattern: str, check: _Check = _whole) -> _Rule:
    return _Rule(family, re.compile(pattern, re.VERBOSE), check)


# The rules, most specific first: that order settles overlapping findings.
# Each pattern starts at a boundary (a lookbehind or a fixed prefix) and has
# no two ways to match the same text, which keeps the scan linear.
_RULES = (
    _rule("private-key", r"-----BEGIN[ ](?:[A-Z0-9]+[ ]){0,3}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----"),
    _rule("github-token", r"(?<![A-Za-z0-9_]) gh[pousr]_[A-Za-z0-9]{36} (?![A-Za-z0-9_])"),
    _rule("github-token", r"""(?<![A-Za-z0-9_]) github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}
                              (?![A-Za-z0-9_])"""),
    _rule("gitlab-token", r"(?<![A-Za-z0-9_-]) glpat-[A-Za-z0-9_-]{20,}"),
    _rule("slack-token", r"""(?<![A-Za-z0-9_-]) xox[baprs]-
                             [0-9]{1,20}-(?:[0-9]{1,20}-){0,2}[A-Za-z0-9]{10,}"""),
    _rule("anthropic-key", r"(?<![A-Za-z0-9_-]) sk-ant-[A-Za-z0-9_-]{32,}"),
    _rule("openai-key", r"(?<![A-Za-z0-9_-]) sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}"),
    _rule("openai-key", r"(?<![A-Za-z0-9_-]) sk-[A-Za-z0-9]{48} (?![A-Za-z0-9_-])"),
    _rule("aws-access-key", r"(?<![A-Za-z0-9_]) (?:AKIA|ASIA)[A-Z0-9]{16} (?![A-Za-z0-9_])"),
    _rule("google-api-key", r"(?<![A-Za-z0-9_-]) AIza[A-Za-z0-9_-]{35} (?![A-Za-z0-9_-])"),
    _rule("npm-token", r"(?<![A-Za-z0-9_]) npm_[A-Za-z0-9]{36} (?![A-Za-z0-9_])"),
    _rule("pypi-token", r"(?<![A-Za-z0-9_-]) pypi-AgE[A-Za-z0-9_-]{50,}"),
    _rule("huggingface-token", r"(?<![A-Za-z0-9_]) hf_[A-Za-z]{30,} (?![A-Za-z0-9_])",
          _mixed_case),
    _rule("jwt", r"""(?<![A-Za-z0-9_-]) (?P<header>eyJ[A-Za-z0-9_-]{5,4096})
                     \. eyJ[A-Za-z0-9_-]{5,} \. [A-Za-z0-9_-]{16,}""", _jwt),
    _rule("credential-url", r"""(?<![A-Za-z0-9+.-]) [A-Za-z][A-Za-z0-9+.-]{0,31}://
                                [^\s"'<>`\\]+""", _credential_url),
    _rule("basic-auth", r"""(?<![A-Za-z0-9_]) (?i:authorization) ["']? [ \t]* [:=] [ \t]*
                            ["']? (?i:basic) [ \t]+ (?P<token>[A-Za-z0-9+/]{4,}={0,2})""",
          _basic),
    _rule("bearer-token", r"""(?<![A-Za-z0-9_-]) (?i:bearer) [ \t]+
                              (?P<token>[A-Za-z0-9._~+/-]{16,}=*)""", _bearer),
    # Only the name and separator are consumed; the value is read in a
    # lookahead, so "note: password=…" still finds the assignment inside.
    # Unquoted values stop at = and : for the same reason.
    _rule("credential-assignment", r"""
        (?<![A-Za-z0-9_.-]) -{0,2}
        (?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63}) ["']?
        [ \t]* (?: := | => | [:=] ) [ \t]*
        (?= "(?P<dq>[^"\s]{1,1024})"
          | '(?P<sq>[^'\s]{1,1024})'
          | (?P<bare>[^\s"'`,;&=:()\[\]{}<>]+) )""", _assignment),
)

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(rule.family for rule in _RULES))
"""Every family name :func:`scan` can report, most specific first."""


def scan(text: str) -> list[Finding]:
    """Return the suspected credentials in *text*, ordered by position.

    Findings never overlap; where two families match the same text, the more
    specific one is reported.  Raises ``TypeError`` if *text* is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"scan() needs a str, not {type(text).__qualname__}")
    # Both lists stay sorted by start; as accepted findings never overlap,
    # only the neighbours of a new one can overlap it.
    starts: list[int] = []
    taken: list[Finding] = []
    for rule in _RULES:
        for match in rule.pattern.finditer(text):
            for start, end in rule.check(match):
                at = bisect.bisect_left(starts, start)
                if at > 0 and taken[at - 1].end > start:
                    continue
                if at < len(taken) and taken[at].start < end:
                    continue
                starts.insert(at, start)
                taken.insert(at, Finding(rule.family, start, end))
    return taken


def first_finding(text: str) -> Finding | None:
    """Return the first finding of :func:`scan` in *text*, or ``None``."""
    findings = scan(text)
    return findings[0] if findings else None


def scan_values(values: Iterable[str]) -> list[tuple[int, Finding]]:
    """Scan each string separately; return ``(index, finding)`` pairs.

    Each value is scanned on its own, so a match can neither straddle two
    values nor be hidden by what precedes it; offsets are within the value at
    *index*.  Raises ``TypeError`` for a value that is not a str.
    """
    return [(index, finding)
            for index, value in enumerate(values)
            for finding in scan(value)]


def describe(findings: Iterable[Finding]) -> str:
    """Return a one-line message naming the families found, never the text.

    Raises ``ValueError`` when *findings* is empty: there is nothing to say.
    """
    families = list(dict.fromkeys(finding.family for finding in findings))
    if not families:
        raise ValueError("describe() needs at least one finding")
    return (f"text looks like it contains a credential ({', '.join(families)}); "
            "remove it and store a reference instead")
