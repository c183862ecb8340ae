"""Checks for credentials known by their own shape: prefixed tokens, JWTs, webhook URLs, private keys,
tokens found at a mark inside them, bootstrap tokens and Azure keys in their setting.

A rule of :mod:`qmem.secretscan.families` finds a candidate; its check here decides
whether the match holds up and returns the span to report (the whole token,
or the part named in the family's entry), or none.  Each check is pure, gets
the original text and the match, and reads no further than the credential
around the match (a few characters before it, a private key's block after
its header), so checking adds time linear in the length of the text.

A match holds up when its variable part (the ``body`` group: what follows the
prefix) is not a placeholder (:func:`qmem.secretscan.values.is_placeholder`) and the
match is not followed by an ellipsis; some shapes ask for more (a JWT header
that decodes, a Discord id in base64, a body that looks random).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re

from .values import is_placeholder, is_truncated, looks_random

__all__ = []


# --- tokens ---------------------------------------------------------------------

def prefixed_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A prefixed token: its ``body`` group must not be a placeholder."""
    if is_truncated(text, match.end()) or is_placeholder(match.group("body")):
        return []
    return [match.span()]


def random_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token with a weak prefix: its body must also look random."""
    if not looks_random(match.group("body")):
        return []
    return prefixed_token(text, match)


def alphanumeric_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token with a short prefix: its body must mix two of upper-case
    letters, lower-case letters and digits, as generated ones do."""
    body = match.group("body")
    if (any(c.isupper() for c in body) + any(c.islower() for c in body) + any(c.isdigit() for c in body)) < 2:
        return []
    return prefixed_token(text, match)


def mixed_case_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token whose body is letters only: they must be of both cases."""
    body = match.group("body")
    if body == body.lower() or body == body.upper():
        return []
    return prefixed_token(text, match)


def headed_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token found at a mark inside it (``.atlasv1.``, ``-us7``, ``Q~``):
    its ``head``, read by a look-behind, and its ``body`` (when longer than a
    few characters) must not be placeholders; the span runs from the head."""
    body = match.group("body")
    if (is_truncated(text, match.end()) or is_placeholder(match.group("head"))
            or (len(body) >= 8 and is_placeholder(body))):
        return []
    return [(match.start("head"), match.end())]


# Words near a kubeadm token: its flag, its field, the command.
_BOOTSTRAP_CONTEXT = ("token", "kubeadm", "bootstrap", "join")


def bootstrap_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A Kubernetes bootstrap token, ``<6>.<16>`` lower-case letters and
    digits: only where one of its context words stands in the 64 characters
    before it, and only if it mixes letters and digits."""
    start = match.start("head")
    token = text[start:match.end()]
    window = text[max(0, start - 64):start].lower()
    if (not any(word in window for word in _BOOTSTRAP_CONTEXT) or not any(c.isdigit() for c in token)
            or not any(c.isalpha() for c in token) or is_placeholder(match.group("body"))
            or is_placeholder(match.group("head")) or is_truncated(text, match.end())):
        return []
    return [(start, match.end())]


# An Azure storage account key is 64 random bytes in base64; so is a SHA-512
# digest, whose lockfile integrity line (sha512-…) must not count.
_AZURE_CONTEXT = ("azure", "storage", "account", "blob", "key1", "key2", "primary key", "secondary key",
                  "connection string")
_DIGEST_PREFIXES = ("sha512-", "sha384-", "sha256-", "sha512:", "sha512=")


def azure_storage_key(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """88 characters of base64 ending in ``==`` where the 120 characters
    before it speak of Azure storage (an account, blobs, ``key1``), and not a
    digest."""
    start = match.start("head")
    window = text[max(0, start - 120):start].lower()
    if (not any(word in window for word in _AZURE_CONTEXT) or window.endswith(_DIGEST_PREFIXES)
            or "integrity" in window or is_placeholder(match.group("head"))):
        return []
    return [(start, match.end())]


def jwt(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A JWT: its ``header`` decodes to a JSON object that names an ``alg``."""
    header = match.group("header")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, RecursionError):  # bad base64, UTF-8 or JSON; absurd nesting
        return []
    if isinstance(decoded, dict) and isinstance(decoded.get("alg"), str):
        return [match.span()]
    return []


_TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


def discord_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A Discord bot token starts with the base64 of the bot's numeric id: the
    head before the match's first dot (the rule's look-behind read it)."""
    window = text[max(0, match.start() - 27):match.start()]
    start = match.start() - (len(window) - len(window.rstrip(_TOKEN_CHARS)))
    head = text[start:match.start()]
    try:
        user_id = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
    except (ValueError, binascii.Error):
        return []
    if not (user_id.isdigit() and 17 <= len(user_id) <= 20):
        return []
    if is_truncated(text, match.end()) or is_placeholder(match.group("body")):
        return []
    return [(start, match.end())]


_URL_PIECES = re.compile(r"[/@?&=]")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
_SENTENCE_END = ".,;:!?)]}"


def _url_start(text: str, start: int) -> int:
    """Where the URL whose host part ends at *start* begins: back over the rest
    of the host (``acme.webhook.office.com``) and its scheme, each bounded."""
    at = start
    while at > 0 and start - at < 64 and text[at - 1] in _HOST_CHARS:
        at -= 1
    if text.startswith("://", at - 3):
        scheme = at - 3
        while scheme > 0 and at - 3 - scheme < 8 and text[scheme - 1].isalpha():
            scheme -= 1
        at = scheme
    return at


def webhook_url(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A webhook URL: none of the pieces of its ``body`` is a placeholder; the
    span takes in the host and scheme before the match."""
    if is_truncated(text, match.end()) or any(
            is_placeholder(piece) for piece in _URL_PIECES.split(match.group("body")) if piece):
        return []
    return [(_url_start(text, match.start()), match.end())]


