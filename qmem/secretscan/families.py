"""The credential families the scanner knows: the patterns that find each and the checks that confirm it.

This module is data.  :data:`RULES` lists, most specific family first, one
:class:`Rule` per way of finding a family: a regular expression for the
candidates and a check (from :mod:`qmem.secretscan.shapes` or
:mod:`qmem.secretscan.context`) that says which of them hold up and which part is
the credential.  :mod:`qmem.secretscan.engine` compiles and runs them.

Families (a stable name each; offsets cover the part named in brackets, else
the whole token):

``private-key``           a PEM or PGP ``-----BEGIN … PRIVATE KEY[ BLOCK]-----``
                          header followed by key material (a run of 16 or more
                          base64 characters, not all lower-case letters, as in
                          a truncated ``MIIEpAIBAAKCAQEA…``) [header to
                          ``-----END …-----``]; so in any container: any private
                          label (ML-DSA, OpenVPN's static key), SSH2 blocks, PuTTY
                          private lines, a PEM in base64, a JWK's private members
                          beside a ``kty``, BIP32 ``xprv``, WIF keys whose checksum holds
``seed-phrase``           a BIP39 seed phrase: 12, 15, 18, 21 or 24 words of the
                          English list with a valid checksum, in prose, quoted,
                          in a JSON array or a numbered list (see
                          :mod:`qmem.secretscan.seedphrase`) [first word to last]
``github-token``          ``ghp_ gho_ ghu_ ghs_ ghr_`` + 36 alphanumerics;
                          ``github_pat_`` + 22 + ``_`` + 59 alphanumerics
``gitlab-token``          ``glpat- gldt- glrt- glptt- glcbt- gloas- glsoat- glft-
                          glimt- glagent- glffct- glwt-`` + 20 or more;
                          ``GR1348941`` + 20 (runner registration)
``slack-token``           ``xoxb- xoxa- xoxp- xoxr- xoxs-`` + numeric parts + 10 or
                          more; ``xoxe.xoxp-``/``xoxe-`` refresh tokens;
                          ``xapp-`` app-level tokens
``webhook-url``           an incoming webhook, whose URL is its credential:
                          Slack ``hooks.slack.com/services|workflows|triggers/T…``,
                          Discord ``discord[app].com/api/webhooks/<id>/<token>``,
                          Microsoft Teams ``….webhook.office.com/webhookb2/…/
                          IncomingWebhook/…`` (and ``outlook.office.com/webhook/``),
                          Power Automate and Logic Apps ``….logic.azure.com/
                          workflows/…/invoke?…sig=…`` and ``….api.powerplatform.com
                          /powerautomate/…/invoke?…sig=…``, Google Chat
                          ``chat.googleapis.com/v1/spaces/…/messages?…token=…``,
                          Zapier ``hooks.zapier.com/hooks/catch/…``, IFTTT
                          ``maker.ifttt.com/trigger/…/with/key/…``, Feishu and
                          Lark ``open.feishu.cn|larksuite.com/open-apis/bot/v2/
                          hook/…``, DingTalk ``oapi.dingtalk.com/robot/send?
                          access_token=…`` [the URL, from its scheme]
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
                          + 40 or more (connection strings) [the key]; 86 base64
                          + ``==`` (a storage account key) where the 120
                          characters before it name Azure, storage, an account,
                          blobs or ``key1``, and not after ``sha512-`` or the
                          word ``integrity``; an Entra ID client secret, 3 + a digit
                          + ``Q~`` + 31 to 34
``digitalocean-token``    ``dop_v1_ doo_v1_ dor_v1_`` + 64 hex
``shopify-token``         ``shpat_ shpss_ shpca_ shppa_`` + 32 hex
``databricks-token``      ``dapi`` + 32 hex
``telegram-bot-token``    8 to 10 digits + ``:AA`` + 33
``mailgun-key``           ``key-`` + 32 hex; 32 hex + ``-`` + 8 hex + ``-`` + 8 hex
``service-account-key``   ``"private_key_id": "<40 hex>"`` of a Google service
                          account file [the id]; its ``"private_key"`` is a
                          ``private-key``
``heroku-key``            ``HRKU-`` + 40 or more
``atlassian-token``       ``ATATT3``/``ATCTT3`` + 50 or more; ``ATBB`` + 32
``linear-key``            ``lin_api_`` + 40, ``lin_oauth_`` + 64 hex
``notion-token``          ``secret_`` + 43 random alphanumerics, ``ntn_`` + 40 or more
``doppler-token``         ``dp.st. dp.pt. dp.ct. dp.sa. dp.scim. dp.audit.`` + 40 or more
``vault-token``           ``hvs. hvb. hvr.`` + 24 or more
``grafana-token``         ``glsa_`` + 32 + ``_`` + 8 hex; ``glc_`` + 32 or more;
                          ``eyJrIjoi`` + 70 or more (an API key)
``posthog-key``           ``phc_ phx_`` + 43
``sentry-token``          ``sntrys_`` + 60 or more, ``sntryu_`` + 64 hex
``square-token``          ``EAAA`` + 60, ``sq0atp-`` + 22, ``sq0csp-`` + 43
``planetscale-token``     ``pscale_pw_ pscale_tkn_ pscale_oauth_`` + 32 or more
``supabase-key``          ``sb_secret_`` + 20 or more, ``sbp_`` + 40 hex (service
                          role keys are JWTs: ``jwt``)
``age-secret-key``        ``AGE-SECRET-KEY-1`` + 58 bech32 characters
``dockerhub-token``       ``dckr_pat_`` + 27 or more
``groq-key``              ``gsk_`` + 52
``terraform-token``       14 + ``.atlasv1.`` + 60 to 70 (Terraform Cloud and
                          Enterprise)
``braintree-token``       ``access_token$production|sandbox$`` + 16 + ``$`` + 32 hex
``mailchimp-key``         32 hex + ``-us`` + the data centre's number
``postman-key``           ``PMAK-`` + 24 hex + ``-`` + 34 hex
``facebook-token``        ``EAA`` + 90 or more random alphanumerics
``flyio-token``           ``fo1_`` + 43; ``fm1a_ fm1r_ fm2_`` + 100 or more base64
``newrelic-key``          ``NRAK-`` + 27, ``NRII-`` + 32
``dynatrace-token``       ``dt0c01.`` + 24 + ``.`` + 64
``pulumi-token``          ``pul-`` + 40 hex
``figma-token``           ``figd_`` + 40 or more
``alibaba-key``           ``LTAI`` + 12 to 20
``tencent-key``           ``AKID`` + 32 (a SecretId)
``yandex-key``            ``AQVN`` + 35 to 38
``jfrog-token``           ``AKCp`` + 69 (Artifactory API key), ``cmVmd`` + 59
                          (reference token)
``typeform-token``        ``tfp_`` + 59
``frameio-token``         ``fio-u-`` + 64
``prefect-key``           ``pnu_`` + 36
``readme-key``            ``rdme_`` + 70
``rubygems-key``          ``rubygems_`` + 48 hex
``clojars-token``         ``CLOJARS_`` + 60
``infracost-key``         ``ico-`` + 32
``scalingo-token``        ``tk-us-`` + 48
``brevo-key``             ``xkeysib- xsmtpsib-`` + 64 hex + ``-`` + 16 (Sendinblue)
``mapbox-token``          ``sk.eyJ`` + 50 or more + ``.`` + 20 or more (secret
                          tokens; ``pk.`` tokens are public)
``duffel-token``          ``duffel_live_ duffel_test_`` + 43
``easypost-key``          ``EZAK EZTK`` + 54
``shippo-token``          ``shippo_live_ shippo_test_`` + 40 hex
``flutterwave-key``       ``FLWSECK-`` or ``FLWSECK_TEST-`` + 32 hex + ``-X``
``razorpay-key``          ``rzp_live_ rzp_test_`` + 14
``plaid-token``           ``access-sandbox|development|production-`` + a UUID
``airtable-token``        ``pat`` + 14 + ``.`` + 64 hex
``contentful-token``      ``CFPAT-`` + 43
``adobe-key``             ``p8e-`` + 32 (a client secret)
``sonar-token``           ``squ_ sqp_ sqa_`` + 40 hex
``intercom-token``        ``dG9rO`` (base64 of ``tok:``) + 40 or more base64
``perplexity-key``        ``pplx-`` + 48
``xai-key``               ``xai-`` + 80
``replicate-token``       ``r8_`` + 37
``langsmith-key``         ``lsv2_pt_ lsv2_sk_`` + 32 hex + ``_`` + 10 hex
``cerebras-key``          ``csk-`` + 32 to 48
``onepassword-token``     ``ops_eyJ`` + 250 or more base64 (a service account)
``openshift-token``       ``sha256~`` + 43
``harness-token``         ``pat. sat.`` + 22 + ``.`` + 24 + ``.`` + 20
``sourcegraph-token``     ``sgp_`` + 40 hex, or + 16 hex or ``local`` + ``_`` + 40 hex
``buildkite-token``       ``bkua_`` + 40 hex
``circleci-token``        ``CCIPAT_`` + 22 + ``_`` + 40 hex
``nuget-key``             ``oy2`` + 43 lower-case alphanumerics
``hubspot-token``         ``pat-na1- pat-eu1-`` … + a UUID
``clickup-token``         ``pk_`` + 6 to 10 digits + ``_`` + 32 upper-case
                          alphanumerics
``bootstrap-token``       a Kubernetes bootstrap token, 6 + ``.`` + 16 lower-case
                          letters and digits, where ``token``, ``kubeadm``,
                          ``bootstrap`` or ``join`` stands in the 64 characters
                          before it
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
                          option named like a secret, the value after a space);
                          ``login <value>`` when the value looks random and has
                          32 or more characters (``wandb login …``) [the value]
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
                          in a ``;``-separated connection string, and a subscript
                          by a string may follow the name (``api_key["auth"] =
                          …``); ``password <value>`` in prose when the value
                          mixes letters and digits; ``… token <value>``, ``… key
                          <value>``, ``… secret <value>`` in prose when the name
                          with the word before it says token, key or secret
                          (``api token``, ``client secret``, not ``sort key``)
                          and the value looks random [the value]; the word for password in 40-odd
                          languages (``_ASSIGNMENT_ENDINGS``, ``_WIDE_ENDINGS``), names
                          that go on (``_PROD``, ``_V2``), a name and its value alone
                          on a line, session cookies on a cookie line, and the forms
                          of :mod:`qmem.secretscan.forms` (calls, separate fields,
                          tables, more programs, SQL, prose)

A token must not follow a letter, digit or underscore, and a fixed-length one
must not run on past its end either, so ``ghp_`` inside a longer identifier is
not a finding.  Where two findings overlap, the one earlier in the list above
wins (``GITHUB_TOKEN=ghp_…`` is a ``github-token``).

Placeholders.  One rule, :func:`qmem.secretscan.values.is_placeholder`, decides for
every family, for key ids and secrets alike, whether a value is an example
rather than a credential: so AWS's documented ``AKIAIOSFODNN7EXAMPLE`` and
``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`` are both placeholders (they say
``EXAMPLE``), and so is ``abandon abandon … about``.  There is no list of
exempt strings: a documented example that does not say what it is (Stripe's test key in its
API reference, kubeadm's ``abcdef.0123…``) is a finding like any other.  A bare 40-character base64 string is not a
finding, because nothing distinguishes an AWS secret key from any other such
string.

Every pattern runs in time linear in the length of the text, and it must
stay so: it starts at a literal or a bounded boundary (a look-behind over the
prefix rather than before it, so the engine searches for the literal fast,
and rules that start with the same character share one search),
no repetition in it can match the same text in two ways, and every look
around is bounded.  ``tests/test_secretscan.py`` makes hostile input from a
text that each rule matches and scans it under a watchdog.

A new family is an entry here (most need only :func:`_prefixed` and the
default check, :func:`~qmem.secretscan.shapes.prefixed_token`), a line in the
list above, a small check where the shape needs one, and cases in
``tests/corpora/secrets``: the tests require every family to be found there,
and every rule to match a case there (or a sample of the test's own).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..valueclass import dataclass
from .context import (
    NAME_SEPARATOR, assignment, basic_credentials, bearer_token, config_pair, credential_url, curl_user, long_option,
    netrc_password, openssl_pass, other_scheme_token, password_flag, prose_password, prose_token, session_cookie,
)
from .forms import FORM_RULES
from .seedphrase import seed_phrase
from .shapes import (
    alphanumeric_token, azure_storage_key, bootstrap_token, discord_token, headed_token, jwk_member, jwt, key_lines, lead_token,
    mixed_case_token, prefixed_token, private_key, random_token, signed_webhook_url, telegram_token, token_body,
    webhook_url, wif_key, wrapped_pem,
)

__all__ = []

Check = Callable[[str, re.Match[str]], list[tuple[int, int]]]
"""A check looks closer at a candidate match and returns the spans to report:
none when the match does not hold up, several when one URL carries several.
It gets the original text; a folded rule's match is over the lower-cased
copy, whose offsets are the same."""


@dataclass(frozen=True)
class Rule:
    """One way to find a family: a verbose regular expression for the
    candidates and the check that confirms them."""

    family: str
    pattern: str                # compiled with re.VERBOSE
    check: Check = prefixed_token
    folded: bool = False        # the pattern runs over the lower-cased text
    needle: str | None = None   # text every match starts with; None: the literal the pattern starts with
    head: str | None = None     # a short pattern every match starts with; None: the pattern up to its
                                # first named group outside any other group (see qmem.secretscan.engine)


def _prefixed(family: str, prefix: str, rest: str, check: Check = prefixed_token,
              before: str = "A-Za-z0-9_") -> Rule:
    """A token that starts with the literal *prefix*, not after [*before*].

    The boundary is checked after the prefix (a look-behind over the prefix),
    so the pattern starts with a literal that the engine searches for fast.
    The rule's head (what the engine's combined search looks for) takes in up
    to twelve characters of the body, so that words that merely start like
    the prefix ("pattern" for "pat…") stop no search.
    """
    literal = re.escape(prefix)
    start = f"{literal}(?<![{before}]{literal})"
    body = _BODY_START.match(rest)
    head = None if body is None else f"{start}{body['before']}{body['chars']}{{{min(int(body['count']), 12)}}}"
    return Rule(family, f"{start}{rest}", check, head=head)


# The start of a token's body in a rule: what comes before it, its first
# character class and how many of those it takes at least.
_BODY_START = re.compile(r"(?P<before>.*?)\(\?P<body>(?P<chars>\[[^\]]+\])\{(?P<count>[0-9]+)", re.DOTALL)


_TAIL = r"(?![A-Za-z0-9_])"      # a fixed-length token does not run on
_TAIL_DASH = r"(?![A-Za-z0-9_-])"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# What a seed phrase is written with: lower-case words, white space, commas,
# quotes, brackets.  A stretch of 55 or more after any other character is
# where the phrase check looks: twelve words of the list with a space between
# them are shorter than that less than once in a million (the shortest words
# have three letters, the average word six).
_PHRASE = r"""a-z \t\r\n,"'\[\]"""
_PHRASE_LENGTH = 55

