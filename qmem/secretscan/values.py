"""Whether a value reads as a credential rather than as a word, a reference or a placeholder.

The credential families (:mod:`qmem.secretscan.families`) find candidates; the checks
(:mod:`qmem.secretscan.shapes`, :mod:`qmem.secretscan.context`) ask this module about the
value they found.  Every function here is pure and reads at most the value it
is given (a value is at most 1024 characters), in time linear in its length:
no repetition in these patterns can match the same text in two ways.

Placeholders (one rule, for every family).  A value is a placeholder, and not
a finding, when it -- or, for a token, the part after its prefix:

* is made only of ``x``, ``X``, ``*``, ``.`` and ``0`` (with ``-``, ``_`` or ``/``
  between runs), ends in 8 or more of them, or repeats one character
  (``ghp_xxxx…``, ``AKIA0000…``, ``sk_live_51Hab00000000``, ``********``);
* starts with ``$``, ``%``, ``<``, ``{`` or ``[``, or with ``your``; or holds
  a template anywhere: ``<…>``, ``${``, ``{{``, ``%NAME%``, ``%s``
  (``${TOKEN}``, ``sk_live_{{ key }}``, ``%API_KEY%``, ``ghp_<token>``);
* contains ``...``, ``…``, ``***``, ``xxxx``, ``redacted``, ``placeholder``,
  ``example``, ``sample``, ``dummy``, ``changeme`` or ``replace_me`` in any
  case (so AWS's documented ``AKIAIOSFODNN7EXAMPLE`` and
  ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`` alike), or is followed by
  ``...`` or ``…`` (a truncated example: ``sk-ant-api03-...``, ``sk_live_...``);
* equals a word such as ``password``, ``token``, ``changeit`` or ``foo``.

A placeholder is never a credential, so storing one leaks nothing; the rule
is the same for a key id and for its secret, in every family (a seed phrase
whose entropy is one repeated byte is its counterpart in
:mod:`qmem.secretscan.seedphrase`).  It is not a judgement of strength: a weak
password is still a password.  ``password = "hunter2"`` is a finding, because
a password that mixes in a digit or a symbol reads as one however guessable
it is, while ``DB_PASSWORD=changeme`` says it is to be replaced and
``DB_PASSWORD=postgres`` is a word (see "Generic values").

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
  ``settings.API_KEY``, ``Schema$inbound``), a constant's name
  (``DB_PASSWORD_V2``) or a CamelCase name (``SignatureV4SignWithCredentials``)
  -- unless it looks random (below), whatever dots or ``$`` it holds:
  ``GJ6YR8V.HI9FVFTZ.CzwP8VdU`` is a token, not a chain of names;
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
* it is not a date or a time stamp, and not a word or a message in a script beyond Latin-1
  (``"password": "パスワード"``, ``请输入密码（至少8位）``: a translated label);
* it is not a placeholder (above).

Names.  :func:`name_kind` reads a name by its ending, compacted (``AWS_SECRET_ACCESS_KEY`` and
``awsSecretAccessKey`` alike): the word for password in 40-odd languages and scripts
(:data:`PASSWORD_WORDS`), the words for an API key or a token (:data:`KEY_WORDS`), short names
(``pw``, ``psw``, ``tok``), other nouns for a secret (``salt``, ``seed``, ``psk``, ``pin``,
``auth``, ``cookie``, ``pk``), and past words that only say which secret (``_PROD``, ``_V2``,
``_B64``, ``_BASE``).  A value for a name that asks for a random one may also be a base32 seed
(16 or more of ``A-Z2-7`` in one case, two digits), or random characters whose letters happen
to read like words (24 or more, measured by their entropy).

So ``password=hunter22`` is a finding, while ``password: required``,
``password = os.environ["PW"]``, ``token=${TOKEN}``, ``api_key=<redacted>``
and ``password=letmein`` are not.  A password in a URL's userinfo, after
``curl -u user:`` or ``password`` in a ``.netrc`` line is strong evidence on
its own: it needs only 3 characters, not to be a placeholder and not to repeat
the user name (``postgres://postgres:postgres@…`` is a default, not a secret).
"""

