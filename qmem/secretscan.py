"""A precision-oriented scan of text for credentials, and redaction of what it finds.

``qmem_store`` refuses memory text in which :func:`scan` finds something, and
the Hermes importer scans each record's text, mapped metadata and provenance
with :func:`scan_values` before it marks the record ``secret_scan="passed"``.
:func:`redact` replaces each finding with ``[redacted: <family>]``, for text
that came from elsewhere (a server's error detail) and is about to be shown or
stored.

What it promises.  :func:`scan` reports every non-overlapping match of the
families below as a :class:`Finding` -- a family name and the offsets of the
credential-bearing text -- and never returns, logs or formats the matched text
itself, so a finding is safe to show, store or raise.  It is pure (no I/O, no
global state) and runs in time linear in the length of the text: every pattern
starts at a literal or a bounded boundary, no repetition in it can match the
same text in two ways, and every look around a match is bounded, so nothing
can backtrack quadratically.

What it does not promise.  It is a guard, not a secret detector of record, and
a clean scan is not a proof that the text is safe.  It looks only for the
shapes listed here, so it misses credentials that are unknown, encoded, split,
encrypted, novel, short, context-dependent or deliberately obfuscated
(look-alike Unicode, zero-width characters, a key spelled out in words).  It
also rejects some benign strings: documentation examples, test fixtures and
look-alikes are refused along with real credentials.  Use upstream secret
management and independent scanners where that matters.

Families (a stable name each; offsets cover the part named in brackets, else
the whole token):

``private-key``           a PEM or PGP ``-----BEGIN … PRIVATE KEY[ BLOCK]-----``
                          header followed by key material (a run of 16 or more
                          base64 characters, not all lower-case letters, as in
                          a truncated ``MIIEpAIBAAKCAQEA…``) [header to
                          ``-----END …-----``]
``github-token``          ``ghp_ gho_ ghu_ ghs_ ghr_`` + 36 alphanumerics;
                          ``github_pat_`` + 22 + ``_`` + 59 alphanumerics
``gitlab-token``          ``glpat- gldt- glrt- glptt- glcbt- gloas- glsoat- glft-
                          glimt- glagent- glffct- glwt-`` + 20 or more;
                          ``GR1348941`` + 20 (runner registration)
``slack-token``           ``xoxb- xoxa- xoxp- xoxr- xoxs-`` + numeric parts + 10 or
                          more; ``xoxe.xoxp-``/``xoxe-`` refresh tokens;
                          ``xapp-`` app-level tokens
``slack-webhook``         ``hooks.slack.com/services|workflows|triggers/T…/…/…``
                          [the URL]
``discord-webhook``       ``discord[app].com/api/webhooks/<id>/<token>`` [the URL]
``stripe-key``            ``sk_live_ rk_live_ sk_test_ rk_test_`` + 24 or more;
                          ``whsec_`` + 32 or more (publishable ``pk_`` keys are
                          public and not findings)
``anthropic-key``         ``sk-ant-`` + 32 or more (API, admin and OAuth keys)
``openai-key``            ``sk-proj- sk-svcacct- sk-admin- sk-None-`` + 32 or more;
                          ``sk-`` + 32 or more random characters (OpenAI's
                          classic keys and the providers that copied the shape)
``aws-access-key``        ``AKIA`` or ``ASIA`` + 16 upper-case alphanumerics
``google-api-key``        ``AIza`` + 35
``google-oauth``          ``GOCSPX-`` client secrets, ``ya29.`` access tokens,
                          ``1//0`` refresh tokens
``npm-token``             ``npm_`` + 36 alphanumerics
``pypi-token``            ``pypi-AgE`` + 50 or more (a PyPI macaroon)
``huggingface-token``     ``hf_`` + 30 or more letters of both cases
``sendgrid-key``          ``SG.`` + 22 + ``.`` + 43
``twilio-key``            ``SK`` + 32 hex (an API key); an ``AC`` account SID
                          followed by ``,`` or ``:`` and a 32-hex auth token
                          [the auth token]
``discord-token``         a bot token whose first part is the base64 of a
                          numeric user id, then 6 and 27 or more characters
``azure-key``             ``AccountKey=`` + 80 or more base64, ``SharedAccessKey=``
                          + 40 or more (connection strings) [the key]
``digitalocean-token``    ``dop_v1_ doo_v1_ dor_v1_`` + 64 hex
``shopify-token``         ``shpat_ shpss_ shpca_ shppa_`` + 32 hex
``databricks-token``      ``dapi`` + 32 hex
``telegram-bot-token``    8 to 10 digits + ``:AA`` + 33
``mailgun-key``           ``key-`` + 32 hex
``service-account-key``   ``"private_key_id": "<40 hex>"`` of a Google service
                          account file [the id]; its ``"private_key"`` is a
                          ``private-key``
``heroku-key``            ``HRKU-`` + 40 or more
``atlassian-token``       ``ATATT3``/``ATCTT3`` + 50 or more; ``ATBB`` + 32
``linear-key``            ``lin_api_`` + 40, ``lin_oauth_`` + 64 hex
``notion-token``          ``secret_`` + 43 random alphanumerics, ``ntn_`` + 40 or more
``doppler-token``         ``dp.st. dp.pt. dp.ct. dp.sa. dp.scim. dp.audit.`` + 40 or more
``vault-token``           ``hvs. hvb. hvr.`` + 24 or more
``grafana-token``         ``glsa_`` + 32 + ``_`` + 8 hex; ``glc_`` + 32 or more
``posthog-key``           ``phc_ phx_`` + 43
``sentry-token``          ``sntrys_`` + 60 or more, ``sntryu_`` + 64 hex
``square-token``          ``EAAA`` + 60, ``sq0atp-`` + 22, ``sq0csp-`` + 43
``planetscale-token``     ``pscale_pw_ pscale_tkn_ pscale_oauth_`` + 32 or more
``supabase-key``          ``sb_secret_`` + 20 or more, ``sbp_`` + 40 hex (service
                          role keys are JWTs: ``jwt``)
``age-secret-key``        ``AGE-SECRET-KEY-1`` + 58 bech32 characters
``dockerhub-token``       ``dckr_pat_`` + 27 or more
``groq-key``              ``gsk_`` + 52
``jwt``                   ``eyJ….eyJ….<signature>`` whose header decodes to a
                          JSON object with an ``alg``
``credential-url``        ``scheme://user:password@host`` [the password], or a
                          URL whose query or fragment sets ``token``,
                          ``access_token``, ``api_key``, ``key``, ``sig``,
                          ``password``, ``secret``, … [the value]
``basic-auth``            ``Basic`` + base64 of ``user:password`` (a header, a
                          ``curl -H``, a code string); ``"auth": "<base64>"`` or
                          ``_auth=<base64>`` of ``user:password`` (Docker and npm
                          configuration) [the base64]
``bearer-token``          ``Bearer`` + a token of 16 or more characters; an
                          ``Authorization`` header with another scheme
                          (``token``, ``Bot``, ``SSWS``, …) and a value [the token]
``cli-credential``        ``curl -u|--user user:password`` [the password];
                          ``-p <password>`` of ``docker|podman|helm … login``,
                          ``sshpass`` and ``mongo``; ``mysql -p<password>``;
                          ``redis-cli -a <password>``; ``-passin pass:<password>``;
                          ``--password <value>``, ``--token <value>`` … (a long
                          option named like a secret, the value after a space)
                          [the value]
``netrc-password``        ``machine|login <word> password <value>`` [the value]
``credential-assignment`` ``name = value``, ``name: value``, ``"name": "value"``,
                          ``--name=value``, ``<name>value</name>``, ``name: Type =
                          value``, ``<add key="name" value="…"/>``, ``the name
                          is: value`` … where the name ends in ``password``,
                          ``passwd``, ``passphrase``, ``pass``, ``secret``,
                          ``token``, ``credential(s)``, ``authorization``,
                          ``key`` or ``session(id)`` (any case or separator, so
                          ``AWS_SECRET_ACCESS_KEY``, ``clientSecret``,
                          ``authKey`` and ``private key`` count; ``Passwort``,
                          ``contraseña``, ``mot de passe`` … too), or is ``Pwd``
                          in a ``;``-separated connection string; and
                          ``password <value>`` in prose when the value mixes
                          letters and digits [the value]

A token must not follow a letter, digit or underscore, and a fixed-length one
must not run on past its end either, so ``ghp_`` inside a longer identifier is
not a finding.  Where two findings overlap, the one earlier in the list above
wins (``GITHUB_TOKEN=ghp_…`` is a ``github-token``).

Placeholders (one rule, for every family).  A value is a placeholder, and not
a finding, when it -- or, for a token, the part after its prefix:

* is made only of ``x``, ``X``, ``*``, ``.`` and ``0`` (with ``-``, ``_`` or ``/``
  between runs), ends in 8 or more of them, or repeats one character
  (``ghp_xxxx…``, ``AKIA0000…``, ``sk_live_51Hab00000000``, ``********``);
* starts with ``$``, ``%``, ``<``, ``{`` or ``[``, or with ``your``; or holds
  a template anywhere: ``<…>``, ``${``, ``{{``, ``%NAME%``, ``%s``
  (``${TOKEN}``, ``sk_live_{{ key }}``, ``%API_KEY%``, ``ghp_<token>``);
* contains ``...``, ``…``, ``***``, ``xxxx``, ``redacted``, ``placeholder``,
  ``changeme`` or ``replace_me``, or is followed by ``...`` or ``…`` (a
  truncated example: ``sk-ant-api03-...``, ``sk_live_...``);
* equals a word such as ``password``, ``token``, ``example``, ``changeit`` or
  ``foo``.

Generic values.  A value of an assignment, a URL query parameter, a header or
an option counts only when it reads as a credential rather than as a word, a
reference or a placeholder:

* it has at least 6 characters and no whitespace (an unquoted value ends at
  whitespace, a quote, a backslash or one of ``, ; & = ( ) [ ] { } < >``, keeps
  a final ``=`` or ``==`` of base64 padding, and a final ``.`` or ``:`` is taken
  to end the sentence);
* it contains a digit or a symbol other than ``_ . -``, or is a run of
  letters whose case changes at least every third character -- words and
  identifiers (``required``, ``db_password``, ``os.environ``) are how prose
  and code *mention* a secret, while real ones almost always mix in digits or
  symbols;
* it is not code that reads the secret: not followed by ``(``, ``[``, ``{`` or
  ``<`` (a call, a subscript, a template), not a call ``f(x)``, and, unquoted,
  not an identifier chain (``process.env.API_KEY_V2``, ``options?.apiKey``,
  ``Schema$inbound``), a constant's name (``DB_PASSWORD_V2``) or a CamelCase
  name (``SignatureV4SignWithCredentials``);
* it is not a URL, a path (``/run/secrets/db``, ``~/.ssh/id_rsa``), a version
  (``^9.0.2``), a colour (``#ffffff``), a file reference (``@api_key.txt``), a
  regular expression (``/^sk-…/``), a YAML tag (``!vault``) or a key that its
  vendor publishes (``pk_live_…``, ``sb_publishable_…``);
* it is not a lower-case name such as ``postgres-secret-1`` or
  ``x-aws-ec2-metadata-token`` (Kubernetes, Helm and CI configuration name a
  stored secret that way); for a password, only a name of two or more words;
* after ``is`` (``the password is …``, no colon): it mixes three kinds of
  character or looks random, so ``the token is base64url`` is prose;
* for a name ending in ``credential``, ``session(id)`` or ``key`` other than
  ``api_key``, ``secret_key``,
  ``private_key``, ``access_key``, ``account_key``, ``master_key``,
  ``signing_key``, ``encryption_key``, ``auth_key``, ``hmac_key`` and
  ``subscription_key``: it looks random -- 16 or more characters, letters and
  digits alternating at least three times, less than half of it in words -- so
  ``primaryKey = "id"``, ``sortKey: "created_at"`` and
  ``objectKey = "uploads/2024/05/a.png"`` pass; a bare ``key`` and names ending
  in ``public_key``, ``publishable_key``, ``idempotency_key``, ``cache_key``,
  ``primary_key``, ``foreign_key``, ``sort_key``, ``partition_key`` and the
  like are never secret names;
* it is not a placeholder (above).

So ``password=hunter22`` is a finding, while ``password: required``,
``password = os.environ["PW"]``, ``token=${TOKEN}``, ``api_key=<redacted>``
and ``password=letmein`` are not.  A password in a URL's userinfo, after
``curl -u user:`` or ``password`` in a ``.netrc`` line is strong evidence on
its own: it needs only 3 characters, not to be a placeholder and not to repeat
the user name (``postgres://postgres:postgres@…`` is a default, not a secret).

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
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["Finding", "FAMILIES", "scan", "first_finding", "scan_values", "describe", "redact"]


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
# It gets the original text; a folded rule's match is over the lower-cased
# copy, whose offsets are the same.
_Check = Callable[[str, re.Match], list[tuple[int, int]]]


@dataclass(frozen=True)
class _Rule:
    family: str
    pattern: re.Pattern[str]
    check: _Check
    folded: bool = False  # the pattern runs over the lower-cased text
    needle: str = ""      # text every match starts with, if any


# --- placeholders and values -------------------------------------------------

_PLACEHOLDER_FILL = frozenset("xX*.0-_/")
_PLACEHOLDER_PREFIXES = ("$", "%", "<", "{", "[", "your")
_PLACEHOLDER_MARKERS = ("...", "\u2026", "***", "xxxx", "redacted", "placeholder",
                        "changeme", "change_me", "change-me", "replace_me", "replaceme",
                        "replace-me", "${", "{{", "%s", "%(")
_PLACEHOLDER_WORDS = frozenset({"pass", "password", "passwd", "pwd", "pw", "secret",
                                "token", "apikey", "api_key", "key", "username", "user",
                                "sample", "example", "dummy", "changeit", "foo", "bar", "baz"})
_ELLIPSIS = ("...", "\u2026")
_PERCENT_VARIABLE = re.compile(r"%[A-Za-z_][A-Za-z0-9_]*%")


def _is_placeholder(value: str) -> bool:
    """Whether a value (or a token's part after its prefix) is a placeholder."""
    lowered = value.lower()
    return (not value
            or set(value) <= _PLACEHOLDER_FILL
            or len(value) - len(value.rstrip("xX*.0")) >= 8
            or len(set(value)) == 1
            or lowered.startswith(_PLACEHOLDER_PREFIXES)
            or any(marker in lowered for marker in _PLACEHOLDER_MARKERS)
            or lowered in _PLACEHOLDER_WORDS
            or ("<" in value and ">" in value)
            or _PERCENT_VARIABLE.search(value) is not None)


def _truncated(text: str, end: int) -> bool:
    """Whether the match ending at *end* is followed by an ellipsis."""
    return text.startswith(_ELLIPSIS, end)


_MIN_VALUE = 6
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.@/-]*\Z")
_YAML_TAG = re.compile(r"!{1,2}[A-Za-z_][A-Za-z0-9_]*\Z")
_COLOR = re.compile(r"#[0-9A-Fa-f]{3,8}\Z")
_VERSION = re.compile(r"[\^~>=<v]{0,2}[0-9]+(?:\.[0-9x*]+)+(?:[-+][\w.]+)?\Z")
_CALL = re.compile(r"[\w.$]+\(.*\)\Z")
# Values that vendors publish in web pages: not credentials.
_PUBLIC_PREFIXES = ("pk_live_", "pk_test_", "sb_publishable_")
# Code that reads a secret: an identifier chain (process.env.API_KEY_V2,
# options?.apiKey, ++this.count, Schema$inbound) or a constant's name.
_CODE_CHAIN = re.compile(r"""(?:\+\+|--|!|~)?(?P<first>[A-Za-z_$#][\w$#]*)
                              (?:(?:\?\.|!\.|\.|->|::)[A-Za-z_$#][\w$#]*)*!?\Z""", re.VERBOSE)