# The endings of a secret's name that an assignment rule looks for, in the
# lower-cased text: English and its short forms, and the word for password in
# the most used languages written in Latin-1 (qmem.secretscan.values.name_kind
# says which kind of secret each announces).
_ASSIGNMENT_ENDINGS = (
    "pass", "password", "passwd", "passphrase", "passcode", "pwd", "pw", "psw", "pswd", "passw", "pword", "psk",
    "pin", "pincode", "pin_code", "pin-code", "secret", "token", "tok", "tkn", "cred", "creds", "credential",
    "credentials", "key", "authorization", "auth", "session", "sessionid", "sessid", "salt", "pepper", "seed",
    "cookie", "wif", "pk", "otp",
    "passwort", "kennwort", "contraseña", "contrasena", "contrasenya", "senha", "wachtwoord", "mot de passe",
    "parola", "parole", "parola d'ordine", "lösenord", "losenord", "passord", "adgangskode", "kodeord",
    "lykilorð", "lykilord", "salasana", "salasõna", "salasona", "jelszó", "jelszo", "sifre", "heslo", "haslo",
    "geslo", "lozinka", "kata sandi", "kata laluan", "mat khau", "nenosiri", "schlüssel", "schluessel",
    "schlussel", "sleutel", "secrète", "secrete", "anahtari", "clé api", "cle api", "clave de api",
    "chave de api", "klucz api",
)
# The word for password in the scripts beyond Latin-1, in the cases it is written in.
_WIDE_ENDINGS = tuple(dict.fromkeys(case for word in (
    "пароль", "hasło", "parolă", "slaptažodis", "şifre", "κωδικός", "κωδικος", "лозинка", "парола", "密码", "密碼",
    "口令", "パスワード", "비밀번호", "암호", "كلمة المرور", "كلمة السر", "סיסמה", "סיסמא", "رمز عبور", "पासवर्ड",
    "รหัสผ่าน", "mật khẩu", "পাসওয়ার্ড", "токен", "токен доступа", "anahtarı", "密钥", "秘钥", "令牌", "キー",
    "토큰", "키",
) for case in (word, word.capitalize(), word.upper()))) + ("ключ API", "Ключ API", "КЛЮЧ API")