from __future__ import annotations

import math
import re

__all__ = []


# --- placeholders -------------------------------------------------------------

_PLACEHOLDER_FILL = frozenset("xX*.0-_/")
_PLACEHOLDER_PREFIXES = ("$", "%", "<", "{", "[", "your")
_PLACEHOLDER_MARKERS = ("...", "\u2026", "***", "xxxx", "redacted", "placeholder", "example", "sample",
                        "dummy", "changeme", "change_me", "change-me", "replace_me", "replaceme",
                        "replace-me", "${", "{{", "%s", "%(")
_PLACEHOLDER_WORDS = frozenset({"pass", "password", "passwd", "pwd", "pw", "secret",
                                "token", "apikey", "api_key", "key", "username", "user",
                                "sample", "example", "dummy", "changeit", "foo", "bar", "baz"})
_MARKER = re.compile("|".join(map(re.escape, _PLACEHOLDER_MARKERS)))
_ELLIPSIS = ("...", "\u2026")
_PERCENT_VARIABLE = re.compile(r"%[A-Za-z_][A-Za-z0-9_]*%")


def is_placeholder(value: str) -> bool:
    """Whether a value (or a token's part after its prefix) is a placeholder."""
    lowered = value.lower()
    return (not value
            or set(value) <= _PLACEHOLDER_FILL
            or len(value) - len(value.rstrip("xX*.0")) >= 8
            or len(set(value)) == 1
            or lowered.startswith(_PLACEHOLDER_PREFIXES)
            or _MARKER.search(lowered) is not None
            or lowered in _PLACEHOLDER_WORDS
            or ("<" in value and ">" in value)
            or _PERCENT_VARIABLE.search(value) is not None)


def is_truncated(text: str, end: int) -> bool:
    """Whether the match ending at *end* is followed by an ellipsis."""
    return text.startswith(_ELLIPSIS, end)


# --- generic values -----------------------------------------------------------

SHORTEST_VALUE = 6
"""No generic value shorter than this reads as a credential."""
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.@/-]*\Z")
_YAML_TAG = re.compile(r"!{1,2}[A-Za-z_][A-Za-z0-9_]*\Z")
_COLOR = re.compile(r"#[0-9A-Fa-f]{3,8}\Z")
_VERSION = re.compile(r"[\^~>=<v]{0,2}[0-9]+(?:\.[0-9x*]+)+(?:[-+][\w.]+)?\Z")
_CALL = re.compile(r"[\w.$]+\(.*\)\Z")
# A date or a time stamp (2026-03-14, 2026-03-14T10:00:00Z, 10:00:00.123+02:00): when, not who.
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?(?:\.[0-9]+)?)?"
                        r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?\Z")
# Values that vendors publish in web pages: not credentials.
_PUBLIC_PREFIXES = ("pk_live_", "pk_test_", "sb_publishable_")
# Code that reads a secret: an identifier chain (process.env.API_KEY_V2,
# options?.apiKey, ++this.count, Schema$inbound) or a constant's name.
_CODE_CHAIN = re.compile(r"""(?:\+\+|--|!|~)?(?P<first>[A-Za-z_$#][\w$#]*)
                              (?:(?:\?\.|!\.|\.|->|::)[A-Za-z_$#][\w$#]*)*!?\Z""", re.VERBOSE)
_DOLLAR_WORD = re.compile(r"(?<![0-9])\$[A-Za-z]{3}")  # Schema$inbound, not Juniper19$hjFl
_CAMEL_CASE = re.compile(r"[a-z]*(?:[A-Z][a-z]*|[0-9])+\Z")  # one digit a step: no two ways
_HUMP = re.compile(r"[A-Z][a-z]{2,}")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\Z")


