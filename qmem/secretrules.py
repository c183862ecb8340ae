"""The credential families the scanner knows: the patterns that find each and the checks that confirm it.

This module is data.  :data:`RULES` lists, most specific family first, one
:class:`Rule` per way of finding a family: a regular expression for the
candidates and a check (from :mod:`qmem.secretshapes` or
:mod:`qmem.secretcontext`) that says which of them hold up and which part is
the credential.  :mod:`qmem.secretscan` compiles and runs them.

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

AWS documentation keys.  ``AKIAIOSFODNN7EXAMPLE`` and
``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`` *are* findings (the latter when
assigned, as in ``aws_secret_access_key = wJalr…``).  They are
credential-shaped, a scanner with a list of exempt strings invites adding more,
and refusing a documentation example in a memory record costs its author a
rewording.  A bare 40-character base64 string is not a finding, because
nothing distinguishes an AWS secret key from any other such string.

Every pattern runs in time linear in the length of the text, and it must
stay so: it starts at a literal or a bounded boundary (a look-behind over the
prefix rather than before it, so the engine searches for the literal fast),
no repetition in it can match the same text in two ways, and every look
around is bounded.  ``tests/test_secretscan.py`` makes hostile input from a
text that each rule matches and scans it under a watchdog.

A new family is an entry here (most need only :func:`_prefixed` and the
default check, :func:`~qmem.secretshapes.prefixed_token`), a line in the
list above, a small check where the shape needs one, and cases in
``tests/corpora/secrets``: the tests require every family to be found there,
and every rule to match a case there (or a sample of the test's own).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .secretcontext import (NAME_SEPARATOR, assignment, basic_credentials, bearer_token, config_pair,
                            credential_url, curl_user, long_option, netrc_password, openssl_pass,
                            other_scheme_token, password_flag, prose_password)
from .secretshapes import (discord_token, jwt, mixed_case_token, prefixed_token, private_key, random_token,
                           telegram_token, token_body, webhook_url)

__all__ = ["Check", "Rule", "RULES"]

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


def _prefixed(family: str, prefix: str, rest: str, check: Check = prefixed_token,
              before: str = "A-Za-z0-9_") -> Rule:
    """A token that starts with the literal *prefix*, not after [*before*].

    The boundary is checked after the prefix (a look-behind over the prefix),
    so the pattern starts with a literal that the engine searches for fast.
    """
    literal = re.escape(prefix)
    return Rule(family, f"{literal}(?<![{before}]{literal}){rest}", check)


_TAIL = r"(?![A-Za-z0-9_])"      # a fixed-length token does not run on
_TAIL_DASH = r"(?![A-Za-z0-9_-])"

# Most specific first: that order settles overlapping findings.
RULES: tuple[Rule, ...] = (
    Rule("private-key", r"-----BEGIN[ ](?:[A-Z0-9]+[ ]){0,3}PRIVATE[ ]KEY(?:[ ]BLOCK)?-----",
         private_key),
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
    Rule("slack-webhook", r"""hooks\.slack\.com/(?:services|workflows|triggers)/
                              (?P<body>T[A-Za-z0-9]{6,12}/[A-Za-z0-9]{6,12}/[A-Za-z0-9/]{16,})""",
         webhook_url),
    Rule("discord-webhook", r"""discord(?:app)?\.com/api/webhooks/
                                (?P<body>[0-9]{17,20}/[A-Za-z0-9_-]{60,})""", webhook_url),
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
    Rule("discord-token", rf"""(?P<head>[MNO](?<![A-Za-z0-9_.-].)[A-Za-z0-9_-]{{23,26}})
                               \.(?P<body>[A-Za-z0-9_-]{{6}}\.[A-Za-z0-9_-]{{27,40}}){_TAIL_DASH}""",
         discord_token),
    _prefixed("azure-key", "AccountKey=", r"(?P<body>[A-Za-z0-9+/]{80,}={0,2})", token_body,
              before="A-Za-z0-9_"),
    _prefixed("azure-key", "SharedAccessKey=", r"(?P<body>[A-Za-z0-9+/]{40,}={0,2})",
              token_body),
    _prefixed("digitalocean-token", "do", rf"[por]_v1_(?P<body>[a-f0-9]{{64}}){_TAIL}"),
    _prefixed("shopify-token", "shp", rf"(?:at|ss|ca|pa)_(?P<body>[a-fA-F0-9]{{32}}){_TAIL}"),
    _prefixed("databricks-token", "dapi", rf"(?P<body>[a-f0-9]{{32}})(?:-[0-9]{{1,2}})?{_TAIL}"),
    Rule("telegram-bot-token", rf":AA(?P<body>[A-Za-z0-9_-]{{33}}){_TAIL_DASH}", telegram_token),
    _prefixed("mailgun-key", "key-", rf"(?P<body>[0-9a-f]{{32}}){_TAIL}", before="A-Za-z0-9_-"),
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
    Rule("jwt", r"""(?P<header>eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,4096})
                    \. eyJ[A-Za-z0-9_-]{5,} \. [A-Za-z0-9_-]{16,}""", jwt, needle="eyJ"),
    Rule("credential-url", r"""://[^\s"'<>`\\()\[\]{}]+""", credential_url),
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
                               (?P<q>["']?)(?P<value>[^\s"'-][^\s"']*)""", password_flag),
    Rule("cli-credential", r"""-pass(?<![^\s]-pass)(?:in|out)?[ \t]+
                               ["']?pass:(?P<value>[^\s"']+)""", openssl_pass),
    Rule("cli-credential", r"""--(?<![^\s]--)(?P<name>[a-z][a-z0-9-]{0,40})[ \t]+
                               ["']?(?P<value>[^\s"'`,;&()\[\]{}<>]{1,1024})""", long_option,
         folded=True),
    Rule("netrc-password", r"""login(?<![a-z0-9_-]login)[ \t\r\n]+[^\s]+[ \t\r\n]+
                               password[ \t\r\n]+(?P<value>[^\s]+)""", netrc_password, folded=True),
    Rule("netrc-password", r"""machine(?<![a-z0-9_-]machine)[ \t\r\n]+[^\s]+[ \t\r\n]+
                               password[ \t\r\n]+(?P<value>[^\s]+)""", netrc_password, folded=True),
    Rule("credential-assignment", r"""key(?<![a-z0-9_-]key)[ \t]*=[ \t]*"(?P<name>[^"\n]{1,64})"[ \t]+
                                      value[ \t]*=[ \t]*"(?P<value>[^"\s]{1,1024})["]""", config_pair,
         folded=True),
    # Assignments: a name ending found in the lower-cased text, followed by a
    # separator; the check reads the name back and the value forward.
    Rule("credential-assignment", r"""
        (?: pass(?:word|wd|phrase)? | pwd | secret | token | credentials? | key | authorization
          | session(?:id)? | passwort | kennwort | contrase[ñn]a | senha | wachtwoord | пароль
          | mot[ ]de[ ]passe )
        (?= """ + NAME_SEPARATOR + ")", assignment, folded=True),
    Rule("credential-assignment", r"""pass(?<![a-z0-9_]pass)(?:word|phrase)[ \t]+
                                      (?P<value>[^\s"'`,;()\[\]{}<>]{8,1024})""", prose_password,
         folded=True),
)
