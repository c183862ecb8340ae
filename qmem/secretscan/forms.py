"""Rules and checks for credentials known by the form they are written in, whoever issued them.

:mod:`qmem.secretscan.families` lists these after its own rules (they report under its
family names, so a finding still says what it is): a secret passed to a call that
authenticates (``client.login("admin", "…")``, ``setPassword("…")``, ``pyotp.TOTP("…")``,
``ApiClient("<random>")``), a name and its value in separate fields (``{"name":
"DB_PASSWORD", "value": "…"}``, ``<key>APIKey</key><string>…</string>``, ``<string
name="api_key">…</string>``, ``variable "db_password" { default = "…" }``), a column of a
Markdown table headed by a secret's name, more programs' password options (``-P`` of zip,
unzip and sqlcmd, ``-p…`` of 7z, ``smbclient -U user%…``, ``/p:`` and ``/pass:`` of
xfreerdp and cmdkey, ``net user name …``, ``keytool -storepass …``), SQL
(``IDENTIFIED BY '…'``, ``PASSWORD '…'``), PowerShell's ``ConvertTo-SecureString "…"
-AsPlainText``, a ``.pgpass`` line, a Wi-Fi QR payload (``WIFI:…;P:…;``), a TOTP seed shown
in groups of four (``abcd efgh …``) after a word that says key, secret or seed, and prose
(``the new password for x is now …``, ``use … as the password``).

Each check is pure, gets the original text and the match, and reads a bounded window
around it (at most 300 characters back, 1024 forward), so checking adds time linear in the
length of the text; every value is judged by :mod:`qmem.secretscan.values`.
"""

from __future__ import annotations

import re

from .context import callee_before, line_start
from .values import (
    compact_name, is_base32_secret, is_credential_value, is_placeholder, is_strong_value, looks_random, name_kind,
    reads_as_credential,
)

__all__ = []


# --- calls ------------------------------------------------------------------------

# What a call that takes a secret is called (its last name, compacted): the ones that take
# a user and a password, the ones that take a key or a token, and TOTP generators.
_PASSWORD_CALLS = ("login", "signin", "logon", "authenticate", "basicauth", "httpbasicauth", "digestauth",
                   "bind", "binds", "simplebind", "credentials", "networkcredential", "usernamepasswordcredentials",
                   "setpassword", "password", "withpassword", "setpasswd", "passwd", "setsecret", "withsecret",
                   "setcredentials", "auth")
_KEY_CALLS = ("client", "apiclient", "api", "sdk", "init", "initialize", "configure", "connect", "setapikey",
              "apikey", "setapitoken", "setaccesstoken", "settoken", "withtoken", "token", "setkey", "authorize",
              "authenticator", "session", "setauth", "withapikey")
_TOTP_CALLS = ("totp", "hotp", "otp")
_ANOTHER_LITERAL = re.compile(r"""[ \t]*,[ \t]*["']""")