_DIGIT_OR_SYMBOL = re.compile(r"[^\w.-]|\d")  # anything but a letter, "_", "." or "-"


def is_credential_value(value: str) -> bool:
    """Whether a generic value reads as a credential (see "Generic values")."""
    if len(value) < SHORTEST_VALUE or is_placeholder(value):
        return False
    if (_URL_START.match(value) or _YAML_TAG.match(value) or value.startswith(_PUBLIC_PREFIXES)
            or _COLOR.match(value) or _CALL.match(value) or _VERSION.match(value) or _TIMESTAMP.match(value)
            or _is_prose_script(value)
            or (value.startswith("@") and ("/" in value or "." in value))
            or value.startswith(("/^", "/\\")) or (_PATH.match(value) and not looks_random(value))):
        return False  # a URL, a YAML tag, a public key, a regular expression, a path
    # Words and identifiers ("required", "db_password", "os.environ") are how
    # prose and code mention a secret; real ones almost always mix in digits
    # or symbols, or are long runs of letters in no pattern of case.
    return _DIGIT_OR_SYMBOL.search(value) is not None or _looks_generated(value)


_BEYOND_LATIN1 = re.compile(r"[^\x00-\xff]")


def _is_prose_script(value: str) -> bool:
    """Two or more letters beyond Latin-1 (密码, пароль, 請輸入): a word or a message in a
    script that generated credentials are not written in, such as a translated label."""
    count = 0
    for wide in _BEYOND_LATIN1.finditer(value):
        if wide.group().isalpha():
            count += 1
            if count >= 2:
                return True
    return False


def _is_code(value: str) -> bool:
    """Whether an unquoted value is code that reads a secret, not a secret.

    What looks generated is never code, whatever dots or ``$`` it holds
    (``GJ6YR8V.HI9FVFTZ.CzwP8VdU``, ``gcpwl4.rvn1x8q2k5m7p0zt``): the value is
    judged by its shape, not by its punctuation."""
    humps = _HUMP.findall(value) if _CAMEL_CASE.match(value) else []
    if _CONSTANT.match(value) or (len(humps) >= 3 and 4 * sum(map(len, humps)) >= 3 * len(value)):
        return not looks_random(value)  # DB_PASSWORD_V2, SignatureV4SignWithCredentials
    chain = _CODE_CHAIN.match(value)
    if chain is None:
        return False
    return ((not any(c.isdigit() for c in chain.group("first"))
             or _DOLLAR_WORD.search(value) is not None
             or chain.group("first") != value.lstrip("+-!~").rstrip("!"))
            and not looks_random(value))


def _words(value: str) -> int:
    return sum(1 for part in re.split(r"[._/:-]", value) if len(part) >= 3 and part.isalpha())


def _is_lower_name(value: str) -> bool:
    """A lower-case name like ``postgres-secret-1`` or a resource path like
    ``projects/p/secrets/s/versions/1``: words, numbers, ``v2``."""
    # In a path or a URI (vault:secret/data/app#password) "#" is a separator too.
    separators = r"[._/:#-]" if "/" in value or ":" in value else r"[._/:-]"
    return (value == value.lower()
            and all(part.isalpha() or part.isdigit() or (part.isalnum() and len(part) <= 3)
                    for part in re.split(separators, value)))


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


def looks_random(value: str) -> bool:
    """Whether a value looks generated rather than written: 16 or more
    characters, letters and digits alternating at least three times, and less
    than half of it in words."""
    if len(value) < 16 or is_placeholder(value) or value.startswith(_PUBLIC_PREFIXES):
        return False
    alternations = len(_LETTER_DIGIT.findall(value))
    if alternations < 3:
        return False
    return (2 * sum(len(word) for word in _WORD.findall(value)) < len(value)
            or _high_entropy(value, alternations))