_DOLLAR_WORD = re.compile(r"\$[A-Za-z]{3}")
_CAMEL_CASE = re.compile(r"[a-z]*(?:[A-Z][a-z]*|[0-9])+\Z")  # one digit a step: no two ways
_HUMP = re.compile(r"[A-Z][a-z]{2,}")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\Z")


def _is_credential_value(value: str) -> bool:
    """Whether a generic value reads as a credential (see "Generic values")."""
    if len(value) < _MIN_VALUE or _is_placeholder(value):
        return False
    if (_URL_START.match(value) or _YAML_TAG.match(value) or value.startswith(_PUBLIC_PREFIXES)
            or _COLOR.match(value) or _CALL.match(value) or _VERSION.match(value)
            or (value.startswith("@") and ("/" in value or "." in value))
            or value.startswith(("/^", "/\\")) or (_PATH.match(value) and not _looks_random(value))):
        return False  # a URL, a YAML tag, a public key, a regular expression, a path
    # Words and identifiers ("required", "db_password", "os.environ") are how
    # prose and code mention a secret; real ones almost always mix in digits
    # or symbols, or are long runs of letters in no pattern of case.
    return (any(c.isdigit() or not (c.isalpha() or c in "_.-") for c in value)
            or _looks_generated(value))


def _is_code(value: str) -> bool:
    """Whether an unquoted value is code that reads a secret, not a secret."""
    humps = _HUMP.findall(value) if _CAMEL_CASE.match(value) else []
    if _CONSTANT.match(value) or (len(humps) >= 3 and 4 * sum(map(len, humps)) >= 3 * len(value)):
        return True  # DB_PASSWORD_V2, SignatureV4SignWithCredentials
    chain = _CODE_CHAIN.match(value)
    if chain is None:
        return False
    return (not any(c.isdigit() for c in chain.group("first"))
            or _DOLLAR_WORD.search(value) is not None
            or chain.group("first") != value.lstrip("+-!~").rstrip("!"))


