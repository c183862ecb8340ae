"""Checks for credentials known by their setting: URLs, headers, command lines, .netrc lines, assignments.

A rule of :mod:`qmem.secretscan.families` finds where a secret would stand -- a URL's
userinfo or query, an ``Authorization`` header, a password option of a known
program, ``password`` in a .netrc line, a name that says secret followed by a
separator -- and its check here reads the value there and reports its span
when the value reads as a credential (:mod:`qmem.secretscan.values`), or none.

Each check is pure, gets the original text and the match (a folded rule's
match is over the lower-cased copy, whose offsets are the same), and reads a
bounded window around it: at most 300 characters back for the program that
owns a flag, 64 back for an assignment's name, 1024 forward for a value.  So
checking adds time linear in the length of the text.
"""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import unquote

from .values import (
    SHORTEST_VALUE, compact_name, is_credential_value, is_placeholder, is_strong_value, is_truncated, looks_random,
    name_kind, reads_as_credential,
)

__all__ = []


# --- URLs -----------------------------------------------------------------

_URL_TRAILING_PUNCTUATION = ".,;:!?)]}"
_URL_PARAMETER = re.compile(r"[^&;#?]+")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def credential_url(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A URL: the password of its userinfo, and each query or fragment
    parameter named like a secret whose value reads as a credential."""
    if not any(mark in match.group() for mark in "@?#"):
        return []  # no userinfo, query or fragment: most URLs
    # The pattern starts at "://" (a literal the engine finds fast); the
    # scheme before it is read here, at most 32 characters back.
    start = match.start()
    while start > 0 and match.start() - start < 32 and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    if start == match.start() or not text[start].isalpha():
        return []
    url = text[start:match.end()].rstrip(_URL_TRAILING_PUNCTUATION)
    authority_at = match.start() - start + 3
    authority_end = _find_any(url, "/?#", authority_at)
    spans = []
    at = url.rfind("@", authority_at, authority_end)
    colon = url.find(":", authority_at, at) if at != -1 else -1
    if colon != -1:
        password = url[colon + 1:at]
        if (len(password) >= 3 and password != url[authority_at:colon]  # postgres:postgres
                and password.lower() != url[:authority_at - 3].lower() and not is_placeholder(password)
                and not is_placeholder(unquote(password))):
            spans.append((start + colon + 1, start + at))
    # OAuth implicit flows put tokens in the fragment, so read it as well.
    for parameter in _URL_PARAMETER.finditer(url, _find_any(url, "?#", authority_end)):
        name, equals, value = parameter.group().partition("=")
        if (equals and _is_url_secret_name(unquote(name))
                and is_credential_value(unquote(value))):
            value_start = start + parameter.start() + len(name) + 1
            spans.append((value_start, value_start + len(value)))
    return spans


def _find_any(text: str, chars: str, start: int) -> int:
    """Return the index of the first of *chars* in text[start:], or len(text)."""
    found = [i for i in (text.find(c, start) for c in chars) if i != -1]
    return min(found, default=len(text))


def _is_url_secret_name(name: str) -> bool:
    compact = compact_name(name)
    return (name_kind(name) is not None or compact in ("key", "sig", "auth")
            or compact.endswith("signature"))


# --- authorization headers ------------------------------------------------

def bearer_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """The ``token`` after ``Bearer``, if it reads as a credential."""
    start, end = match.span("token")
    return [(start, end)] if is_credential_value(text[start:end]) else []


_NOT_TOKEN_SCHEMES = frozenset({"basic", "bearer", "digest", "hmac", "realm"})


def other_scheme_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """An ``Authorization`` value under a scheme that carries a token
    (``token``, ``Bot``, ``SSWS``), not a signature or a digest."""
    if match.group("scheme") in _NOT_TOKEN_SCHEMES or match.group("scheme").startswith("aws4"):
        return []
    return bearer_token(text, match)


def _is_user_password(encoded: str) -> bool:
    """Whether *encoded* is the base64 of printable ``user:password``."""
    try:
        decoded = base64.b64decode(encoded, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


def basic_credentials(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """The ``token`` after ``Basic`` or ``auth``, if it is base64 of ``user:password``."""
    start, end = match.span("token")
    return [(start, end)] if _is_user_password(text[start:end]) else []


# --- command lines ----------------------------------------------------------

def curl_user(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``-u user:password`` counts after ``curl`` or ``http`` (HTTPie)."""
    window = text[max(0, match.start() - 300):match.start()].lower()
    if "curl" not in window and "http " not in window and "https " not in window:
        return []
    user = match.group("user")
    start, end = match.span("password")
    password = text[start:end]
    if (user.isdigit() and password.isdigit()) or user == password:
        return []  # uid:gid, guest:guest
    return [(start, end)] if is_strong_value(password) else []


# Programs whose short flag takes a password: the flag, words that name the
# program (found in the 200 characters before the flag), and whether the value
# may follow after a space -- "mysql -p db" prompts, then opens database "db".
_PASSWORD_FLAGS = (
    ("p", (" login ", "sshpass", "mongo"), True),
    ("p", ("mysql", "mariadb"), False),
    ("a", ("redis-cli",), True),
    ("w", ("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete"), True),
)


def password_flag(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """The value of a short flag that takes a password in the program named before it."""
    flag, spaced = match.group("flag"), match.group("space") is not None
    window = text[max(0, match.start() - 200):match.start()].lower() + " "
    if not any(flag == f and (space_ok or not spaced) and any(p in window for p in programs)
               for f, programs, space_ok in _PASSWORD_FLAGS):
        return []
    start, end = match.span("value")
    return [(start, end)] if is_strong_value(text[start:end]) else []


def openssl_pass(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``-passin pass:<password>`` (OpenSSL): the position is evidence enough."""
    start, end = match.span("value")
    return [(start, end)] if is_strong_value(text[start:end]) else []


def long_option(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``--token <value>``: a long option named like a secret, its value after a space."""
    kind = name_kind(match.group("name"))
    if kind is None or kind == "pwd":
        return []
    start, end = match.span("value")
    value = text[start:end]
    if text[end:end + 1] in ("(", "["):
        return []
    return [(start, end)] if reads_as_credential(kind, value, quoted=False) else []


def netrc_password(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """In a .netrc (a ``machine`` or ``default`` line) the position is evidence
    enough; after ``login … password`` alone the value must read as a credential."""
    start, end = match.span("value")
    value = text[start:end]
    window = text[max(0, match.start() - 200):match.end()].lower()
    if "machine" in window or "default" in window:
        return [(start, end)] if is_strong_value(value) else []
    return [(start, end)] if is_credential_value(value) else []


def prose_password(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``… with password hunter781``: a value of letters and digits after the word."""
    start, end = match.span("value")
    if text[match.start():match.start() + 4].isupper():
        return []  # PASSWORD in capitals is a keyword (SQL), not prose
    while end > start and text[end - 1] in ".:":
        end -= 1
    value = text[start:end]
    if (len(value) < 8 or not any(c.isdigit() for c in value)
            or not any(c.isalpha() for c in value) or is_truncated(text, end)):
        return []
    return [(start, end)] if is_credential_value(value) else []


def prose_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``… the cloudflare api token Le7Cvm5q…``, ``wandb login 11228bd9…``: a
    value that looks random after a name that says token, key or secret (read
    back over one more word: ``api token``, not ``sort key``), or after
    ``login``; a value of 20 or more characters, 32 after ``login``."""
    word = text[match.start():match.start("value")].rstrip().lower()
    if word != "login":
        window = text[max(0, match.start() - 40):match.start()]
        before = window.rstrip(_NAME_CHARS)
        name = window[len(before):] + word
        if not window[len(before):] and before.endswith(" "):
            before = before[:-1]
            name = before[len(before.rstrip(_NAME_CHARS)):] + name
        if name_kind(name) not in ("strong", "named"):
            return []
    start, end = match.span("value")
    while end > start and text[end - 1] in ".:,":
        end -= 1
    value = text[start:end]
    if (len(value) < (32 if word == "login" else 20) or is_truncated(text, end)
            or not looks_random(value)):
        return []
    return [(start, end)]


def config_pair(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``<add key="ApiKey" value="…"/>``: .NET and Java configuration files."""
    kind = name_kind(match.group("name"))
    start, end = match.span("value")
    if kind is None or kind == "pwd" or not reads_as_credential(kind, text[start:end], quoted=True):
        return []
    return [(start, end)]


# --- assignments ----------------------------------------------------------

_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
# After the name: its closing quote (escaped in JSON inside a string) or
# bracket, or a subscript by a string (api_key["appKeyAuth"]), then the
# separator, then the start of a value long enough to read as a credential
# (SHORTEST_VALUE characters after an opening quote, if any; not a call or a
# subscript) or of a type annotation (api_key: str = …): most names in code
# fail here, before any check.
_SUBSCRIPT = r"""(?: \[ [ \t]* ["'] [^"'\n\]]{1,64} ["'] [ \t]* \] )?"""
# "The password is …" in the most used languages, a dash or an arrow: prose, whose value must
# read as a credential on its own (see _reads_as_prose_value).
_COPULA = r"(?:is|was|ist|lautet|est|es|é|è|jest|je|är|er|on|olan|adalah)"
_PLAIN_SEPARATORS = frozenset({":=", "=>", ":", "=", ">", "\uff1a", ""})
_VALUE_AHEAD = (r"""[ \t]* (?: (?: \\" | [rbuRBU]{0,2}["'`] ) [^\s"'`]{%d}
                         | (?![A-Za-z_][\w.]*[(\[{]) [^\s"'`]{%d}
                         | [A-Za-z_&*][\w.|&*]*[ \t]*=
                         | [|>][+-]?[0-9]?[ \t]*\r?\n
                         | !![a-z]+[ \t]
                         | ["'][^"'\s]{0,64}["'][ \t]*, )""" % (SHORTEST_VALUE, SHORTEST_VALUE))
# A name and its value on a line of their own, a space between (requirepass …, ENV DB_PASSWORD …,
# storePassword "…"): the value is one word or one quoted string, and the line ends after it.
_SPACED_VALUE = r"""[ \t]+ (?= (?: ["'][^"'\s]{%d,1024}["'] | [^\s"']{%d,1024} ) (?:[ \t]*(?:\r?\n|\Z)|[ \t]+\#) )""" % (
    SHORTEST_VALUE, SHORTEST_VALUE)
NAME_SEPARATOR = (r"""(?: """ + _SUBSCRIPT + r""" (?:\\?["'])? \]? [ \t]* (?: := | => | [:=>\uff1a] )
                    | [ \t]+ """ + _COPULA + r""" [ \t:] :? | [ \t]+ (?:->|[-\u2013\u2014]) (?=[ \t])
                    | [ \t]* (?:是|为|為|は|는|은) ) """ + _VALUE_AHEAD + " | " + _SPACED_VALUE)
_VALUE_BODY = r"""
    (?: [|>][+-]?[0-9]?[ \t]*\r?\n[ \t]+ | !![a-z]+[ \t]+ )?
    (?: \\"(?P<eq>[^"\s\\]{1,1024})\\"
      | [rbuRBU]{0,2} "(?P<dq>[^"\s]{1,1024})"
      | [rbuRBU]{0,2} '(?P<sq>[^'\s]{1,1024})'
      | `(?P<bq>[^`\s]{1,1024})`
      | (?P<bare>[^\s"'`,;&()\[\]{}<>\\]{1,1024}) )"""
_VALUE = re.compile(_SUBSCRIPT + r"""
    (?:\\?["'])? \]? (?: [ \t]* (?P<sep> := | => | [:=>\uff1a] | (?<=[ \t])(?i:""" + _COPULA + r""")(?=[ \t:]):?
                                          | (?<=[ \t])(?:->|[-\u2013\u2014])(?=[ \t]) | 是|为|為|は|는|은 )
                       | (?P<space>[ \t]+(?![ \t])) ) [ \t]*""" + _VALUE_BODY, re.VERBOSE)
_LATER_VALUE = re.compile(r"[ \t]*" + _VALUE_BODY, re.VERBOSE)  # a value after the first, in a tuple
# "name: Type = value" (Python, TypeScript, Kotlin, Go): the value after the type.
_TYPE = re.compile(r"[A-Za-z_&*][\w.|&*]*\Z")
_SCHEME_VALUE = re.compile(r"[ \t][^\s]")
_ANNOTATED = re.compile(r"[ \t]*(?==(?![=>]))")


def _mixes_kinds(word: str) -> bool:
    """Upper case, lower case, a digit and a symbol: three kinds of character or more."""
    return (any(c.isupper() for c in word) + any(c.islower() for c in word) + any(c.isdigit() for c in word)
            + any(not c.isalnum() for c in word)) >= 3


def _reads_as_prose_value(value: re.Match[str]) -> bool:
    """After "the password is": a bare word that mixes three kinds of character
    (Hunter781, hunter781!) or looks random -- not base64url, sha256 or code."""
    word = value.group("bare")
    if word is None or len(word) > 256 or any(c in "([{" for c in word):
        return False  # prose's password is a word, not a run of 256 characters or code
    word = word.rstrip(".:")
    kinds = (any(c.isupper() for c in word) + any(c.islower() for c in word)
             + any(c.isdigit() for c in word) + any(not c.isalnum() for c in word))
    return kinds >= 3 or looks_random(word)


# A value is judged whole, "=" and all (Xk9=defGHIJ12345xyz), unless what comes before its
# first "=" is a name of four or more letters of one case: then it is a name=value pair
# (theme=dark, PHPSESSID=…), and ends there.
_PAIR_NAME = re.compile(r"(?:[a-z_][a-z_.-]{3,}|[A-Z_][A-Z_.-]{3,})=")

# The targets of a tuple assignment before the name (account_sid, auth = …) and the values after it.
_TUPLE_TARGETS = re.compile(r"[ \t]*(?:[A-Za-z_][\w.]*[ \t]*,[ \t]*)+\Z")
_NEXT_VALUE = re.compile(r"""[ \t]*(?:"[^"\n]{0,1024}"|'[^'\n]{0,1024}'|[^\s,"']{1,1024})[ \t]*,[ \t]*""")
_AUTH_CALLEES = ("login", "signin", "auth", "authenticate", "authorize", "client", "connect", "session", "init",
                 "configure", "credentials", "api", "sdk")


def _nth_value(text: str, value: re.Match[str], skip: int) -> re.Match[str] | None:
    """The value *skip* places after the first one of a tuple assignment, as :data:`_VALUE` reads it."""
    at = value.end("sep")
    for _ in range(skip):
        step = _NEXT_VALUE.match(text, at)
        if step is None:
            return None
        at = step.end()
    return _LATER_VALUE.match(text, at)


def line_start(text: str, at: int, limit: int = 200) -> int:
    """Where the line holding position *at* starts, looking back at most *limit* characters
    (a line longer than that is read from *limit* back: every look stays bounded)."""
    return max(text.rfind("\n", max(0, at - limit), at) + 1, at - limit, 0)


def callee_before(text: str, at: int) -> str | None:
    """The name of the call whose argument list holds position *at* (``wandb.login`` for
    ``wandb.login(key=…``; "" for a bare parenthesis), read back at most 200 characters on the
    line; None if not in one."""
    depth = 0
    position = at
    while position > 0 and at - position < 200:
        position -= 1
        char = text[position]
        if char == "\n":
            return None
        if char == ")":
            depth += 1
        elif char == "(":
            if depth == 0:
                end = position
                while position > 0 and end - position < 64 and (text[position - 1].isalnum() or text[position - 1] in "_.$"):
                    position -= 1
                return text[position:end]
            depth -= 1
    return None


def _in_auth_call(text: str, start: int) -> bool:
    """Whether *start* is an argument of a call that authenticates (login, Client, connect, …)."""
    callee = callee_before(text, start)
    if callee is None:
        return False
    last = compact_name(callee.rsplit(".", 1)[-1])
    return last.endswith(_AUTH_CALLEES) or last.startswith(_AUTH_CALLEES)


# What may stand before a name and its value separated by a space: indentation, a
# Dockerfile's ENV or ARG, a shell's export, set -x (fish), setenv (csh), #define (C), or
# the ": " of an ipsec.secrets line (": PSK "…"").
_SPACED_PREFIX = re.compile(r"""[ \t]*(?:(?:ENV|ARG|export|readonly|setenv|declare(?:[ \t]+-[a-zA-Z]+)?
                                 |set(?:[ \t]+-[a-zA-Z]+)*|\#define|.*[ \t]:)[ \t]+)?\Z""", re.VERBOSE)


def _spaced_setting(text: str, start: int, value: re.Match[str]) -> bool:
    """``requirepass …``, ``ENV DB_PASSWORD …``, ``storePassword "…"``: a name and a value
    with only white space between them count when they are a line of their own (after
    indentation or a keyword that sets a variable) and nothing but a comment follows."""
    begin = line_start(text, start)
    if begin and text[begin - 1] != "\n":
        return False  # a line longer than 200 characters before the name
    if _SPACED_PREFIX.match(text, begin, start) is None:
        return False
    rest = text[value.end():value.end() + 200].split("\n", 1)[0].strip()
    return not rest or rest.startswith("#")


def assignment(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``name = value`` and its many spellings: the value, if the name says
    secret and the value reads as a credential for that name."""
    # The pattern found a name ending followed by a separator; the name runs
    # back from there over name characters (at most 64), the value is read
    # forward from the original text.
    window = text[max(0, match.end() - 64):match.start()]
    start = match.start() - (len(window) - len(window.rstrip(_NAME_CHARS)))
    name = text[start:match.end()]
    if name.lower() in ("key", "token", "secret") and text[start - 1:start] == " ":
        # Prose names a key with two words: "private key: …", "access token: …".
        word_start = start - 1
        while word_start > 0 and start - word_start < 24 and text[word_start - 1].isalpha():
            word_start -= 1
        two_words = text[word_start:start - 1] + name
        if name_kind(two_words) is not None:  # "app key: …" asks for a random value, "api key: …" for less
            name = two_words
    kind = name_kind(name)
    if kind is None and name.lower() == "key" and _in_auth_call(text, start):
        kind = "random"  # wandb.login(key=…), Client(key=…): a bare key given to what authenticates
    if kind is None:
        return []
    value = _VALUE.match(text, match.end())
    if value is None:
        return []
    separator = value.group("sep") or ""
    targets = _TUPLE_TARGETS.match(text, line_start(text, start), start)
    if targets is not None and separator == "=":
        # user, password = "admin", "…": the value in the name's place, not the first one.
        value = _nth_value(text, value, targets.group().count(","))
        if value is None:
            return []
    before = text[start - 1:start]
    if not separator and not _spaced_setting(text, start, value):
        return []  # a name, a space and a value: only on a line of their own
    if (separator.lower() not in _PLAIN_SEPARATORS and not separator.endswith(":")  # "is:" is a colon's
            and not _reads_as_prose_value(value)):
        return []
    if (separator == ":" and text[value.start("sep") - 1] in " \t"
            and text[max(0, start - 64):start].rstrip().endswith("?")):
        return []  # "a ? b : c": not a key and its value
    if separator == ":" and before == ":":
        return []  # a segment of an ARN or URN: arn:aws:secretsmanager:…:secret:name
    if separator == ":" and text[start - 2:start] == "${" and text.startswith("?", value.end("sep")):
        return []  # ${SECRET_KEY:?message}: the shell's error message when the variable is unset
    group = value.lastgroup  # the value's own: eq, dq, sq, bq or bare
    if group == "bare" and separator == ":" and _TYPE.match(value.group(group)):
        annotated = _ANNOTATED.match(text, value.end())
        if annotated:
            value = _VALUE.match(text, annotated.end())
            if value is None:
                return []
            group = value.lastgroup
    value_start, value_end = value.span(group)
    if group == "bare":
        pair = _PAIR_NAME.match(text, value_start, value_end)
        if pair is not None:
            value_end = pair.end() - 1  # "Cookie: theme=dark": a pair's name, not a value with "=" in it
    if value_end - value_start < SHORTEST_VALUE:
        return []  # no kind of name takes a value this short
    if group == "bare":
        if text[value_end:value_end + 1] in ("(", "[", "{") or (
                text[value_end:value_end + 1] == "<" and separator != ">"):
            return []  # a call, a subscript, a template: code or a placeholder
        if compact_name(name).endswith("authorization") and _SCHEME_VALUE.match(text, value_end):
            return []  # a scheme and its value: the header rules read those
        while value_end > value_start and text[value_end - 1] in ".:":
            value_end -= 1  # the end of a sentence, not of the value
        if is_truncated(text, value_end):
            return []
    if separator == ">" and (before != "<" or not text.startswith("</", value_end)):
        return []  # only an element, <password>…</password>, ends its name with >
    if kind == "pwd":
        # Pwd= is a connection-string key among ;-separated pairs; elsewhere (PWD= is the
        # shell's working directory) a quoted value or one that looks random.
        if (text[value_end:value_end + 1] != ";" and before != ";" and group == "bare"
                and not looks_random(text[value_start:value_end]) and not _mixes_kinds(text[value_start:value_end])):
            return []
        kind = "password"
    if reads_as_credential(kind, text[value_start:value_end], quoted=group != "bare"):
        return [(value_start, value_end)]
    return []


# --- cookies ----------------------------------------------------------------

# A cookie pair on the line after Cookie:, Set-Cookie:, document.cookie =, cookies={…},
# curl -b or --cookie: its name (quoted in a dict), "=" or ":", its value.
_COOKIE_PAIR = re.compile(r"""["']?(?P<name>[A-Za-z0-9_.!#$%*+^|~-]{1,64})["']?[ \t]*[=:][ \t]*["']?
                              (?P<value>[^\s;,"'}&]{1,1024})""", re.VERBOSE)
_COOKIE_WORD = re.compile(r"(?i)cookie")
_SESSION_MARKS = ("sess", "sid", "auth", "token", "jwt", "remember", "login", "identity", "secret", "credential")
_NOT_SESSION = ("csrf", "xsrf", "consent", "theme", "lang", "locale", "tz")


def session_cookie(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """The session cookies on a cookie line: each pair whose name says session, auth,
    token or login (not csrf) and whose value is a random-looking run of 16 or more."""
    if match.group().lstrip().startswith("-b"):
        window = text[max(0, match.start() - 300):match.start()].lower()
        if "curl" not in window:
            return []
    # The pairs up to the end of the line, the next cookie word (whose match reads on from
    # there) or 1024 characters: so each pair is read once or twice, never once per cookie.
    line_end = text.find("\n", match.end(), match.end() + 1024)
    line_end = match.end() + 1024 if line_end == -1 else line_end
    next_cookie = _COOKIE_WORD.search(text, match.end(), line_end)
    line_end = next_cookie.start() if next_cookie else line_end
    spans = []
    for pair in _COOKIE_PAIR.finditer(text, match.end(), min(line_end, len(text))):
        name = pair.group("name").lower()
        if not any(mark in name for mark in _SESSION_MARKS) or any(mark in name for mark in _NOT_SESSION):
            continue
        value = unquote(pair.group("value"))
        if (len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
                and len(set(value)) >= 8 and not is_placeholder(value)):
            spans.append(pair.span("value"))
    return spans