def _high_entropy(value: str, alternations: int) -> bool:
    """Random characters whose runs of letters happen to read like words: 24 or more that mix
    upper case, lower case and digits with 4.2 bits a character or more, or lower case and six or
    more digits alternating six times with 3.9 (a session id).  CamelCase names and dotted paths
    stay below (SignatureV4SignWithCredentials: 3.9 bits, one alternation)."""
    if len(value) < 24:
        return False
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    bits = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    upper, lower = any(c.isupper() for c in value), any(c.islower() for c in value)
    digits = sum(c.isdigit() for c in value)
    if upper and lower and digits:
        return bits >= 4.2
    return lower and not upper and digits >= 6 and alternations >= 6 and bits >= 3.9


_BASE32 = re.compile(r"(?:[A-Z2-7]{16,128}|[a-z2-7]{16,128})={0,6}\Z")


def is_base32_secret(value: str) -> bool:
    """A TOTP or HOTP seed as apps show and libraries take it: 16 or more base32
    characters of one case with two or more of its digits, not a placeholder."""
    return (_BASE32.match(value) is not None and sum(c in "234567" for c in value) >= 2
            and not is_placeholder(value))


def is_strong_value(value: str) -> bool:
    """A value whose position is evidence enough: 3 characters, not a placeholder."""
    return len(value) >= 3 and not is_placeholder(value) and not value.startswith("-")


# --- names ---------------------------------------------------------------------

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


_NOT_ALNUM = re.compile(r"[\W_]+")


def compact_name(name: str) -> str:
    """*name* in lower case, letters and digits only: ``AWS_SECRET_ACCESS_KEY``
    and ``awsSecretAccessKey`` are both ``awssecretaccesskey``."""
    return _NOT_ALNUM.sub("", name.lower())


# The word for password in the most used languages (compacted: lower case, letters only).
PASSWORD_WORDS = (
    "password", "passwd", "passphrase", "passcode", "pass", "pword",
    "motdepasse", "contraseña", "contrasena", "contrasenya", "senha", "paroladordine", "parolă", "parola",
    "passwort", "kennwort", "wachtwoord", "lösenord", "losenord", "passord", "adgangskode", "kodeord",
    "lykilorð", "salasana", "salasõna", "jelszó", "jelszo", "şifre", "sifre", "parole", "slaptažodis",
    "пароль", "hasło", "haslo", "heslo", "geslo", "lozinka", "лозинка", "парола", "κωδικός", "κωδικοσ",
    "密码", "密碼", "口令", "パスワード", "비밀번호", "암호", "كلمةالمرور", "كلمةالسر", "סיסמה", "סיסמא",
    "رمزعبور", "पासवर्ड", "รหัสผ่าน", "mậtkhẩu", "matkhau", "katasandi", "katalaluan", "পাসওয়ার্ড",
    "nenosiri",
)
# The words for an API key or a token in the most used languages (compacted).
KEY_WORDS = ("schlüssel", "schluessel", "sleutel", "anahtarı", "anahtari", "secrète", "secrete", "ключ", "токен",
             "密钥", "秘钥", "令牌", "キー", "토큰", "키", "cléapi", "cleapi", "clavedeapi", "chavedeapi",
             "kluczapi", "ключapi", "токендоступа")