def call_argument(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A string literal (``value``) passed to a call: a password to one that logs in or sets a
    password (after a user, or alone to a setter), a random-looking key or token to a client or
    an SDK, a base32 seed to a TOTP generator; a tuple ``auth=("user", "…")`` too."""
    start, end = match.span("value")
    value = text[start:end]
    callee = callee_before(text, match.start("value"))
    if callee is None:
        return []
    before_paren = text[max(0, start - 300):text.rfind("(", max(0, start - 200), start)].rstrip()
    segments = [segment for segment in re.split(r"[.:]+", callee) if segment]
    if len(segments) > 1 and segments[-1].lower() == "new":
        segments.pop()  # ROTP::TOTP.new(…): the class is the callee
    raw = segments[-1] if segments else ""
    name = compact_name(raw)
    if not name and before_paren.endswith("="):
        keyword = before_paren[:-1].rstrip()
        name = compact_name(keyword[len(keyword.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")):])
    if not name:
        return []
    second = match.group("first") is not None
    if name.endswith(_TOTP_CALLS) or name.startswith(_TOTP_CALLS):
        return [(start, end)] if is_base32_secret(value) else []
    setter = re.match(r"(?:set|with|use)_?(?P<what>[A-Za-z].*)\Z", raw)
    kind = name_kind(setter.group("what")) if setter and not second else None
    if kind is not None:  # setApiToken("…"), withSecret("…"), set_password("…")
        kind = "password" if kind == "pwd" else kind
        return [(start, end)] if reads_as_credential(kind, value, quoted=True) else []
    if name.endswith(_PASSWORD_CALLS):
        if not second and len(value) >= 20 and looks_random(value):
            return [(start, end)]  # authenticate("<a key>")
        single_setter = not second and name.startswith(("set", "with", "password", "passwd"))
        if (second or single_setter) and reads_as_credential("password", value, quoted=True):
            return [(start, end)]
        return []
    if name.endswith(_KEY_CALLS) or name.startswith(("client", "api")):
        if _ANOTHER_LITERAL.match(text, end + 1):
            return []  # Client("<account id>", "<secret>"): the secret is the later one
        return [(start, end)] if len(value) >= 20 and looks_random(value) else []
    return []


# --- a name and its value in separate fields -------------------------------------------

_FIELD_VALUE = re.compile(r"""(?:value|default)["']?[ \t]*[:=][ \t]*(?:"(?P<dq>[^"\s]{1,1024})"|'(?P<sq>[^'\s]{1,1024})'
                              |(?P<bare>[^\s"',;}\]]{1,1024}))""", re.VERBOSE)
_ELEMENT_VALUE = re.compile(r"""[^<>\n]{0,100}>[ \t]*(?P<bare>[^<\s]{1,1024})[ \t]*</""")
_PLIST_VALUE = re.compile(r"""</key>\s{0,40}<string>(?P<bare>[^<\s]{1,1024})</string>""")


def _pair_kind(name: str) -> str | None:
    kind = name_kind(name)
    return "password" if kind == "pwd" else kind


def _judged(kind: str, text: str, found: re.Match[str] | None) -> list[tuple[int, int]]:
    if found is None:
        return []
    group = next(g for g in ("dq", "sq", "bare") if g in found.re.groupindex and found.group(g) is not None)
    start, end = found.span(group)
    return [(start, end)] if reads_as_credential(kind, text[start:end], quoted=True) else []


def named_field(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``name: DB_PASSWORD`` … ``value: …`` (Kubernetes, ECS, Terraform), ``variable
    "db_password" { default = "…" }``: the value within 200 characters of the name."""
    kind = _pair_kind(match.group("name"))
    if kind is None:
        return []
    window_end = min(len(text), match.end() + 200)
    return _judged(kind, text, _FIELD_VALUE.search(text, match.end(), window_end))


def named_element(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``<string name="api_key">…</string>`` (Android) and ``<key>APIKey</key><string>…</string>``
    (a property list): the element's text."""
    kind = _pair_kind(match.group("name"))
    if kind is None:
        return []
    pattern = _PLIST_VALUE if match.group().startswith("<key>") else _ELEMENT_VALUE
    return _judged(kind, text, pattern.match(text, match.end("name") + (1 if pattern is _ELEMENT_VALUE else 0)))


# --- tables -----------------------------------------------------------------------

_SEPARATOR_ROW = re.compile(r"[ \t]*\|?(?:[ \t]*:?-{1,64}:?[ \t]*\|){1,32}")


def table_column(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A Markdown table whose header names a secret (``| host | user | password |``): the
    cells of that column in the next 20 rows."""
    begin = line_start(text, match.start(), 300)
    line_end = text.find("\n", match.start(), match.start() + 1024)
    if line_end == -1 or not text.startswith("|", begin):
        return []
    # A header is a table's first row, and a row of dashes follows it: so each table is read
    # once, however many of its rows name a secret.
    previous = line_start(text, max(0, begin - 1), 1024)
    if begin and text[previous:begin].lstrip().startswith("|"):
        return []
    if _SEPARATOR_ROW.match(text, line_end + 1) is None:
        return []
    header = [cell.strip() for cell in text[begin:line_end].strip().strip("|").split("|")]
    column = next((i for i, cell in enumerate(header) if _pair_kind(cell) is not None), None)
    if column is None:
        return []
    kind = _pair_kind(header[column])
    spans = []
    at = line_end + 1
    for _ in range(20):
        end = text.find("\n", at, at + 1024)
        end = min(len(text), at + 1024) if end == -1 else end
        row = text[at:end]
        if not row.lstrip().startswith("|"):
            break
        cells = row.strip().strip("|").split("|")
        if column < len(cells) and not set(cells[column].strip()) <= set("-: "):
            cell = cells[column]
            value = cell.strip().strip("`")
            offset = at + row.index("|") + 1 + sum(len(c) + 1 for c in cells[:column]) + cell.index(value)
            if " " not in value and reads_as_credential(kind, value, quoted=True):
                spans.append((offset, offset + len(value)))
        at = end + 1
    return spans


# --- command lines, SQL, PowerShell ---------------------------------------------------

_PROGRAM_FLAGS = {"P": ("zip", "unzip", "sqlcmd", "bcp", "osql"), "p": ("7z", "7za", "7zr", "rar", "unrar")}


def program_flag(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``zip -P …``, ``7z a -p…``, ``sqlcmd -P …``: a password flag of the program named
    before it on the line."""
    programs = _PROGRAM_FLAGS[match.group("flag")]
    line = text[line_start(text, match.start()):match.start()].lower()
    if not any(re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", line) for p in programs):
        return []
    if match.group("flag") == "p" and match.group("space"):
        return []  # 7z's password is glued to its flag
    start, end = match.span("value")
    return [(start, end)] if is_strong_value(text[start:end]) and not is_placeholder(text[start:end]) else []


def strong_value(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A value whose place is evidence enough (``IDENTIFIED BY '…'``, ``/pass:…``,
    ``smbclient -U user%…``, ``ConvertTo-SecureString "…"``): 3 characters, no placeholder,
    and if unquoted, one that reads as a credential."""
    start, end = match.span("value")
    value = text[start:end].rstrip(".;,")
    end = start + len(value)
    quoted = "q" in match.re.groupindex and bool(match.group("q"))
    if not is_strong_value(value) or (not quoted and not is_credential_value(value)):
        return []
    return [(start, end)]


# Commands that read a password on their standard input.
_STDIN_READERS = re.compile(r"--password-stdin|passwd[ \t]+--stdin|sudo[ \t]+(?:-[A-Za-z]+[ \t]+)*-[A-Za-z]*S|chpasswd"
                            r"|-passin[ \t]+stdin|kinit|--pass(?:word)?-stdin|--stdin-password")


def piped_password(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``echo '…' | sudo -S …``, ``printf … | docker login --password-stdin``, ``sudo -S <<< '…'``:
    a literal written to a command that reads a password from its input (a variable is a
    reference, and a placeholder)."""
    line_end = text.find("\n", match.end(), match.end() + 300)
    line = text[line_start(text, match.start()):match.end() + 300 if line_end == -1 else line_end]
    if _STDIN_READERS.search(line) is None:
        return []
    return strong_value(text, match)


def windows_option(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``/p:…`` after xfreerdp or an RDP client, ``/pass:…`` or ``/password:…`` anywhere."""
    if match.group("name").lower() == "p":
        line = text[max(0, match.start() - 200):match.start()].lower()
        if "rdp" not in line and "mstsc" not in line:
            return []
    return strong_value(text, match)


def literal_pair(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A string literal naming a secret and the literal after it: ``define('DB_PASSWORD',
    '…')``, ``setItem("token", "…")``, ``setenv("API_TOKEN", "…")``, ``("password", "…")``."""
    kind = _pair_kind(match.group("name"))
    if kind is None:
        return []
    start, end = match.span("value")
    return [(start, end)] if reads_as_credential(kind, text[start:end], quoted=True) else []


def pgpass_line(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``host:port:database:user:password`` on a line of its own (a ``.pgpass`` file)."""
    start, end = match.span("value")
    value = text[start:end]
    return [(start, end)] if is_credential_value(value) or looks_random(value) else []


# --- TOTP seeds shown in groups ------------------------------------------------------

def grouped_seed(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``setup key: abcd efgh ijkl mnop …``: groups of four base32 characters after a word
    that says key, secret or seed -- the seed an authenticator app is given."""
    start, end = match.span("value")
    return [(start, end)] if is_base32_secret(text[start:end].replace(" ", "")) else []


# --- prose ---------------------------------------------------------------------------

def prose_value(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``the new password for x is now …``, ``use … as the password``, ``login admin / …``:
    a word that mixes three kinds of character, or looks random."""
    start, end = match.span("value")
    while end > start and text[end - 1] in ".,:;!?)":
        if text[end - 1] in "!?" and end - start > 1 and text[end - 2].isalnum() and end == match.end("value"):
            break
        end -= 1
    word = text[start:end]
    kinds = (any(c.isupper() for c in word) + any(c.islower() for c in word) + any(c.isdigit() for c in word)
             + any(not c.isalnum() for c in word))
    if len(word) < 8 or is_placeholder(word) or not (kinds >= 3 or looks_random(word)):
        return []
    return [(start, end)]


_VALUE = r"""(?P<value>[^\s"'`,;()\[\]{}<>]{6,1024})"""
_QUOTED = r"""(?P<q>["'])(?P<value>[^"'\n]{3,256})(?P=q)"""

# (family, pattern, check, folded, needle, head): families.py makes each a Rule.
FORM_RULES = (
    *(("credential-assignment", rf"""{q}(?P<name>[A-Za-z][\w.-]{{1,63}}){q}[ \t]*,[ \t]*
                                   ["'](?P<value>[^"'\s]{{6,1024}})["']""", literal_pair, False, None,
       rf"""{q}[A-Za-z][\w.-]{{1,63}}{q}[ \t]*,[ \t]*["'][^"'\s]{{6}}""")
      for q in ('"', "'")),
    ("credential-assignment", r"""\((?P<first>[ \t]*(?:"[^"\n]{1,64}"|'[^'\n]{1,64}')[ \t]*,)?[ \t]*
                                  ["'](?P<value>[^"'\s]{6,256})["'][ \t]*[,)]""", call_argument, False, "(",
     r"""\([ \t]*["']"""),
    ("credential-assignment", r"""name(?<![a-z0-9_]name)["']?[ \t]*[:=][ \t]*["']?(?P<name>[A-Za-z][A-Za-z0-9_.-]{1,63})["']?""",
     named_field, True, None, None),
    ("credential-assignment", r"""variable[ \t]+"(?P<name>[A-Za-z][A-Za-z0-9_-]{1,63})"[ \t]*\{""", named_field,
     False, None, None),
    ("credential-assignment", r"""<string[ \t]+name[ \t]*=[ \t]*"(?P<name>[^"\n]{1,64})""", named_element, False,
     None, None),
    ("credential-assignment", r"""<(?P<name>[A-Za-z][\w.:-]{0,63})[ \t]+value[ \t]*=[ \t]*"(?P<value>[^"\s]{1,1024})["]""",
     literal_pair, False, "<", r"""<[A-Za-z][\w.:-]{0,63}[ \t]+value[ \t]*="""),
    ("credential-assignment", r"""<key>(?P<name>[^<\n]{1,64})(?=</key>)""", named_element, False, None, None),
    ("credential-assignment", r"""\|[ \t]*(?:[a-z_ -]{0,30}(?:password|passwd|pass|pwd|secret|token|key|
                                  passwort|contraseña|senha|mot[ ]de[ ]passe))[ \t]*\|""", table_column, True, "|",
     r"""\|[ \t]*[a-z_ -]{0,30}(?:pass|pwd|secret|token|key|passwort|contraseña|senha|mot[ ]de[ ]passe)"""),
    ("cli-credential", r"""-(?<![^\s]-)(?P<flag>[Pp])(?P<space>[ \t]+)?(?P<value>[^\s"'-][^\s"']*)""", program_flag,
     False, None, r"-(?<![^\s]-)[Pp]"),
    ("cli-credential", r"""-(?<![^\s]-)U[ \t]+["']?[^\s%"'/]{1,64}%(?P<value>[^\s"']{3,256})""", strong_value, False,
     None, None),
    ("cli-credential", r"""/(?<![^\s]/)(?P<name>p|pass|password|pwd):(?P<value>[^\s"'/]{3,256})""",
     windows_option, False, "/", r"/(?<![^\s]/)p"),
    ("cli-credential", r"""net[ \t]+user[ \t]+[^\s/"']{1,64}[ \t]+(?P<value>[^\s/*"'][^\s"']{2,255})""", strong_value,
     True, None, None),
    ("cli-credential", r"""/user:[^\s]{1,128}[ \t]+(?P<value>[^\s/*"'][^\s"']{2,255})(?=[ \t]*(?:/|\r?\n|\Z))""",
     strong_value, True, None, None),
    # (OpenSSL's -pass and -passin take a source: pass:…, env:…, file:…, fd:…, stdin.)
    ("cli-credential", r"""-(?<![^\s]-)[a-z]{0,20}pass(?:word)?[ \t]+(?!(?:pass|env|file|fd):|stdin(?![^\s]))
                           (?P<value>[^\s"'\-:][^\s"']{2,255})""",
     strong_value, True, None, r"-(?<![^\s]-)[a-z]{0,20}pass"),
    *(("cli-credential", rf"""{word}(?<![\w-]{word})[ \t]+(?:-[neE]{{1,3}}[ \t]+)?(?P<q>["']?)
                            (?P<value>[^\s"'|;&$`<>]{{3,256}})(?P=q)[ \t]*(?:\\n)?[ \t]*\|""", piped_password, False, None,
       rf"{word}(?<![\w-]{word})[ \t]") for word in ("echo", "printf")),
    ("cli-credential", r"""<<<[ \t]*""" + _QUOTED, piped_password, False, None, None),
    ("cli-credential", r"""convertto-securestring(?:[ \t]+-string)?[ \t]+""" + _QUOTED, strong_value, True, None,
     None),
    ("credential-assignment", r"""identified[ \t]+by[ \t]+""" + _QUOTED, strong_value, True, None, None),
    ("credential-assignment", r"""identified[ \t]+by[ \t]+(?P<value>[^\s"';]{3,256})""", strong_value, True, None,
     None),
    ("credential-assignment", r"""password[ \t]+""" + _QUOTED, strong_value, True, None, None),
    ("credential-assignment", r"""wifi:(?:[^\n]{0,200}?;)?p:(?P<value>[^;\n]{3,256});""", strong_value, True, None,
     None),
    # A .pgpass line: from a line's start (a newline, a search for which is fast, or the text's).
    ("credential-assignment", r"""\n(?:[^:\s]{1,128}:){4}(?P<value>[^\s:]{6,256})[ \t]*(?=\r?\n|\Z)""", pgpass_line,
     False, "\n", r"""\n(?:[^:\s]{1,128}:){4}"""),
    ("credential-assignment", r"""\A(?:[^:\s]{1,128}:){4}(?P<value>[^\s:]{6,256})[ \t]*(?=\r?\n|\Z)""", pgpass_line,
     False, None, None),
    *(("credential-assignment", word + r"""(?<![a-z0-9_]""" + word + r""")[ \t]*(?::[ \t]*)?(?:\r?\n[ \t]*)?
                                  (?P<value>[a-z2-7]{4}(?:[ ][a-z2-7]{4}){3,15})(?![a-z0-9])""",
       grouped_seed, True, None, None) for word in ("key", "secret", "seed")),
    ("credential-assignment", r"""pass(?:word|phrase)(?:[ \t]+(?:for|of|on)[ \t]+[^\s]{1,40})?[ \t]+(?:is|was|to)
                                  (?:[ \t]+now)?[ \t]+""" + _VALUE, prose_value, True, None, None),
    ("credential-assignment", r"""as(?<=[ \t]as)[ \t]+(?:the|my|your|a)[ \t]+(?:[a-z]+[ \t]+){0,2}password""",
     lambda text, match: _word_before(text, match), True, None, None),
    ("credential-assignment", r"""login[ \t]+[^\s/]{1,64}[ \t]*/[ \t]*""" + _VALUE, prose_value, True, None, None),
)


_WORD_BEFORE = re.compile(r"(?P<value>[^\s\"'`,;()\[\]{}<>]{6,64})\Z")


def _word_before(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``use … as the password``: the word before ``as``."""
    word = _WORD_BEFORE.search(text, max(0, match.start() - 65), match.start() - 1)
    return [] if word is None else prose_value(text, word)