def _words(value: str) -> int:
    return sum(1 for part in re.split(r"[._/:-]", value) if len(part) >= 3 and part.isalpha())


def _is_lower_name(value: str) -> bool:
    """A lower-case name like ``postgres-secret-1`` or a resource path like
    ``projects/p/secrets/s/versions/1``: words, numbers, ``v2``."""
    return (value == value.lower()
            and all(part.isalpha() or part.isdigit() or (part.isalnum() and len(part) <= 3)
                    for part in re.split(r"[._/:-]", value)))


_WORD = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{4,}")
_LETTER_DIGIT = re.compile(r"[A-Za-z](?=[0-9])|[0-9](?=[A-Za-z])")


def _looks_generated(value: str) -> bool:
    """16 or more characters whose case changes at every third one or more
    often, and not mostly capitalised words (CamelCase)."""
    if len(value) < 16:
        return False
    changes = sum(1 for a, b in zip(value, value[1:])
                  if a.isalpha() and b.isalpha() and a.isupper() != b.isupper())
    humps = sum(len(hump) for hump in _HUMP.findall(value))
    return 3 * changes >= len(value) and 4 * humps < 3 * len(value)


def _looks_random(value: str) -> bool:
    """Whether a value looks generated rather than written: 16 or more
    characters, letters and digits alternating at least three times, and less
    than half of it in words."""
    if len(value) < 16 or _is_placeholder(value) or value.startswith(_PUBLIC_PREFIXES):
        return False
    if sum(1 for _ in _LETTER_DIGIT.finditer(value)) < 3:
        return False
    return 2 * sum(len(word) for word in _WORD.findall(value)) < len(value)


# --- token families -------------------------------------------------------

def _token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A prefixed token: its ``body`` group must not be a placeholder."""
    if _truncated(text, match.end()) or _is_placeholder(match.group("body")):
        return []
    return [match.span()]


def _random_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token with a weak prefix: its body must also look random."""
    if not _looks_random(match.group("body")):
        return []
    return _token(text, match)