# Compacted as names are (combining marks, as in पासवर्ड and รหัสผ่าน, are not letters).
PASSWORD_WORDS = tuple(dict.fromkeys(re.sub(r"[\W_]+", "", word) for word in PASSWORD_WORDS))
KEY_WORDS = tuple(dict.fromkeys(re.sub(r"[\W_]+", "", word) for word in KEY_WORDS))
# Short names for a password or a token, and other nouns for a secret.
_SHORT_PASSWORDS = ("pw", "pwd", "psw", "pswd", "passw", "psk", "pin", "pincode", "wpapassphrase")
_SHORT_TOKENS = ("tok", "tkn")
_RANDOM_NOUNS = ("salt", "pepper", "seed", "cookie", "wif", "pk", "xprv", "xpriv", "otp", "totp", "hotp")
_NAMED_NOUNS = ("creds", "cred")
# Words after the secret's name that say which one, not what (DB_PASSWORD_PROD, API_TOKEN_V2).
_SUFFIXES = frozenset({"prod", "production", "dev", "development", "test", "testing", "stage", "staging", "live",
                       "old", "new", "current", "next", "prev", "previous", "primary", "secondary", "backup",
                       "default", "main", "rw", "ro", "b64", "base64", "hex", "raw", "value", "str", "string",
                       "plain", "plaintext", "enc", "base", "local", "admin", "root", "user", "v"})
_SUFFIX_AT_END = re.compile("(?:" + "|".join(sorted(_SUFFIXES, key=len, reverse=True)) + r"|v?[0-9]+)\Z")


def name_kind(name: str) -> str | None:
    """The kind of secret a name announces: "password", "strong" (a token or
    key), "named" (a name ending in secret or credentials: Kubernetes and CI
    configuration name stored secrets so), "random" (its value must look
    random), "pwd", or None.  Words that only say which secret it is
    (``_PROD``, ``_V2``, ``_B64``) are read past."""
    compact = compact_name(name)
    for _ in range(3):
        kind = _kind_of(compact)
        if kind is not None:
            return kind
        shorter = _SUFFIX_AT_END.sub("", compact)
        if shorter == compact or not shorter:
            return None
        compact = shorter
    return None


def _kind_of(compact: str) -> str | None:
    if not compact or compact.endswith(_NOT_SECRET_ENDINGS):
        return None
    if compact.endswith(PASSWORD_WORDS):
        return "password"
    if compact.endswith(("session", "sessionid", "sessid")):
        return "random"  # a session cookie
    if compact.endswith(("token", "authorization")) or compact.endswith(KEY_WORDS):
        return "strong"
    if compact.endswith(("secret", "credentials")):
        return "named"
    if compact.endswith("credential"):
        return "random"  # AWS signatures carry Credential=AKID…/date/region/…
    if compact.endswith("key"):
        if compact.endswith(_STRONG_KEYS) or compact.endswith("secretaccesskey"):
            return "strong"
        return "random" if compact != "key" else None
    if compact == "pwd" or compact.endswith("pwd"):
        return "pwd"
    if compact.endswith(_SHORT_PASSWORDS) and not compact.endswith(_NOT_SHORT):
        return "password"
    if compact.endswith(_SHORT_TOKENS) and not compact.endswith(("stok", "ktok")):
        return "strong"
    if compact.endswith(_NAMED_NOUNS):
        return "named"
    if compact.endswith("auth") and not compact.endswith(("oauth", "noauth", "useauth")):
        return "strong"  # masterauth, basic_auth, smtp_auth: what the service asks for
    if compact.endswith(_RANDOM_NOUNS) and not compact.endswith(_NOT_NOUN):
        return "random"
    return None


# Words that end like a short name or a noun and say nothing secret.
_NOT_SHORT = ("spin", "hairpin", "pushpin", "linchpin", "lynchpin", "tailspin", "backspin", "topspin", "chopin")
_NOT_NOUN = ("basalt", "cobalt", "asphalt", "apk", "ppk")


def reads_as_credential(kind: str, value: str, quoted: bool) -> bool:
    """Whether *value*, given to a name of *kind* (a :func:`name_kind` other
    than "pwd"), reads as a credential; an unquoted value may be code."""
    if kind == "random":
        return looks_random(value) or is_base32_secret(value)
    if not quoted and _is_code(value):
        return False  # code reading the secret: process.env.API_KEY_V2
    if _is_lower_name(value) and (kind != "password" or _words(value) >= 2):
        return False  # a name: postgres-secret-1, x-aws-ec2-metadata-token
    return is_credential_value(value)