_SIGNATURES = ("sig", "token")


def signed_webhook_url(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A webhook URL whose secret is a query parameter (Power Automate's
    ``sig``, Google Chat's ``token``): it must carry one of 16 or more
    characters that is not a placeholder."""
    query = match.group("query").rstrip(_SENTENCE_END)
    for parameter in query.split("&"):
        name, equals, value = parameter.partition("=")
        if equals and name.lower() in _SIGNATURES and len(value) >= 16 and not is_placeholder(value):
            return [(_url_start(text, match.start()), match.start("query") + len(query))]
    return []


def telegram_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``:AA…`` found; the bot id is the 8 to 10 digits before the colon."""
    start = match.start()
    while start > 0 and start > match.start() - 11 and text[start - 1].isdigit():
        start -= 1
    digits = match.start() - start
    if not 8 <= digits <= 10 or (start > 0 and _is_word_char(text[start - 1])):
        return []
    if is_truncated(text, match.end()) or is_placeholder(match.group("body")):
        return []
    return [(start, match.end())]


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def token_body(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token in its setting (``AccountKey=…``): only the ``body`` is reported."""
    if is_truncated(text, match.end()) or is_placeholder(match.group("body")):
        return []
    return [match.span("body")]


# --- private keys -----------------------------------------------------------

# Key material after a PEM header: base64 (or hex), armour headers (Proc-Type: 4,…,
# Comment: "…"), line breaks real or escaped, up to the -----END line (or an SSH2
# block's ---- END line).
# Everything after the first run is optional, so a match never fails and the
# runs inside the repetition are never taken apart again (no backtracking).
_PEM_BODY = re.compile(r"""(?:[A-Za-z0-9+/=\s:,.()"@_]+|\\[rn]|\\(?=\s)|-(?!---))*
                           (?:-{4,5}[ ]?END[ A-Za-z0-9._-]{0,40}-{4,5})?""", re.VERBOSE)
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/]{16,}")


def private_key(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A private key header followed by key material: the span runs from the
    header to the end of the block (its ``-----END …-----`` line, if any)."""
    body = _PEM_BODY.match(text, match.end())
    end = body.end()
    material = None
    for found in _KEY_MATERIAL.finditer(text, match.end(), end):
        if not found.group().isalpha() and not is_placeholder(found.group()):
            material = found
            break
        if found.group().isalpha() and not found.group().islower():
            material = found
            break
    if material is None:
        return []  # a header alone, in prose, or with a placeholder body
    while end > match.end() and (text[end - 1].isspace() or text.startswith("\\n", end - 2)):
        end -= 2 if text.startswith("\\n", end - 2) else 1
    return [(match.start(), end)]


def lead_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token whose one-letter ``head`` a look-behind read (``xprv``, ``tprv``): its
    ``body`` must not be a placeholder; the span runs from the head."""
    if is_truncated(text, match.end()) or is_placeholder(match.group("body")):
        return []
    return [(match.start("head"), match.end())]


def key_lines(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A PuTTY key's ``Private-Lines: n`` and the base64 lines after it: key material
    unless it is a placeholder or letters of one case."""
    body = match.group("body")
    if is_placeholder(body.replace("\n", "").replace("\r", "")) or body.isalpha():
        return []
    return [match.span()]


# A PEM header's label, decoded: one that names a private key.
_PRIVATE_HEADER = re.compile(r"-----BEGIN (?:[A-Za-z0-9._-]+ ){0,4}(?:PRIVATE KEY|Static key V[0-9])")


def wrapped_pem(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """``LS0tLS1CRUdJTi…``: base64 whose first bytes decode to the header of a private key
    (a kubeconfig's ``client-key-data``, a Kubernetes secret's ``tls.key``)."""
    head = text[match.start():match.start() + 96]
    try:
        decoded = base64.b64decode(head[:len(head) // 4 * 4]).decode("ascii", "replace")
    except (ValueError, binascii.Error):
        return []
    return [match.span()] if _PRIVATE_HEADER.match(decoded) else []


_KTY = re.compile(r"""(?<![\w$])["']?kty["']?[ \t]*:""")


def jwk_member(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A JSON Web Key's private member (``d``, ``p``, ``q``, ``dp``, ``dq``, ``qi``, or an
    octet key's ``k``), its name quoted or not: only where ``kty`` is a member in the 2048
    characters around it."""
    window = text[max(0, match.start() - 2048):match.end() + 2048]
    if (_KTY.search(window) is None or is_placeholder(match.group("body")) or match.group("body").isalpha()):
        return []
    return [match.span("body")]


_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def wif_key(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A Bitcoin private key in wallet import format: base58 whose checksum (the first four
    bytes of a double SHA-256) holds and whose version byte is 0x80 (0xef on testnet)."""
    number = 0
    for char in match.group():
        number = number * 58 + _BASE58.index(char)
    data = number.to_bytes((number.bit_length() + 7) // 8, "big")
    if len(data) not in (37, 38) or data[0] not in (0x80, 0xEF):
        return []
    payload, checksum = data[:-4], data[-4:]
    if hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] != checksum:
        return []
    return [match.span()]