def _mixed_case(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    body = match.group("body")
    if body == body.lower() or body == body.upper():
        return []
    return _token(text, match)


def _jwt(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    header = match.group("header")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, RecursionError):  # bad base64, UTF-8 or JSON; absurd nesting
        return []
    if isinstance(decoded, dict) and isinstance(decoded.get("alg"), str):
        return [match.span()]
    return []


def _discord(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A Discord bot token starts with the base64 of the bot's numeric id."""
    head = match.group("head")
    try:
        user_id = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
    except (ValueError, binascii.Error):
        return []
    if not (user_id.isdigit() and 17 <= len(user_id) <= 20):
        return []
    return _token(text, match)


def _webhook(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A webhook URL: the span takes in the scheme that precedes the host."""
    if any(_is_placeholder(part) for part in match.group("body").split("/")):
        return []
    start = match.start()
    for scheme in ("https://", "http://"):
        if text.startswith(scheme, start - len(scheme)):
            start -= len(scheme)
            break
    return [(start, match.end())]


def _telegram(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``:AA…`` found; the bot id is the 8 to 10 digits before the colon."""
    start = match.start()
    while start > 0 and start > match.start() - 11 and text[start - 1].isdigit():
        start -= 1
    digits = match.start() - start
    if not 8 <= digits <= 10 or (start > 0 and _is_word_char(text[start - 1])):
        return []
    if _truncated(text, match.end()) or _is_placeholder(match.group("body")):
        return []
    return [(start, match.end())]


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _body(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token in its setting (``AccountKey=…``): only the ``body`` is reported."""
    if _truncated(text, match.end()) or _is_placeholder(match.group("body")):
        return []
    return [match.span("body")]


# --- private keys -----------------------------------------------------------

# Key material after a PEM header: base64, armour headers (Proc-Type: 4,…),
# line breaks real or escaped, up to the -----END line.
# Everything after the first run is optional, so a match never fails and the
# runs inside the repetition are never taken apart again (no backtracking).
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=\s:,.()]+|\\[rn]|-(?!----))*(?:-----END[ A-Z0-9]{0,40}-----)?")
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/]{16,}")


def _private_key(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    body = _PEM_BODY.match(text, match.end())
    end = body.end()
    material = _KEY_MATERIAL.search(text, match.end(), end)
    if material is None or material.group().islower():
        return []  # a header alone, in prose, or with a placeholder body
    while end > match.end() and (text[end - 1].isspace() or text.startswith("\\n", end - 2)):
        end -= 2 if text.startswith("\\n", end - 2) else 1
    return [(match.start(), end)]


# --- URLs -----------------------------------------------------------------

_URL_TRAILING_PUNCTUATION = ".,;:!?)]}"
_URL_PARAMETER = re.compile(r"[^&;#?]+")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _credential_url(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
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
                and password.lower() != url[:authority_at - 3].lower() and not _is_placeholder(password)
                and not _is_placeholder(unquote(password))):
            spans.append((start + colon + 1, start + at))
    # OAuth implicit flows put tokens in the fragment, so read it as well.
    for parameter in _URL_PARAMETER.finditer(url, _find_any(url, "?#", authority_end)):
        name, equals, value = parameter.group().partition("=")
        if (equals and _is_url_secret_name(unquote(name))
                and _is_credential_value(unquote(value))):
            value_start = start + parameter.start() + len(name) + 1
            spans.append((value_start, value_start + len(value)))
    return spans


def _find_any(text: str, chars: str, start: int) -> int:
    """Return the index of the first of *chars* in text[start:], or len(text)."""
    found = [i for i in (text.find(c, start) for c in chars) if i != -1]
    return min(found, default=len(text))


def _is_url_secret_name(name: str) -> bool:
    compact = _compact(name)
    return (_name_kind(name) is not None or compact in ("key", "sig", "auth")
            or compact.endswith("signature"))


# --- authorization headers ------------------------------------------------

def _bearer(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    start, end = match.span("token")
    return [(start, end)] if _is_credential_value(text[start:end]) else []


_NOT_TOKEN_SCHEMES = frozenset({"basic", "bearer", "digest", "hmac", "realm"})


def _other_scheme(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    if match.group("scheme") in _NOT_TOKEN_SCHEMES or match.group("scheme").startswith("aws4"):
        return []
    return _bearer(text, match)


def _is_user_password(encoded: str) -> bool:
    """Whether *encoded* is the base64 of printable ``user:password``."""
    try:
        decoded = base64.b64decode(encoded, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


def _basic(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    start, end = match.span("token")
    return [(start, end)] if _is_user_password(text[start:end]) else []


# --- command lines ----------------------------------------------------------

def _curl_user(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``-u user:password`` counts after ``curl`` or ``http`` (HTTPie)."""
    window = text[max(0, match.start() - 300):match.start()].lower()
    if "curl" not in window and "http " not in window and "https " not in window:
        return []
    user = match.group("user")
    start, end = match.span("password")
    password = text[start:end]
    if (user.isdigit() and password.isdigit()) or user == password:
        return []  # uid:gid, guest:guest
    return [(start, end)] if _is_strong_value(password) else []


def _is_strong_value(value: str) -> bool:
    """A value whose position is evidence enough: 3 characters, not a placeholder."""
    return len(value) >= 3 and not _is_placeholder(value) and not value.startswith("-")


# Programs whose short flag takes a password: the flag, words that name the
# program (found in the 200 characters before the flag), and whether the value
# may follow after a space -- "mysql -p db" prompts, then opens database "db".
_PASSWORD_FLAGS = (
    ("p", (" login ", "sshpass", "mongo"), True),
    ("p", ("mysql", "mariadb"), False),
    ("a", ("redis-cli",), True),
    ("w", ("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete"), True),
)


def _short_flag(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    flag, spaced = match.group("flag"), match.group("space") is not None
    window = text[max(0, match.start() - 200):match.start()].lower() + " "
    if not any(flag == f and (space_ok or not spaced) and any(p in window for p in programs)
               for f, programs, space_ok in _PASSWORD_FLAGS):
        return []
    start, end = match.span("value")
    return [(start, end)] if _is_strong_value(text[start:end]) else []


def _openssl_pass(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    start, end = match.span("value")
    return [(start, end)] if _is_strong_value(text[start:end]) else []


def _long_option(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    kind = _name_kind(match.group("name"))
    if kind is None or kind == "pwd":
        return []
    start, end = match.span("value")
    value = text[start:end]
    if text[end:end + 1] in ("(", "["):
        return []
    return [(start, end)] if _accepts(kind, value, quoted=False) else []


def _netrc(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """In a .netrc (a ``machine`` or ``default`` line) the position is evidence
    enough; after ``login … password`` alone the value must read as a credential."""
    start, end = match.span("value")
    value = text[start:end]
    window = text[max(0, match.start() - 200):match.end()].lower()
    if "machine" in window or "default" in window:
        return [(start, end)] if _is_strong_value(value) else []
    return [(start, end)] if _is_credential_value(value) else []


def _prose_password(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``… with password hunter781``: a value of letters and digits after the word."""
    start, end = match.span("value")
    if text[match.start():match.start() + 4].isupper():
        return []  # PASSWORD in capitals is a keyword (SQL), not prose
    while end > start and text[end - 1] in ".:":
        end -= 1
    value = text[start:end]
    if (len(value) < 8 or not any(c.isdigit() for c in value)
            or not any(c.isalpha() for c in value) or _truncated(text, end)):
        return []
    return [(start, end)] if _is_credential_value(value) else []


def _config_pair(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``<add key="ApiKey" value="…"/>``: .NET and Java configuration files."""
    kind = _name_kind(match.group("name"))
    start, end = match.span("value")
    if kind is None or kind == "pwd" or not _accepts(kind, text[start:end], quoted=True):
        return []
    return [(start, end)]


# --- assignments ----------------------------------------------------------

# Name endings, compacted (lower case, letters and digits only).  A "key"
# name must have a random-looking value, unless it is one of the strong ones.
_STRONG_KEYS = ("apikey", "secretkey", "privatekey", "accesskey", "accountkey", "masterkey",
                "signingkey", "encryptionkey", "authkey", "hmackey", "subscriptionkey")
_NOT_SECRET_ENDINGS = (
    # Tokens that page through results, guard forms or mark text.
    "pagetoken", "nexttoken", "continuationtoken", "synctoken", "csrftoken", "xsrftoken",
    "resumetoken", "cancellationtoken", "antiforgerytoken", "eostoken", "bostoken", "padtoken",
    "unktoken", "septoken", "clstoken", "masktoken",
    # Keys that name, order or find things, and keys that are public.
    "publickey", "publishablekey", "idempotencykey", "primarykey", "foreignkey", "sortkey",
    "partitionkey", "cachekey", "hashkey", "rangekey", "rowkey", "lookupkey", "mapkey",
    "objectkey", "routingkey", "i18nkey", "translationkey", "storagekey", "querykey",
    "registrykey", "uniquekey", "compositekey", "joinkey", "shardkey", "groupkey", "indexkey",
    "columnkey", "tablekey", "entitykey", "dedupkey", "dedupekey", "messagekey", "eventkey",
    "tracekey", "correlationkey", "requestkey", "hostkey", "sshkey", "gpgkey", "pgpkey",
    "mergekey", "statekey", "localekey", "labelkey", "fieldkey", "propkey", "sessionstoragekey",
    "localstoragekey", "hotkey", "monkey", "turkey", "whiskey", "hockey", "jockey", "donkey",
    # Words that end in "pass".
    "bypass", "compass", "overpass", "underpass", "surpass", "firstpass", "secondpass",
)


def _compact(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _name_kind(name: str) -> str | None:
    """The kind of secret a name announces: "password", "strong" (a token or
    key), "named" (a name ending in secret or credentials: Kubernetes and CI
    configuration name stored secrets so), "random" (its value must look
    random), "pwd", or None."""
    compact = _compact(name)
    if compact.endswith(_NOT_SECRET_ENDINGS):
        return None
    if compact.endswith(("password", "passwd", "passphrase", "pass", "passwort", "kennwort",
                         "contraseña", "contrasena", "senha", "wachtwoord", "пароль", "motdepasse")):
        return "password"
    if compact.endswith(("session", "sessionid")):
        return "random"  # a session cookie
    if compact.endswith(("token", "authorization")):
        return "strong"
    if compact.endswith(("secret", "credentials")):
        return "named"
    if compact.endswith("credential"):
        return "random"  # AWS signatures carry Credential=AKID…/date/region/…
    if compact.endswith("key"):
        if compact.endswith(_STRONG_KEYS) or compact.endswith("secretaccesskey"):
            return "strong"
        return "random" if compact != "key" else None
    if compact.endswith("pwd"):
        return "pwd"
    return None


def _accepts(kind: str, value: str, quoted: bool) -> bool:
    if kind == "random":
        return _looks_random(value)
    if not quoted and _is_code(value):
        return False  # code reading the secret: process.env.API_KEY_V2
    if _is_lower_name(value) and (kind != "password" or _words(value) >= 2):
        return False  # a name: postgres-secret-1, x-aws-ec2-metadata-token
    return _is_credential_value(value)


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
# After the name: its closing quote (escaped in JSON inside a string) or
# bracket, then the separator.
_SEPARATOR = r"""(?: (?:\\?["'])? \]? [ \t]* (?: := | => | [:=>] ) | [ \t]+ (?:is|was) [ \t:] )"""
_VALUE = re.compile(r"""
    (?:\\?["'])? \]? [ \t]* (?P<sep> := | => | [:=>] | (?<=[ \t])(?i:is|was)(?=[ \t:]):? ) [ \t]*
    (?: \\"(?P<eq>[^"\s\\]{1,1024})\\"
      | [rbuRBU]{0,2} "(?P<dq>[^"\s]{1,1024})"
      | [rbuRBU]{0,2} '(?P<sq>[^'\s]{1,1024})'
      | `(?P<bq>[^`\s]{1,1024})`
      | (?P<bare>[^\s"'`,;&=()\[\]{}<>\\]{1,1024} (?:={1,2}(?![^\s"'`,;&)\]}]))? ) )""", re.VERBOSE)
# "name: Type = value" (Python, TypeScript, Kotlin, Go): the value after the type.
_TYPE = re.compile(r"[A-Za-z_&*][\w.|&*]*\Z")
_ANNOTATED = re.compile(r"[ \t]*(?==(?![=>]))")


def _reads_as_prose_value(value: re.Match[str]) -> bool:
    """After "the password is": a bare word that mixes three kinds of character
    (Hunter781, hunter781!) or looks random -- not base64url, sha256 or code."""
    word = value.group("bare")
    if word is None or any(c in "([{" for c in word):
        return False
    word = word.rstrip(".:")
    kinds = (any(c.isupper() for c in word) + any(c.islower() for c in word)
             + any(c.isdigit() for c in word) + any(not c.isalnum() for c in word))
    return kinds >= 3 or _looks_random(word)


def _assignment(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    # The pattern found a name ending followed by a separator; the name runs
    # back from there over name characters (at most 64), the value is read
    # forward from the original text.
    start = match.start()
    while start > 0 and match.end() - start < 64 and text[start - 1] in _NAME_CHARS:
        start -= 1
    name = text[start:match.end()]
    if name.lower() in ("key", "token", "secret") and text[start - 1:start] == " ":
        # Prose names a key with two words: "private key: …", "access token: …".
        word_start = start - 1
        while word_start > 0 and start - word_start < 24 and text[word_start - 1].isalpha():
            word_start -= 1
        two_words = text[word_start:start - 1] + name
        if _name_kind(two_words) in ("strong", "password"):
            name = two_words
    kind = _name_kind(name)
    if kind is None:
        return []
    value = _VALUE.match(text, match.end())
    if value is None:
        return []
    before = text[start - 1:start]
    separator = value.group("sep")
    if separator.lower() in ("is", "was") and not _reads_as_prose_value(value):
        return []
    if (separator == ":" and text[value.start("sep") - 1] in " \t"
            and text[max(0, start - 64):start].rstrip().endswith("?")):
        return []  # "a ? b : c": not a key and its value
    if separator == ":" and before == ":":
        return []  # a segment of an ARN or URN: arn:aws:secretsmanager:…:secret:name
    group = next(g for g in ("eq", "dq", "sq", "bq", "bare") if value.group(g) is not None)
    if group == "bare" and separator == ":" and _TYPE.match(value.group(group)):
        annotated = _ANNOTATED.match(text, value.end())
        if annotated:
            value = _VALUE.match(text, annotated.end())
            if value is None:
                return []
            group = next(g for g in ("eq", "dq", "sq", "bq", "bare") if value.group(g) is not None)
    value_start, value_end = value.span(group)
    if group == "bare":
        if text[value_end:value_end + 1] in ("(", "[", "{") or (
                text[value_end:value_end + 1] == "<" and separator != ">"):
            return []  # a call, a subscript, a template: code or a placeholder
        if _compact(name).endswith("authorization") and re.match(r"[ \t]+[^\s]", text[value_end:value_end + 2]):
            return []  # a scheme and its value: the header rules read those
        while value_end > value_start and text[value_end - 1] in ".:":
            value_end -= 1  # the end of a sentence, not of the value
        if _truncated(text, value_end):
            return []
    if separator == ">" and (before != "<" or not text.startswith("</", value_end)):
        return []  # only an element, <password>…</password>, ends its name with >
    if kind == "pwd":
        # Pwd= is a connection-string key only among ;-separated pairs (PWD= is the shell's).
        if text[value_end:value_end + 1] != ";" and before != ";":
            return []
        kind = "password"
    if _accepts(kind, text[value_start:value_end], quoted=group != "bare"):
        return [(value_start, value_end)]
    return []


# --- the rules ----------------------------------------------------------------

def _rule(family: str, pattern: str, check: _Check = _token, folded: bool = False,
          needle: str | None = None) -> _Rule:
    needle = _leading_literal(pattern) if needle is None else needle
    return _Rule(family, re.compile(pattern, re.VERBOSE), check, folded, needle)


def _leading_literal(pattern: str) -> str:
    """The literal text a (verbose) pattern starts with, for a quick look."""
    literal = []
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\" and pattern[at + 1:at + 2] in (".", "-", "/"):
            literal.append(pattern[at + 1])
            at += 2
            continue
        if char in "[](){}?*+|^$\\ \t\n#.":
            break
        literal.append(char)
        at += 1
    if literal and pattern[at:at + 1] in ("?", "*", "{"):
        literal.pop()  # the last character is optional or repeated
    return "".join(literal)


def _prefixed(family: str, prefix: str, rest: str, check: _Check = _token,
              before: str = "A-Za-z0-9_") -> _Rule:
    """A token that starts with the literal *prefix*, not after [*before*].

    The boundary is checked after the prefix (a look-behind over the prefix),
    so the pattern starts with a literal that the engine searches for fast.
    """
    literal = re.escape(prefix)
    return _rule(family, f"{literal}(?<![{before}]{literal}){rest}", check)


_TAIL = r"(?![A-Za-z0-9_])"      # a fixed-length token does not run on
_TAIL_DASH = r"(?![A-Za-z0-9_-])"

# Most specific first: that order settles overlapping findings.
_RULES = (
    _rule("private-key", r"-----BEGIN[ ](?:[A-Z0-9]+[ ]){0,3}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----",
          _private_key),
    _prefixed("github-token", "gh", rf"[pousr]_(?P<body>[A-Za-z0-9]{{36}}){_TAIL}"),
    _prefixed("github-token", "github_pat_", rf"(?P<body>[A-Za-z0-9]{{22}}_[A-Za-z0-9]{{59}}){_TAIL}"),
    _prefixed("gitlab-token", "gl", r"""(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|ffct|wt)-
                                        (?P<body>[A-Za-z0-9_-]{20,})""", before="A-Za-z0-9_-"),
    _prefixed("gitlab-token", "GR1348941", rf"(?P<body>[A-Za-z0-9_-]{{20,}})"),
    _prefixed("slack-token", "xoxe", r"[.-](?:xox[bp]-)?(?P<body>[0-9]-[A-Za-z0-9-]{40,})",
              before="A-Za-z0-9_-"),
    _prefixed("slack-token", "xox", r"""[baprs]-(?P<body>[0-9]{1,20}-(?:[0-9]{1,20}-){0,2}
                                        [A-Za-z0-9]{10,})""", before="A-Za-z0-9_-"),
    _prefixed("slack-token", "xapp-", r"(?P<body>[0-9]-[A-Z0-9]{8,}-[0-9]{6,}-[A-Za-z0-9]{32,})",
              before="A-Za-z0-9_-"),
    _rule("slack-webhook", r"""hooks\.slack\.com/(?:services|workflows|triggers)/
                               (?P<body>T[A-Za-z0-9]{6,12}/[A-Za-z0-9]{6,12}/[A-Za-z0-9/]{16,})""",
          _webhook),
    _rule("discord-webhook", r"""discord(?:app)?\.com/api/webhooks/
                                 (?P<body>[0-9]{17,20}/[A-Za-z0-9_-]{60,})""", _webhook),
    _prefixed("stripe-key", "sk_", rf"(?:live|test)_(?P<body>[A-Za-z0-9]{{24,}}){_TAIL}"),
    _prefixed("stripe-key", "rk_", rf"(?:live|test)_(?P<body>[A-Za-z0-9]{{24,}}){_TAIL}"),
    _prefixed("stripe-key", "whsec_", rf"(?P<body>[A-Za-z0-9+/=]{{32,}})"),
    _prefixed("anthropic-key", "sk-ant-", r"(?P<body>[A-Za-z0-9_-]{32,})", before="A-Za-z0-9_-"),
    _prefixed("openai-key", "sk-", r"""(?:proj|svcacct|admin|None)-(?P<body>[A-Za-z0-9_-]{32,})""",
              before="A-Za-z0-9_-"),
    _prefixed("openai-key", "sk-", rf"(?P<body>[A-Za-z0-9_-]{{32,}}){_TAIL_DASH}", _random_token,
              before="A-Za-z0-9_-"),
    _prefixed("aws-access-key", "AKIA", rf"(?P<body>[A-Z0-9]{{16}}){_TAIL}"),
    _prefixed("aws-access-key", "ASIA", rf"(?P<body>[A-Z0-9]{{16}}){_TAIL}"),
    _prefixed("google-api-key", "AIza", rf"(?P<body>[A-Za-z0-9_-]{{35}}){_TAIL_DASH}",
              before="A-Za-z0-9_-"),
    _prefixed("google-oauth", "GOCSPX-", r"(?P<body>[A-Za-z0-9_-]{24,})", before="A-Za-z0-9_-"),
    _prefixed("google-oauth", "ya29.", r"(?P<body>[A-Za-z0-9_-]{20,})", before="A-Za-z0-9_.-"),
    _prefixed("google-oauth", "1//0", r"(?P<body>[A-Za-z0-9_-]{30,})", before="A-Za-z0-9_:/-"),
    _prefixed("npm-token", "npm_", rf"(?P<body>[A-Za-z0-9]{{36}}){_TAIL}"),
    _prefixed("pypi-token", "pypi-AgE", r"(?P<body>[A-Za-z0-9_-]{50,})", before="A-Za-z0-9_-"),
    _prefixed("huggingface-token", "hf_", rf"(?P<body>[A-Za-z]{{30,}}){_TAIL}", _mixed_case),
    _prefixed("sendgrid-key", "SG.", rf"(?P<body>[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9_-]{{43}}){_TAIL_DASH}",
              before="A-Za-z0-9_.-"),
    _prefixed("twilio-key", "SK", rf"(?P<body>[0-9a-f]{{32}}){_TAIL}"),
    _prefixed("twilio-key", "AC", r"""[0-9a-f]{32} ["']? [ \t]* [,:] [ \t]* ["']?
                                      (?P<body>[0-9a-f]{32})(?![A-Za-z0-9_])""", _body),
    _rule("discord-token", rf"""(?P<head>[MNO](?<![A-Za-z0-9_.-].)[A-Za-z0-9_-]{{23,26}})
                                \.(?P<body>[A-Za-z0-9_-]{{6}}\.[A-Za-z0-9_-]{{27,40}}){_TAIL_DASH}""",
          _discord),
    _prefixed("azure-key", "AccountKey=", r"(?P<body>[A-Za-z0-9+/]{80,}={0,2})", _body,
              before="A-Za-z0-9_"),
    _prefixed("azure-key", "SharedAccessKey=", r"(?P<body>[A-Za-z0-9+/]{40,}={0,2})",
              _body),
    _prefixed("digitalocean-token", "do", rf"[por]_v1_(?P<body>[a-f0-9]{{64}}){_TAIL}"),
    _prefixed("shopify-token", "shp", rf"(?:at|ss|ca|pa)_(?P<body>[a-fA-F0-9]{{32}}){_TAIL}"),
    _prefixed("databricks-token", "dapi", rf"(?P<body>[a-f0-9]{{32}})(?:-[0-9]{{1,2}})?{_TAIL}"),
    _rule("telegram-bot-token", rf":AA(?P<body>[A-Za-z0-9_-]{{33}}){_TAIL_DASH}", _telegram),
    _prefixed("mailgun-key", "key-", rf"(?P<body>[0-9a-f]{{32}}){_TAIL}", before="A-Za-z0-9_-"),
    _rule("service-account-key", r"""private_key_id\\?"[ \t]*:[ \t]*\\?"(?P<body>[0-9a-f]{40})\\?" """,
          _body),
    _prefixed("heroku-key", "HRKU-", r"(?P<body>[A-Za-z0-9_-]{40,})"),
    _prefixed("atlassian-token", "AT", r"(?:AT|CT)T3(?P<body>[A-Za-z0-9_=-]{50,})"),
    _prefixed("atlassian-token", "ATBB", rf"(?P<body>[A-Za-z0-9]{{32}}){_TAIL}"),
    _prefixed("linear-key", "lin_api_", rf"(?P<body>[A-Za-z0-9]{{40}}){_TAIL}"),
    _prefixed("linear-key", "lin_oauth_", rf"(?P<body>[a-f0-9]{{64}}){_TAIL}"),
    _prefixed("notion-token", "secret_", rf"(?P<body>[A-Za-z0-9]{{43}}){_TAIL}", _random_token),
    _prefixed("notion-token", "ntn_", rf"(?P<body>[A-Za-z0-9]{{40,}}){_TAIL}"),
    _prefixed("doppler-token", "dp.", r"(?:st|pt|ct|sa|scim|audit)\.(?P<body>[A-Za-z0-9_.-]{40,})",
              before="A-Za-z0-9_.-"),
    _prefixed("vault-token", "hv", r"[sbr]\.(?P<body>[A-Za-z0-9_-]{24,})", before="A-Za-z0-9_.-"),
    _prefixed("grafana-token", "glsa_", rf"(?P<body>[A-Za-z0-9]{{32}}_[a-f0-9]{{8}}){_TAIL}"),
    _prefixed("grafana-token", "glc_", r"(?P<body>[A-Za-z0-9+/]{32,}={0,2})"),
    _prefixed("posthog-key", "ph", rf"[cx]_(?P<body>[A-Za-z0-9]{{43}}){_TAIL}"),
    _prefixed("sentry-token", "sntrys_", r"(?P<body>[A-Za-z0-9+/=_-]{60,})"),
    _prefixed("sentry-token", "sntryu_", rf"(?P<body>[a-f0-9]{{64}}){_TAIL}"),
    _prefixed("square-token", "EAAA", r"(?P<body>[A-Za-z0-9_-]{60})(?![A-Za-z0-9_+/=-])",
              before="A-Za-z0-9_+/"),
    _prefixed("square-token", "sq0atp-", rf"(?P<body>[A-Za-z0-9_-]{{22}}){_TAIL_DASH}"),
    _prefixed("square-token", "sq0csp-", rf"(?P<body>[A-Za-z0-9_-]{{43}}){_TAIL_DASH}"),
    _prefixed("planetscale-token", "pscale_", r"(?:pw|tkn|oauth)_(?P<body>[A-Za-z0-9_.-]{32,})"),
    _prefixed("supabase-key", "sb_secret_", r"(?P<body>[A-Za-z0-9_-]{20,})"),
    _prefixed("supabase-key", "sbp_", rf"(?P<body>[a-f0-9]{{40}}){_TAIL}"),
    _prefixed("age-secret-key", "AGE-SECRET-KEY-1", r"(?P<body>[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})",
              before="A-Za-z0-9_-"),
    _prefixed("dockerhub-token", "dckr_pat_", r"(?P<body>[A-Za-z0-9_-]{27,})"),
    _prefixed("groq-key", "gsk_", rf"(?P<body>[A-Za-z0-9]{{52}}){_TAIL}"),
    _rule("jwt", r"""(?P<header>eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,4096})
                     \. eyJ[A-Za-z0-9_-]{5,} \. [A-Za-z0-9_-]{16,}""", _jwt, needle="eyJ"),
    _rule("credential-url", r"""://[^\s"'<>`\\()\[\]{}]+""", _credential_url),
    # Headers.  These run over the lower-cased text (offsets are the same):
    # a literal prefix there is found fast where (?i) would try every position.
    _rule("basic-auth", r"""basic(?<![a-z0-9_]basic)[ \t]+(?P<token>[a-z0-9+/]{8,}={0,2})
                            (?![a-z0-9+/=])""", _basic, folded=True),
    _rule("basic-auth", r"""auth(?<![a-z0-9]auth)["']?[ \t]*[:=][ \t]*["']?
                            (?P<token>[a-z0-9+/]{8,}={0,2})(?![a-z0-9+/=])""", _basic, folded=True),
    _rule("bearer-token", r"""bearer(?<![a-z0-9_-]bearer)[ \t]+
                              (?P<token>[a-z0-9._~+/-]{16,}=*)""", _bearer, folded=True),
    _rule("bearer-token", r"""authorization(?<![a-z0-9_-]authorization)["']?\]?[ \t]*[:=,][ \t]*
                              ["'`]?(?P<scheme>[a-z][a-z0-9_-]{1,30})[ \t]+
                              (?P<token>[a-z0-9._~+/=-]{16,})""", _other_scheme, folded=True),
    # Command lines.
    _rule("cli-credential", r"""-(?<![^\s]-)(?:[A-Za-z]{0,6}[uU]|-user|-proxy-user)(?:[ \t]+|=)
                                ["']?(?P<user>[^\s:"'$]*):(?P<password>[^\s"']+)""", _curl_user),
    _rule("cli-credential", r"""-(?<![^\s]-)(?P<flag>[paw])(?P<space>[ \t]+)?
                                (?P<q>["']?)(?P<value>[^\s"'-][^\s"']*)""", _short_flag),
    _rule("cli-credential", r"""-pass(?<![^\s]-pass)(?:in|out)?[ \t]+
                                ["']?pass:(?P<value>[^\s"']+)""", _openssl_pass),
    _rule("cli-credential", r"""--(?<![^\s]--)(?P<name>[a-z][a-z0-9-]{0,40})[ \t]+
                                ["']?(?P<value>[^\s"'`,;&()\[\]{}<>]{1,1024})""", _long_option,
          folded=True),
    _rule("netrc-password", r"""login(?<![a-z0-9_-]login)[ \t\r\n]+[^\s]+[ \t\r\n]+
                                password[ \t\r\n]+(?P<value>[^\s]+)""", _netrc, folded=True),
    _rule("netrc-password", r"""machine(?<![a-z0-9_-]machine)[ \t\r\n]+[^\s]+[ \t\r\n]+
                                password[ \t\r\n]+(?P<value>[^\s]+)""", _netrc, folded=True),
    _rule("credential-assignment", r"""key(?<![a-z0-9_-]key)[ \t]*=[ \t]*"(?P<name>[^"\n]{1,64})"[ \t]+
                                       value[ \t]*=[ \t]*"(?P<value>[^"\s]{1,1024})["]""", _config_pair,
          folded=True),
    # Assignments: a name ending found in the lower-cased text, followed by a
    # separator; the check reads the name back and the value forward.
    _rule("credential-assignment", r"""
        (?: pass(?:word|wd|phrase)? | pwd | secret | token | credentials? | key | authorization
          | session(?:id)? | passwort | kennwort | contrase[ñn]a | senha | wachtwoord | пароль
          | mot[ ]de[ ]passe )
        (?= """ + _SEPARATOR + ")", _assignment, folded=True),
    _rule("credential-assignment", r"""pass(?<![a-z0-9_]pass)(?:word|phrase)[ \t]+
                                       (?P<value>[^\s"'`,;()\[\]{}<>]{8,1024})""", _prose_password,
          folded=True),
)


_SHORT = 65536

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(rule.family for rule in _RULES))
"""Every family name :func:`scan` can report, most specific first."""


def _fold(text: str) -> str:
    """A lower-cased copy of *text* with the same offsets."""
    folded = text.lower()
    if len(folded) == len(text):
        return folded
    # A few characters lower-case to two (U+0130); keep those as they are.
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def scan(text: str) -> list[Finding]:
    """Return the suspected credentials in *text*, ordered by position.

    Findings never overlap; where two families match the same text, the more
    specific one is reported.  Raises ``TypeError`` if *text* is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"scan() needs a str, not {type(text).__qualname__}")
    folded = _fold(text)
    taken: list[Finding] = []
    short = len(text) <= _SHORT
    for rule in _RULES:
        source = folded if rule.folded else text
        if short and rule.needle not in source:
            continue  # the common case for a short text, and far cheaper than a search
        spans = [span for match in rule.pattern.finditer(source)
                 for span in rule.check(text, match)]
        if spans:
            taken = _merge(taken, rule.family, sorted(spans))
    return taken


def _merge(taken: list[Finding], family: str, spans: list[tuple[int, int]]) -> list[Finding]:
    """Add the spans that overlap nothing taken so far (nor each other) to the
    sorted, disjoint *taken*, in one pass over both."""
    merged: list[Finding] = []
    at = 0
    for start, end in spans:
        while at < len(taken) and taken[at].start < start:
            merged.append(taken[at])
            at += 1
        if merged and merged[-1].end > start:
            continue
        if at < len(taken) and taken[at].start < end:
            continue
        merged.append(Finding(family, start, end))
    merged.extend(taken[at:])
    return merged


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


def redact(text: str) -> str:
    """Return *text* with each finding of :func:`scan` replaced by
    ``[redacted: <family>]``; text without findings is returned unchanged.

    For text that came from elsewhere (a server's error detail, a config key
    name) and is about to be shown or stored.  Raises ``TypeError`` if *text*
    is not a str.
    """
    findings = scan(text)
    if not findings:
        return text
    parts = []
    last = 0
    for finding in findings:
        parts += [text[last:finding.start], f"[redacted: {finding.family}]"]
        last = finding.end
    parts.append(text[last:])
    return "".join(parts)