_SUFFIX = r"""(?:prod|production|dev|test|stage|staging|live|old|new|current|next|prev|primary|secondary|backup
               |default|main|rw|ro|b64|base64|hex|raw|value|str|plain|enc|base|local|admin|root|user
               |v[0-9]{1,3}|[0-9]{1,3})"""
def _trie(words: tuple[str, ...] | list[str]) -> str:
    """A (verbose) pattern matching exactly *words*, as a trie: one branch per next letter, so
    that a search tries each letter once where an alternation of the words would try each word."""
    ends = "" in words
    branches: dict[str, list[str]] = {}
    for word in words:
        if word:
            branches.setdefault(word[0], []).append(word[1:])
    parts = [("[ ]" if c == " " else re.escape(c)) + _trie(rest) for c, rest in sorted(branches.items())]
    if not parts:
        return ""
    body = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    return f"(?:{body})?" if ends else body


def _by_first(words: tuple[str, ...]) -> dict[str, list[str]]:
    """*words* by their first character."""
    groups: dict[str, list[str]] = {}
    for word in words:
        groups.setdefault(word[0], []).append(word)
    return groups


# What an assignment rule's head looks for after the ending: a short look at the
# separator (the rule's pattern reads it again, whole, where the head is found).
_SEPARATOR_AHEAD = r"""(?= \\?["']?\]?[ \t]*(?:[:=>\uff1a]|is[ \t]|was[ \t]) | \[ | [ \t]+[^\s] | [是为為は는은] )"""

