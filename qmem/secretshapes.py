"""Checks for credentials known by their own shape: prefixed tokens, JWTs, webhook URLs, private keys.

A rule of :mod:`qmem.secretrules` finds a candidate; its check here decides
whether the match holds up and returns the span to report (the whole token,
or the part named in the family's entry), or none.  Each check is pure, gets
the original text and the match, and reads no further than the credential
around the match (a few characters before it, a private key's block after
its header), so checking adds time linear in the length of the text.

A match holds up when its variable part (the ``body`` group: what follows the
prefix) is not a placeholder (:func:`qmem.secretvalues.is_placeholder`) and the
match is not followed by an ellipsis; some shapes ask for more (a JWT header
that decodes, a Discord id in base64, a body that looks random).
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from .secretvalues import is_placeholder, is_truncated, looks_random

__all__ = ["prefixed_token", "random_token", "mixed_case_token", "jwt", "discord_token", "webhook_url",
           "telegram_token", "token_body", "private_key"]


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


def mixed_case_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A token whose body is letters only: they must be of both cases."""
    body = match.group("body")
    if body == body.lower() or body == body.upper():
        return []
    return prefixed_token(text, match)


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


def discord_token(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A Discord bot token starts with the base64 of the bot's numeric id."""
    head = match.group("head")
    try:
        user_id = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
    except (ValueError, binascii.Error):
        return []
    if not (user_id.isdigit() and 17 <= len(user_id) <= 20):
        return []
    return prefixed_token(text, match)


def webhook_url(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A webhook URL: the span takes in the scheme that precedes the host."""
    if any(is_placeholder(part) for part in match.group("body").split("/")):
        return []
    start = match.start()
    for scheme in ("https://", "http://"):
        if text.startswith(scheme, start - len(scheme)):
            start -= len(scheme)
            break
    return [(start, match.end())]


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

# Key material after a PEM header: base64, armour headers (Proc-Type: 4,…),
# line breaks real or escaped, up to the -----END line.
# Everything after the first run is optional, so a match never fails and the
# runs inside the repetition are never taken apart again (no backtracking).
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=\s:,.()]+|\\[rn]|-(?!----))*(?:-----END[ A-Z0-9]{0,40}-----)?")
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/]{16,}")


def private_key(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """A private key header followed by key material: the span runs from the
    header to the end of the block (its ``-----END …-----`` line, if any)."""
    body = _PEM_BODY.match(text, match.end())
    end = body.end()
    material = _KEY_MATERIAL.search(text, match.end(), end)
    if material is None or material.group().islower():
        return []  # a header alone, in prose, or with a placeholder body
    while end > match.end() and (text[end - 1].isspace() or text.startswith("\\n", end - 2)):
        end -= 2 if text.startswith("\\n", end - 2) else 1
    return [(match.start(), end)]