# Most specific first: that order settles overlapping findings.
RULES: tuple[Rule, ...] = (
    # Key material in its containers: a PEM block of any private label (and OpenVPN's static
    # key), an SSH2 (Tectia) block, a PuTTY key's private lines, a PEM in base64 (a
    # kubeconfig's client-key-data), a JWK's private members, BIP32 and WIF wallet keys.
    Rule("private-key", r"""-----BEGIN[ ](?:[A-Za-z0-9._-]+[ ]){0,4}(?:PRIVATE[ ]KEY(?:[ ]BLOCK)?|Static[ ]key[ ]V[0-9])
                            -----""", private_key),
    Rule("private-key", r"""----[ ]BEGIN[ ](?:[A-Z0-9._-]+[ ]){0,3}PRIVATE[ ]KEY[ ]----""", private_key),
    Rule("private-key", r"""Private-Lines:[ \t]*[0-9]{1,4}[ \t]*\r?\n(?P<body>[A-Za-z0-9+/=]{16,}
                            (?:\r?\n[A-Za-z0-9+/=]{16,})*)""", key_lines),
    Rule("private-key", r"""LS0tLS1CRUdJTi(?<![A-Za-z0-9+/]LS0tLS1CRUdJTi)(?P<body>[A-Za-z0-9+/]{40,}={0,2})""",
         wrapped_pem),
    *(Rule("private-key", rf"""{q}(?:d|p|q|dp|dq|qi|k){q}[ \t]*:[ \t]*["'](?P<body>[A-Za-z0-9_-]{{16,}})["']""",
           jwk_member, needle=q, head=rf"""{q}(?:d|p|q|dp|dq|qi|k){q}[ \t]*:""") for q in ('"', "'")),
    *(Rule("private-key", rf"""{m}(?<![\w$."']{m})[ \t]*:[ \t]*["'](?P<body>[A-Za-z0-9_-]{{16,}})["']""", jwk_member)
      for m in ("d", "k")),
    Rule("private-key", r"""prv(?<=(?<![A-Za-z0-9_])(?P<head>[xtyzuvYZUV])prv)(?P<body>[1-9A-HJ-NP-Za-km-z]{100,112})
                            (?![A-Za-z0-9_])""", lead_token),
    Rule("private-key", r"""[5KL](?<![A-Za-z0-9_+/][5KL])[1-9A-HJ-NP-Za-km-z]{50,51}(?![A-Za-z0-9_+/])""", wif_key),
    Rule("seed-phrase", rf"""[^{_PHRASE}](?P<run>[{_PHRASE}]{{{_PHRASE_LENGTH},}})""", seed_phrase),
    Rule("seed-phrase", rf"""\A(?P<run>[{_PHRASE}]{{{_PHRASE_LENGTH},}})""", seed_phrase),
    Rule("seed-phrase", r"""1(?<![0-9A-Za-z]1)[.):]?[ \t]+[A-Za-z]{3,8}
                           (?:[ \t\r\n,]+[0-9]{1,2}[.):]?[ \t]+[A-Za-z]{3,8}){11,}""", seed_phrase,
         head=r"1(?<![0-9A-Za-z]1)[.):]?[ \t]"),
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
    Rule("webhook-url", r"""hooks\.slack\.com/(?:services|workflows|triggers)/
                            (?P<body>T[A-Za-z0-9]{6,12}/[A-Za-z0-9]{6,12}/[A-Za-z0-9/]{16,})""", webhook_url),
    Rule("webhook-url", r"""discord(?:app)?\.com/api/webhooks/(?P<body>[0-9]{17,20}/[A-Za-z0-9_-]{60,})""",
         webhook_url),
    Rule("webhook-url", rf"""webhook\.office\.com/webhookb2/
                            (?P<body>{_GUID}@{_GUID}/IncomingWebhook/[0-9a-fA-F]{{32}}/{_GUID}
                            (?:/V2[A-Za-z0-9_-]{{20,}})?)""", webhook_url),
    Rule("webhook-url", rf"""outlook\.office(?:365)?\.com/webhook/
                            (?P<body>{_GUID}@{_GUID}/IncomingWebhook/[0-9a-fA-F]{{32}}/{_GUID})""", webhook_url),
    Rule("webhook-url", r"""logic\.azure\.com(?::443)?/workflows/[0-9a-fA-F]{32}/triggers/[A-Za-z0-9_.-]{1,64}
                            /paths/invoke\?(?P<query>[^\s"'<>`]{1,1024})""", signed_webhook_url),
    Rule("webhook-url", r"""api\.powerplatform\.com(?::443)?/powerautomate/automations/direct/workflows/
                            [0-9a-fA-F]{32}/triggers/[A-Za-z0-9_.-]{1,64}/paths/invoke\?
                            (?P<query>[^\s"'<>`]{1,1024})""", signed_webhook_url),
    Rule("webhook-url", r"""chat\.googleapis\.com/v1/spaces/[A-Za-z0-9_-]{6,40}/messages\?
                            (?P<query>[^\s"'<>`]{1,1024})""", signed_webhook_url),
    Rule("webhook-url", r"""hooks\.zapier\.com/hooks/catch/(?P<body>[0-9]{4,12}/[A-Za-z0-9]{5,12})/?""",
         webhook_url),
    Rule("webhook-url", r"""maker\.ifttt\.com/trigger/[A-Za-z0-9_{}-]{1,64}/(?:json/)?with/key/
                            (?P<body>[A-Za-z0-9_-]{20,})""", webhook_url),
    Rule("webhook-url", rf"""open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/(?P<body>{_GUID})""",
         webhook_url),
    Rule("webhook-url", r"""oapi\.dingtalk\.com/robot/send\?access_token=(?P<body>[0-9a-f]{64})""",
         webhook_url),
    _prefixed("stripe-key", "sk_", rf"(?:live|test)_(?P<body>[A-Za-z0-9]{{24,}}){_TAIL}"),
    _prefixed("stripe-key", "rk_", rf"(?:live|test)_(?P<body>[A-Za-z0-9]{{24,}}){_TAIL}"),
    _prefixed("stripe-key", "whsec_", rf"(?P<body>[A-Za-z0-9+/=]{{32,}})"),
    _prefixed("anthropic-key", "sk-ant-", r"(?P<body>[A-Za-z0-9_-]{32,})", before="A-Za-z0-9_-"),
    _prefixed("openai-key", "sk-", r"""(?:proj|svcacct|admin|None)-(?P<body>[A-Za-z0-9_-]{32,})""",
              before="A-Za-z0-9_-"),
    _prefixed("openai-key", "sk-", rf"(?P<body>[A-Za-z0-9_-]{{32,}}){_TAIL_DASH}", random_token,
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
    _prefixed("huggingface-token", "hf_", rf"(?P<body>[A-Za-z]{{30,}}){_TAIL}", mixed_case_token),
    _prefixed("sendgrid-key", "SG.", rf"(?P<body>[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9_-]{{43}}){_TAIL_DASH}",
              before="A-Za-z0-9_.-"),
    _prefixed("twilio-key", "SK", rf"(?P<body>[0-9a-f]{{32}}){_TAIL}"),
    _prefixed("twilio-key", "AC", r"""[0-9a-f]{32} ["']? [ \t]* [,:] [ \t]* ["']?
                                      (?P<body>[0-9a-f]{32})(?![A-Za-z0-9_])""", token_body),
    # Found at its first dot (a literal the engine searches for fast), the
    # 24 to 27 characters of its head read back by look-behinds.
    Rule("discord-token", r"\.(?:" + "|".join(
        rf"(?<=(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{{{width}}}\.)" for width in (23, 24, 25, 26))
         + rf")(?P<body>[A-Za-z0-9_-]{{6}}\.[A-Za-z0-9_-]{{27,40}}){_TAIL_DASH}", discord_token),
    _prefixed("azure-key", "AccountKey=", r"(?P<body>[A-Za-z0-9+/]{80,}={0,2})", token_body,
              before="A-Za-z0-9_"),
    _prefixed("azure-key", "SharedAccessKey=", r"(?P<body>[A-Za-z0-9+/]{40,}={0,2})",
              token_body),
    Rule("azure-key", r"""==(?<=(?<![A-Za-z0-9+/_-])(?P<head>[A-Za-z0-9+/]{86})==)(?![A-Za-z0-9+/=_-])""",
         azure_storage_key),
    Rule("azure-key", r"""Q~(?<=(?<![A-Za-z0-9_~.-])(?P<head>[A-Za-z0-9_~.]{3}[0-9])Q~)
                          (?P<body>[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_~.-])""", headed_token),
    _prefixed("digitalocean-token", "do", rf"[por]_v1_(?P<body>[a-f0-9]{{64}}){_TAIL}"),
    _prefixed("shopify-token", "shp", rf"(?:at|ss|ca|pa)_(?P<body>[a-fA-F0-9]{{32}}){_TAIL}"),
    _prefixed("databricks-token", "dapi", rf"(?P<body>[a-f0-9]{{32}})(?:-[0-9]{{1,2}})?{_TAIL}"),
    Rule("telegram-bot-token", rf":AA(?P<body>[A-Za-z0-9_-]{{33}}){_TAIL_DASH}", telegram_token),
    _prefixed("mailgun-key", "key-", rf"(?P<body>[0-9a-f]{{32}}){_TAIL}", before="A-Za-z0-9_-"),
    Rule("mailgun-key", r"""-(?<=(?<![A-Za-z0-9_-])(?P<head>[0-9a-f]{32})-)(?P<body>[0-9a-f]{8}-[0-9a-f]{8})
                            (?![A-Za-z0-9_-])""", headed_token),
    Rule("service-account-key", r"""private_key_id\\?"[ \t]*:[ \t]*\\?"(?P<body>[0-9a-f]{40})\\?" """,
         token_body),
    _prefixed("heroku-key", "HRKU-", r"(?P<body>[A-Za-z0-9_-]{40,})"),
    _prefixed("atlassian-token", "AT", r"(?:AT|CT)T3(?P<body>[A-Za-z0-9_=-]{50,})"),
    _prefixed("atlassian-token", "ATBB", rf"(?P<body>[A-Za-z0-9]{{32}}){_TAIL}"),
    _prefixed("linear-key", "lin_api_", rf"(?P<body>[A-Za-z0-9]{{40}}){_TAIL}"),
    _prefixed("linear-key", "lin_oauth_", rf"(?P<body>[a-f0-9]{{64}}){_TAIL}"),
    _prefixed("notion-token", "secret_", rf"(?P<body>[A-Za-z0-9]{{43}}){_TAIL}", random_token),
    _prefixed("notion-token", "ntn_", rf"(?P<body>[A-Za-z0-9]{{40,}}){_TAIL}"),
    _prefixed("doppler-token", "dp.", r"(?:st|pt|ct|sa|scim|audit)\.(?P<body>[A-Za-z0-9_.-]{40,})",
              before="A-Za-z0-9_.-"),
    _prefixed("vault-token", "hv", r"[sbr]\.(?P<body>[A-Za-z0-9_-]{24,})", before="A-Za-z0-9_.-"),
    _prefixed("grafana-token", "glsa_", rf"(?P<body>[A-Za-z0-9]{{32}}_[a-f0-9]{{8}}){_TAIL}"),
    _prefixed("grafana-token", "glc_", r"(?P<body>[A-Za-z0-9+/]{32,}={0,2})"),
    _prefixed("grafana-token", "eyJrIjoi", r"(?P<body>[A-Za-z0-9]{70,400}={0,3})(?![A-Za-z0-9+/=_-])",
              before="A-Za-z0-9_.-"),
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
    Rule("terraform-token", rf"""\.atlasv1(?<=(?<![A-Za-z0-9_])(?P<head>[A-Za-z0-9]{{14}})\.atlasv1)
                                 \.(?P<body>[A-Za-z0-9_=-]{{60,70}}){_TAIL_DASH}""", headed_token),
    _prefixed("braintree-token", "access_token$", r"(?:production|sandbox)\$(?P<body>[0-9a-z]{16}\$[0-9a-f]{32})"
              + _TAIL),
    Rule("mailchimp-key", rf"""-us(?<=(?<![A-Za-z0-9_])(?P<head>[0-9a-f]{{32}})-us)(?P<body>[0-9]{{1,2}}){_TAIL}""",
         headed_token),
    _prefixed("postman-key", "PMAK-", rf"(?P<body>[0-9a-fA-F]{{24}}-[0-9a-fA-F]{{34}}){_TAIL}"),
    _prefixed("facebook-token", "EAA", rf"(?P<body>[A-Za-z0-9]{{90,}}){_TAIL}", random_token),
    _prefixed("flyio-token", "fo1_", rf"(?P<body>[A-Za-z0-9_-]{{43}}){_TAIL_DASH}"),
    _prefixed("flyio-token", "fm", r"(?:1[ar]|2)_(?P<body>[A-Za-z0-9+/]{100,}={0,3})"),
    _prefixed("newrelic-key", "NRAK-", rf"(?P<body>[A-Za-z0-9]{{27}}){_TAIL}"),
    _prefixed("newrelic-key", "NRII-", rf"(?P<body>[A-Za-z0-9_-]{{32}}){_TAIL_DASH}"),
    _prefixed("dynatrace-token", "dt0c01.", rf"(?P<body>[A-Za-z0-9]{{24}}\.[A-Za-z0-9]{{64}}){_TAIL}"),
    _prefixed("pulumi-token", "pul-", rf"(?P<body>[a-f0-9]{{40}}){_TAIL}"),
    _prefixed("figma-token", "figd_", r"(?P<body>[A-Za-z0-9_-]{40,})"),
    _prefixed("alibaba-key", "LTAI", rf"(?P<body>[A-Za-z0-9]{{12,20}}){_TAIL}", alphanumeric_token),
    _prefixed("tencent-key", "AKID", rf"(?P<body>[A-Za-z0-9]{{32}}){_TAIL}", alphanumeric_token),
    _prefixed("yandex-key", "AQVN", rf"(?P<body>[A-Za-z0-9_-]{{35,38}}){_TAIL_DASH}"),
    _prefixed("jfrog-token", "AKCp", rf"(?P<body>[A-Za-z0-9]{{69}}){_TAIL}"),
    _prefixed("jfrog-token", "cmVmd", rf"(?P<body>[A-Za-z0-9]{{59}}){_TAIL}"),
    _prefixed("typeform-token", "tfp_", r"(?P<body>[A-Za-z0-9_.=-]{59})(?![A-Za-z0-9_.=-])"),
    _prefixed("frameio-token", "fio-u-", rf"(?P<body>[A-Za-z0-9_=-]{{64}}){_TAIL_DASH}", before="A-Za-z0-9_-"),
    _prefixed("prefect-key", "pnu_", rf"(?P<body>[A-Za-z0-9]{{36}}){_TAIL}"),
    _prefixed("readme-key", "rdme_", rf"(?P<body>[a-z0-9]{{70}}){_TAIL}"),
    _prefixed("rubygems-key", "rubygems_", rf"(?P<body>[a-f0-9]{{48}}){_TAIL}"),
    _prefixed("clojars-token", "CLOJARS_", rf"(?P<body>[A-Za-z0-9]{{60}}){_TAIL}"),
    _prefixed("infracost-key", "ico-", rf"(?P<body>[A-Za-z0-9]{{32}}){_TAIL_DASH}", before="A-Za-z0-9_-"),
    _prefixed("scalingo-token", "tk-us-", rf"(?P<body>[A-Za-z0-9_-]{{48}}){_TAIL_DASH}", before="A-Za-z0-9_-"),
    _prefixed("brevo-key", "xkeysib-", rf"(?P<body>[a-f0-9]{{64}}-[A-Za-z0-9]{{16}}){_TAIL}"),
    _prefixed("brevo-key", "xsmtpsib-", rf"(?P<body>[a-f0-9]{{64}}-[A-Za-z0-9]{{16}}){_TAIL}"),
    _prefixed("mapbox-token", "sk.eyJ", r"(?P<body>[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,})",
              before="A-Za-z0-9_.-"),
    _prefixed("duffel-token", "duffel_", r"(?:live|test)_(?P<body>[A-Za-z0-9_=-]{43})(?![A-Za-z0-9_=-])"),
    _prefixed("easypost-key", "EZ", rf"[AT]K(?P<body>[A-Za-z0-9]{{54}}){_TAIL}"),
    _prefixed("shippo-token", "shippo_", rf"(?:live|test)_(?P<body>[a-fA-F0-9]{{40}}){_TAIL}"),
    _prefixed("flutterwave-key", "FLWSECK", rf"(?:_TEST)?-(?P<body>[a-fA-F0-9]{{32}})-X{_TAIL}"),
    _prefixed("razorpay-key", "rzp_", rf"(?:live|test)_(?P<body>[A-Za-z0-9]{{14}}){_TAIL}", alphanumeric_token),
    _prefixed("plaid-token", "access-", rf"(?:sandbox|development|production)-(?P<body>{_UUID}){_TAIL_DASH}",
              before="A-Za-z0-9_-"),
    _prefixed("airtable-token", "pat", rf"(?P<body>[A-Za-z0-9]{{14}}\.[a-f0-9]{{64}}){_TAIL}"),
    _prefixed("contentful-token", "CFPAT-", rf"(?P<body>[A-Za-z0-9_-]{{43}}){_TAIL_DASH}"),
    _prefixed("adobe-key", "p8e-", rf"(?P<body>[A-Za-z0-9]{{32}}){_TAIL_DASH}", alphanumeric_token,
              before="A-Za-z0-9_-"),
    _prefixed("sonar-token", "sq", rf"[upa]_(?P<body>[a-f0-9]{{40}}){_TAIL}"),
    _prefixed("intercom-token", "dG9rO", r"(?P<body>[A-Za-z0-9+/]{40,}={0,2})(?![A-Za-z0-9+/=])",
              before="A-Za-z0-9+/"),
    _prefixed("perplexity-key", "pplx-", rf"(?P<body>[A-Za-z0-9]{{48}}){_TAIL_DASH}", before="A-Za-z0-9_-"),
    _prefixed("xai-key", "xai-", rf"(?P<body>[A-Za-z0-9]{{80}}){_TAIL_DASH}", before="A-Za-z0-9_-"),
    _prefixed("replicate-token", "r8_", rf"(?P<body>[A-Za-z0-9]{{37}}){_TAIL}", alphanumeric_token),
    _prefixed("langsmith-key", "lsv2_", rf"(?:pt|sk)_(?P<body>[a-f0-9]{{32}}_[a-f0-9]{{10}}){_TAIL}"),
    _prefixed("cerebras-key", "csk-", rf"(?P<body>[A-Za-z0-9]{{32,48}}){_TAIL_DASH}", alphanumeric_token,
              before="A-Za-z0-9_-"),
    _prefixed("onepassword-token", "ops_eyJ", r"(?P<body>[A-Za-z0-9+/]{250,}={0,3})"),
    _prefixed("openshift-token", "sha256~", rf"(?P<body>[A-Za-z0-9_-]{{43}}){_TAIL_DASH}"),
    _prefixed("harness-token", "pat.", rf"(?P<body>[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9]{{24}}\.[A-Za-z0-9]{{20}}){_TAIL}",
              before="A-Za-z0-9_."),
    _prefixed("harness-token", "sat.", rf"(?P<body>[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9]{{24}}\.[A-Za-z0-9]{{20}}){_TAIL}",
              before="A-Za-z0-9_."),
    _prefixed("sourcegraph-token", "sgp_", rf"(?:(?:[a-fA-F0-9]{{16}}|local)_)?(?P<body>[a-fA-F0-9]{{40}}){_TAIL}"),
    _prefixed("buildkite-token", "bkua_", rf"(?P<body>[a-f0-9]{{40}}){_TAIL}"),
    _prefixed("circleci-token", "CCIPAT_", rf"(?P<body>[A-Za-z0-9]{{22}}_[a-f0-9]{{40}}){_TAIL}"),
    _prefixed("nuget-key", "oy2", rf"(?P<body>[a-z0-9]{{43}}){_TAIL}", alphanumeric_token),
    _prefixed("hubspot-token", "pat-", rf"(?:na|eu|ap)[0-9]-(?P<body>{_UUID}){_TAIL_DASH}", before="A-Za-z0-9_-"),
    _prefixed("clickup-token", "pk_", rf"(?P<body>[0-9]{{6,10}}_[A-Z0-9]{{32}}){_TAIL}"),
    Rule("jwt", r"""(?P<header>eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,4096})
                    \. eyJ[A-Za-z0-9_-]{5,} \. [A-Za-z0-9_-]{16,}""", jwt, needle="eyJ",
         head=r"eyJ(?<![A-Za-z0-9_-]eyJ)"),
    Rule("bootstrap-token", r"""\.(?<=(?<![A-Za-z0-9_.-])(?P<head>[a-z0-9]{6})\.)(?P<body>[a-z0-9]{16})
                                (?![A-Za-z0-9_.-])""", bootstrap_token,
         head=r"\.(?<=(?<![A-Za-z0-9_.-])[a-z0-9]{6}\.)[a-z0-9]{16}(?![A-Za-z0-9_.-])"),
    Rule("credential-url", r"""://[^\s"'<>`\\()\[\]{}]+""", credential_url, head="://"),
    # Headers.  These run over the lower-cased text (offsets are the same):
    # a literal prefix there is found fast where (?i) would try every position.
    Rule("basic-auth", r"""basic(?<![a-z0-9_]basic)[ \t]+(?P<token>[a-z0-9+/]{8,}={0,2})
                           (?![a-z0-9+/=])""", basic_credentials, folded=True),
    Rule("basic-auth", r"""auth(?<![a-z0-9]auth)["']?[ \t]*[:=][ \t]*["']?
                           (?P<token>[a-z0-9+/]{8,}={0,2})(?![a-z0-9+/=])""", basic_credentials,
         folded=True),
    Rule("bearer-token", r"""bearer(?<![a-z0-9_-]bearer)[ \t]+
                             (?P<token>[a-z0-9._~+/-]{16,}=*)""", bearer_token, folded=True),
    Rule("bearer-token", r"""authorization(?<![a-z0-9_-]authorization)["']?\]?[ \t]*[:=,][ \t]*
                             ["'`]?(?P<scheme>[a-z][a-z0-9_-]{1,30})[ \t]+
                             (?P<token>[a-z0-9._~+/=-]{16,})""", other_scheme_token, folded=True),
    # Command lines.
    Rule("cli-credential", r"""-(?<![^\s]-)(?:[A-Za-z]{0,6}[uU]|-user|-proxy-user)(?:[ \t]+|=)
                               ["']?(?P<user>[^\s:"'$]*):(?P<password>[^\s"']+)""", curl_user),
    Rule("cli-credential", r"""-(?<![^\s]-)(?P<flag>[paw])(?P<space>[ \t]+)?
                               (?P<q>["']?)(?P<value>[^\s"'-][^\s"']*)""", password_flag,
         head=r"-(?<![^\s]-)[paw]"),
    Rule("cli-credential", r"""-pass(?<![^\s]-pass)(?:in|out)?[ \t]+
                               ["']?pass:(?P<value>[^\s"']+)""", openssl_pass),
    Rule("cli-credential", r"""--(?<![^\s]--)(?P<name>[a-z][a-z0-9-]{0,40})[ \t]+
                               ["']?(?P<value>[^\s"'`,;&()\[\]{}<>]{1,1024})""", long_option,
         folded=True, head=r"--(?<![^\s]--)[a-z]"),
    Rule("cli-credential", r"""login(?<![a-z0-9_-]login)[ \t]+
                               (?P<value>[^\s"'`,;()\[\]{}<>-][^\s"'`,;()\[\]{}<>]{31,1023})""", prose_token,
         folded=True, head=r"""login(?<![a-z0-9_-]login)[ \t]+[^\s"'`,;()\[\]{}<>-][^\s"'`,;()\[\]{}<>]{31}"""),
    Rule("netrc-password", r"""login(?<![a-z0-9_-]login)[ \t\r\n]+[^\s]+[ \t\r\n]+
                               password[ \t\r\n]+(?P<value>[^\s]+)""", netrc_password, folded=True),
    Rule("netrc-password", r"""machine(?<![a-z0-9_-]machine)[ \t\r\n]+[^\s]+[ \t\r\n]+
                               password[ \t\r\n]+(?P<value>[^\s]+)""", netrc_password, folded=True),
    Rule("credential-assignment", r"""key(?<![a-z0-9_-]key)[ \t]*=[ \t]*"(?P<name>[^"\n]{1,64})"[ \t]+
                                      value[ \t]*=[ \t]*"(?P<value>[^"\s]{1,1024})["]""", config_pair,
         folded=True),
    # Assignments: a name ending found in the lower-cased text, followed by a
    # separator; the check reads the name back and the value forward.  One
    # rule per ending, so that each starts with a literal.
    # (The head, what the engine's combined search looks for, is the ending alone: the
    # separator is read where one is found, so the combined search stays small.)
    *(Rule("credential-assignment", _trie(words) + "(?= " + NAME_SEPARATOR + ")", assignment, folded=True,
           needle=first, head=_trie(words) + _SEPARATOR_AHEAD)
      for first, words in _by_first(_ASSIGNMENT_ENDINGS).items()),
    # A name ending in a word that says which secret (DB_PASSWORD_PROD, API_TOKEN_V2,
    # SECRET_KEY_BASE): name_kind reads past it.
    Rule("credential-assignment", "_" + _SUFFIX + "(?= " + NAME_SEPARATOR + ")", assignment, folded=True,
         head="_" + _SUFFIX + _SEPARATOR_AHEAD),
    # The endings beyond Latin-1, which the lower-cased copy of the text does not
    # keep (see qmem.secretscan.engine): their cases, over the text itself.
    *(Rule("credential-assignment", _trie(words) + "(?= " + NAME_SEPARATOR + ")", assignment, needle=first,
           head=_trie(words) + _SEPARATOR_AHEAD)
      for first, words in _by_first(_WIDE_ENDINGS).items()),
    # A name that says token, key or secret, a space, and a value that looks random.
    *(Rule("credential-assignment", rf"""{word}[ \t]+(?P<value>[^\s"'`,;()\[\]{{}}<>]{{20,1024}})""",
           prose_token, folded=True, head=rf"""{word}[ \t]+[^\s"'`,;()\[\]{{}}<>]{{20}}""")
      for word in ("token", "key", "secret")),
    Rule("credential-assignment", r"""pass(?<![a-z0-9_]pass)(?:word|phrase)[ \t]+
                                      (?P<value>[^\s"'`,;()\[\]{}<>]{8,1024})""", prose_password,
         folded=True),
    # Cookies: the session ones on a cookie line (after the assignments, which settle a
    # cookie line's overlaps as they always have).
    Rule("credential-assignment", r"""cookie(?<![a-z0-9_]cookie)s?["']?[ \t]*[:=(]?[ \t]*""", session_cookie,
         folded=True, head=r"cookie(?<![a-z0-9_]cookie)"),
    Rule("credential-assignment", r"""-b(?<![^\s]-b)[ \t]+""", session_cookie),
    # Forms whoever issued the secret: calls, separate fields, tables, more programs, SQL, prose.
    *(Rule(*spec) for spec in FORM_RULES),
)
