"""Write the credential scanner's corpus: ``positives.jsonl`` and ``negatives.jsonl``.

    python tests/corpora/secrets/make_corpus.py

Each line is one JSON object: ``{"family": "...", "text": "...", "secret": "..."}`` for a
credential (``secret`` is the part of ``text`` a finding must cover) and
``{"family": null, "text": "..."}`` for a benign text.  Read a line with ``json.loads`` and
nothing else.

Every credential here is synthetic: random characters in the shape of a real one, made from
a fixed seed, so the files are reproducible and hold no real secret.  So that a repository
secret scanner does not flag the corpus itself, the writer escapes every eighth character of
each long token-like run as ``\\uXXXX``; ``json.loads`` gives back the exact text.

The generator is the readable source of the corpus: add cases here and run it again.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from pathlib import Path

HERE = Path(__file__).resolve().parent
RNG = random.Random(20240511)

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + DIGITS
UPPER_ALNUM = UPPER + DIGITS
LOWER_ALNUM = LOWER + DIGITS
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def r(alphabet: str, n: int) -> str:
    """A random string that mixes the classes of its alphabet, as real tokens do."""
    groups = [set(alphabet) & set(g) for g in (UPPER, LOWER, DIGITS)]
    while True:
        text = "".join(RNG.choice(alphabet) for _ in range(n))
        if all(not g or set(text) & g for g in groups if n >= 12):
            return text


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(header: dict | None = None, payload: dict | None = None) -> str:
    header = header or {"alg": "HS256", "typ": "JWT"}
    payload = payload or {"sub": str(RNG.randint(10**6, 10**9)), "iat": RNG.randint(1.6e9, 1.8e9)}
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(payload).encode()),
                     r(URLSAFE, 43)])


def basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def password() -> str:
    """A password as people choose or generate them."""
    return RNG.choice([
        lambda: r(ALNUM, 12) + RNG.choice("!@#%^&*"),
        lambda: RNG.choice(["Summer", "Winter", "Dragon", "Monkey", "Falcon"]) + str(RNG.randint(1990, 2030)) + "!",
        lambda: r(ALNUM + "!#%&*+-=?@^_~", 20),
        lambda: RNG.choice(["hunter", "trustno", "letmein", "qwerty"]) + str(RNG.randint(10, 999)),
        lambda: r(LOWER_ALNUM, 16),
        lambda: "P@ss" + r(DIGITS, 4) + "w0rd",
    ])()


# --- token families: family -> makers --------------------------------------------------

def discord_bot() -> str:
    snowflake = str(RNG.randint(10**17, 10**19 - 1))
    return b64url(snowflake.encode()) + "." + r(URLSAFE, 6) + "." + r(URLSAFE, RNG.choice([27, 38]))


TOKENS: dict[str, list] = {
    "github-token": [lambda: "gh" + RNG.choice("pousr") + "_" + r(ALNUM, 36),
                     lambda: "github_pat_" + r(ALNUM, 22) + "_" + r(ALNUM, 59)],
    "gitlab-token": [lambda: "gl" + RNG.choice(["pat", "dt", "rt", "ptt", "cbt", "oas", "soat", "ft", "imt"])
                     + "-" + r(URLSAFE, 20)],
    "slack-token": [lambda: "xoxb-" + r(DIGITS, 12) + "-" + r(DIGITS, 13) + "-" + r(ALNUM, 24),
                    lambda: "xoxp-" + "-".join(r(DIGITS, 10) for _ in range(3)) + "-" + r(HEX, 32),
                    lambda: "xapp-1-A" + r(UPPER_ALNUM, 10) + "-" + r(DIGITS, 13) + "-" + r(HEX, 64),
                    lambda: "xoxe.xoxp-1-" + r(ALNUM, 140),
                    lambda: "xoxa-2-" + r(DIGITS, 11) + "-" + r(DIGITS, 12) + "-" + r(HEX, 32)],
    "slack-webhook": [lambda: "https://hooks.slack.com/services/T" + r(UPPER_ALNUM, 8) + "/B"
                      + r(UPPER_ALNUM, 10) + "/" + r(ALNUM, 24)],
    "discord-token": [discord_bot],
    "discord-webhook": [lambda: "https://" + RNG.choice(["discord.com", "discordapp.com"])
                        + "/api/webhooks/" + r(DIGITS, 18) + "/" + r(URLSAFE, 68)],
    "anthropic-key": [lambda: "sk-ant-" + RNG.choice(["api03", "admin01", "oat01"]) + "-" + r(URLSAFE, 93) + "AA"],
    "openai-key": [lambda: "sk-proj-" + r(URLSAFE, 156),
                   lambda: "sk-svcacct-" + r(URLSAFE, 120),
                   lambda: "sk-admin-" + r(URLSAFE, 80),
                   lambda: "sk-" + r(ALNUM, 48),
                   lambda: "sk-" + r(ALNUM, 20) + "T3BlbkFJ" + r(ALNUM, 20),
                   lambda: "sk-or-v1-" + r(HEX, 64),
                   lambda: "sk-" + r(HEX, 32)],
    "aws-access-key": [lambda: RNG.choice(["AKIA", "ASIA"]) + r(UPPER_ALNUM, 16)],
    "google-api-key": [lambda: "AIza" + r(URLSAFE, 35)],
    "google-oauth": [lambda: "GOCSPX-" + r(URLSAFE, 28),
                     lambda: "ya29.a0A" + r(URLSAFE, 150),
                     lambda: "1//0" + r(ALNUM, 1) + r(URLSAFE, 98)],
    "npm-token": [lambda: "npm_" + r(ALNUM, 36)],
    "pypi-token": [lambda: "pypi-AgEIcHlwaS5vcmc" + r(URLSAFE, 150)],
    "huggingface-token": [lambda: "hf_" + r(string.ascii_letters, 34)],
    "stripe-key": [lambda: RNG.choice(["sk", "rk"]) + "_" + RNG.choice(["live", "test"]) + "_"
                   + r(ALNUM, RNG.choice([24, 34, 99])),
                   lambda: "whsec_" + r(ALNUM, 32)],
    "sendgrid-key": [lambda: "SG." + r(URLSAFE, 22) + "." + r(URLSAFE, 43)],
    "twilio-key": [lambda: "SK" + r(HEX, 32)],
    "digitalocean-token": [lambda: "do" + RNG.choice("por") + "_v1_" + r(HEX, 64)],
    "shopify-token": [lambda: "shp" + RNG.choice(["at", "ss", "ca", "pa"]) + "_" + r(HEX, 32)],
    "databricks-token": [lambda: "dapi" + r(HEX, 32) + RNG.choice(["", "-2", "-3"])],
    "telegram-bot-token": [lambda: str(RNG.randint(10**7, 10**10 - 1)) + ":AA" + r(URLSAFE, 33)],
    "mailgun-key": [lambda: "key-" + r(HEX, 32)],
    "heroku-key": [lambda: "HRKU-AA" + r(URLSAFE, 58)],
    "atlassian-token": [lambda: "ATATT3xFfGF0" + r(URLSAFE, 170) + "=" + r(HEX.upper(), 8),
                        lambda: "ATBB" + r(ALNUM, 32)],
    "linear-key": [lambda: "lin_api_" + r(ALNUM, 40), lambda: "lin_oauth_" + r(HEX, 64)],
    "notion-token": [lambda: "secret_" + r(ALNUM, 43), lambda: "ntn_" + r(DIGITS, 11) + r(ALNUM, 35)],
    "doppler-token": [lambda: "dp.st." + RNG.choice(["dev", "prd", "stg_api"]) + "." + r(ALNUM, 40),
                      lambda: "dp." + RNG.choice(["pt", "ct", "sa"]) + "." + r(ALNUM, 43)],
    "vault-token": [lambda: "hvs." + r(URLSAFE, 24), lambda: "hvs.CAESI" + r(URLSAFE, 86),
                    lambda: "hvb.AAAAAQ" + r(URLSAFE, 120)],
    "grafana-token": [lambda: "glsa_" + r(ALNUM, 32) + "_" + r(HEX, 8),
                      lambda: "glc_eyJvIjoi" + r(ALNUM, 90) + "=="],
    "posthog-key": [lambda: RNG.choice(["phc", "phx"]) + "_" + r(ALNUM, 43)],
    "sentry-token": [lambda: "sntrys_eyJpYXQiOjE3" + r(ALNUM, 120) + "_" + r(URLSAFE, 43),
                     lambda: "sntryu_" + r(HEX, 64)],
    "square-token": [lambda: "EAAA" + r(URLSAFE, 60), lambda: "sq0atp-" + r(URLSAFE, 22),
                     lambda: "sq0csp-" + r(URLSAFE, 43)],
    "planetscale-token": [lambda: "pscale_" + RNG.choice(["pw", "tkn", "oauth"]) + "_" + r(URLSAFE, 43)],
    "supabase-key": [lambda: "sb_secret_" + r(URLSAFE, 31), lambda: "sbp_" + r(HEX, 40)],
    "age-secret-key": [lambda: "AGE-SECRET-KEY-1" + "".join(RNG.choice(BECH32) for _ in range(58))],
    "dockerhub-token": [lambda: "dckr_pat_" + r(URLSAFE, 27)],
    "groq-key": [lambda: "gsk_" + r(ALNUM, 52)],
    "jwt": [lambda: jwt(),
            lambda: jwt({"alg": "HS256", "typ": "JWT"},
                        {"iss": "supabase", "ref": r(LOWER, 20), "role": "service_role",
                         "iat": 1700000000, "exp": 2000000000}),
            lambda: jwt({"alg": "RS256", "kid": r(HEX, 16), "typ": "JWT"},
                        {"iss": "https://accounts.example.com", "aud": "api", "exp": 1900000000})],
}

# Where a bare token appears.  {t} is the token; {NAME} an environment name, {name} a
# snake_case name, {camel} a camelCase one.
CONTEXTS = [
    "{t}",
    "here is the key {t} -- rotate it tomorrow",
    "export {NAME}={t}",
    '{{"{name}": "{t}", "region": "eu-west-1"}}',
    "{name}: {t}",
    '{NAME}="{t}"',
    '{name} = "{t}"',
    'const {camel} = "{t}";',
    '{camel} := "{t}"',
    "2024-05-01T12:03:44Z INFO client ready credential={t} region=eu",
    "curl -s https://api.example.com/v1/me -H 'X-Auth: {t}'",
    "(the old one was {t})",
    "token: '{t}'.",
    "I pasted {t}.",
    "Use `{t}` for the staging job",
    "    client = Client(\"{t}\")",
    "[ci]\ntoken = \"{t}\"\n",
    "- name: deploy\n  env:\n    {NAME}: {t}\n",
]
NAMES = [("API_TOKEN", "api_token", "apiToken"), ("SERVICE_KEY", "service_key", "serviceKey"),
         ("CI_SECRET", "ci_secret", "ciSecret"), ("AUTH", "auth", "auth"),
         ("DEPLOY_CRED", "deploy_cred", "deployCred"), ("X", "x", "x")]


def context(template: str, token: str) -> str:
    NAME, name, camel = RNG.choice(NAMES)
    return template.format(t=token, NAME=NAME, name=name, camel=camel)


# --- families that live in a context ----------------------------------------------------

def contextual_positives() -> list[tuple[str, str, str]]:
    """(family, text, secret) for families defined by their surroundings."""
    out: list[tuple[str, str, str]] = []

    def add(family: str, text: str, secret: str) -> None:
        assert secret in text, (family, text, secret)
        out.append((family, text, secret))

    # private keys: the whole block counts
    for kind in ["RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED ", "DSA "]:
        body = "\n".join(r(B64, 64) for _ in range(RNG.randint(3, 6)))
        block = f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"
        add("private-key", f"key file:\n{block}\n", block)
    body = r(B64, 64) + "\n" + r(B64, 40)
    block = f"-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n{body}\n=" + r(B64, 4) \
        + "\n-----END PGP PRIVATE KEY BLOCK-----"
    add("private-key", block, block)
    body = "\\n".join(r(B64, 64) for _ in range(4))
    pem = f"-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----\\n"
    add("private-key", '{"type": "service_account", "private_key": "' + pem + '", "client_email": "x"}',
        pem.removesuffix("\\n"))
    block = "-----BEGIN RSA PRIVATE KEY----- " + r(B64, 60) + " " + r(B64, 60)
    add("private-key", block + " (truncated)", block)
    block = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC," + r(HEX, 32).upper() \
        + "\n\n" + r(B64, 64) + "\n-----END RSA PRIVATE KEY-----"
    add("private-key", block, block)

    # service-account JSON without the key itself
    for _ in range(3):
        key_id = r(HEX, 40)
        add("service-account-key", '{"type": "service_account", "project_id": "demo-1", "private_key_id": "'
            + key_id + '", "client_id": "1093"}', key_id)

    # Azure connection strings
    for _ in range(4):
        key = r(B64, 86) + "=="
        add("azure-key", "DefaultEndpointsProtocol=https;AccountName=acme" + r(LOWER, 5)
            + ";AccountKey=" + key + ";EndpointSuffix=core.windows.net", key)
    key = r(B64, 43) + "="
    add("azure-key", "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=" + key, key)
    key = r(B64, 86) + "=="
    add("azure-key", 'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=x1;AccountKey='
        + key + '"', key)

    # Twilio: account SID with its auth token
    for template in ['client = Client("{sid}", "{tok}")', "TWILIO={sid}:{tok}",
                     "account_sid, auth = '{sid}', '{tok}'"]:
        sid, tok = "AC" + r(HEX, 32), r(HEX, 32)
        add("twilio-key", template.format(sid=sid, tok=tok), tok)

    # credential URLs
    for scheme, host in [("postgres", "db.internal:5432/app"), ("postgresql", "10.0.0.5/prod"),
                         ("mysql", "mysql.example.com:3306/shop"), ("mongodb+srv", "cluster0.ab1cd.mongodb.net/?retryWrites=true"),
                         ("redis", "cache:6379/0"), ("amqp", "rabbit.local:5672/%2f"),
                         ("https", "git.example.com/team/repo.git"), ("ftp", "files.example.org/pub")]:
        pw = RNG.choice([password(), r(ALNUM, 16), r(LOWER_ALNUM, 10)])
        pw = pw.replace("@", "%40").replace("#", "%23").replace("/", "%2F").replace("?", "%3F")
        user = RNG.choice(["app", "admin", "deploy", "svc_" + r(LOWER, 4), ""])
        text = RNG.choice(["DATABASE_URL={u}", "connect to {u} first", '"url": "{u}"', "{u}"]).format(
            u=f"{scheme}://{user}:{pw}@{host}")
        add("credential-url", text, pw)
    for name in ["access_token", "api_key", "token", "sig", "password", "client_secret", "apikey", "auth"]:
        value = r(ALNUM, 24)
        add("credential-url", f"GET https://api.example.com/v2/items?page=2&{name}={value} HTTP/1.1", value)
    value = r(HEX, 32)
    add("credential-url", f"SENTRY_DSN=https://{r(HEX, 32)}:{value}@o12345.ingest.sentry.io/678", value)

    # Authorization headers
    for _ in range(3):
        tok = r(URLSAFE + ".~", 40)
        add("bearer-token", RNG.choice(["Authorization: Bearer {t}", "curl -H \"Authorization: Bearer {t}\" https://x.example/api",
                                        "headers = {{'Authorization': 'Bearer {t}'}}", "bearer {t}"]).format(t=tok), tok)
    for scheme in ["Token", "token", "Bot", "SSWS"]:
        tok = r(HEX, 40)
        add("bearer-token", f"Authorization: {scheme} {tok}", tok)
    for template in ["Authorization: Basic {b}", "curl -H 'Authorization: Basic {b}' https://x.example/",
                     'headers["Authorization"] = "Basic {b}"', 'req.Header.Set("Authorization", "Basic {b}")',
                     "xhr.setRequestHeader('Authorization', 'Basic {b}');", "Proxy-Authorization: Basic {b}",
                     '{{"auths": {{"registry.example.com": {{"auth": "{b}"}}}}}}', "_auth={b}",
                     "sent Basic {b} to the proxy"]:
        b = basic(RNG.choice(["deploy", "admin", "ci-bot", "me@example.com"]), password())
        add("basic-auth", template.format(b=b), b)

    # command lines
    for template in ["curl -u {user}:{pw} https://api.example.com/v1", "curl --user '{user}:{pw}' -X POST https://x.example",
                     "curl -su {user}:{pw} https://x.example", "docker login -u {user} -p {pw} registry.example.com",
                     "docker login registry.example.com --username {user} --password {pw}",
                     "mysql -u{user} -p{pw} shop", "mysql -h db -u {user} -p'{pw}' -e 'select 1'",
                     "mysqldump -uroot -p{pw} --all-databases > all.sql",
                     "sshpass -p '{pw}' ssh {user}@10.0.0.4", "redis-cli -h cache -a {pw} ping",
                     "./deploy.sh --password {pw} --env prod", "gh-release --token {pw} v1.2.0",
                     "helm repo add internal https://charts.example.com --username {user} --password {pw}",
                     "wget --http-user={user} --http-password={pw} https://x.example/f.tgz"]:
        pw = password().replace("'", "")
        while "-" == pw[0]:
            pw = password()
        family = "credential-assignment" if "=" in template.split("{pw}")[0][-2:] else "cli-credential"
        add(family, template.format(user=RNG.choice(["deploy", "root", "ci"]), pw=pw), pw)

    # .netrc
    for template in ["machine api.example.com login deploy password {pw}",
                     "machine github.com\n  login bot\n  password {pw}\n",
                     "default login anonymous password {pw}"]:
        pw = password()
        add("netrc-password", template.format(pw=pw), pw)

    # assignments
    cases = [
        ("password={v}", password), ('{{"password": "{v}"}}', password), ("DB_PASSWORD={v}", password),
        ("db_password: {v}", password), ("PGPASSWORD='{v}' psql -h db", password),
        ("Server=tcp:db.example.net,1433;Database=app;User ID=sa;Password={v};Encrypt=True", password),
        ("Host=db;Username=app;Pwd={v};", password), ("spring.datasource.password={v}", password),
        ("<password>{v}</password>", password), ('$password = "{v}";', password),
        ("var dbPass = {{ password: '{v}' }}", password), ("secret_key => \"{v}\"", password),
        ('const authKey = "{v}";', lambda: r(ALNUM, 32)), ("secretKey: '{v}'", lambda: r(ALNUM, 40)),
        ("signingKey={v}", lambda: r(HEX, 64)), ('encryption_key = "{v}"', lambda: r(B64, 43) + "="),
        ("MASTER_KEY={v}", lambda: r(HEX, 48)), ('licenseKey: "{v}"', lambda: "-".join(r(UPPER_ALNUM, 5) for _ in range(5))),
        ('ACCESS_KEY = "{v}"', lambda: r(ALNUM, 24)), ("hmacKey := \"{v}\"", lambda: r(B64, 44)),
        ("aws_secret_access_key = {v}", lambda: r(B64, 40)), ("AWS_SECRET={v}", lambda: r(B64, 40)),
        ("aws_session_token: {v}", lambda: "IQoJb3JpZ2luX2Vj" + r(B64, 200)),
        ("client_secret = '{v}'", lambda: r(URLSAFE, 32)), ("CLIENT_SECRET={v}", lambda: r(HEX, 40)),
        ('"clientSecret": "{v}"', lambda: r(ALNUM, 30)), ("webhook_secret: {v}", lambda: r(ALNUM, 32)),
        ("HEROKU_API_KEY={v}", lambda: "{}-{}-{}-{}-{}".format(r(HEX, 8), r(HEX, 4), r(HEX, 4), r(HEX, 4), r(HEX, 12))),
        ("X-Api-Key: {v}", lambda: r(HEX, 32)), ("api_key={v}", lambda: r(ALNUM, 32)),
        ("CLOUDFLARE_API_TOKEN={v}", lambda: r(URLSAFE, 40)), ("refresh_token: {v}", lambda: r(URLSAFE, 64)),
        ("auth_token = \"{v}\"", lambda: r(HEX, 32)), ("private_key: {v}", lambda: r(B64, 44)),
        ("passphrase=\"{v}\"", password), ("MYSQL_ROOT_PASSWORD: {v}", password),
        ("--db-password={v}", password), ("set -x; export REDIS_PASSWORD={v}", password),
        ("Password: {v}", password), ("the admin password is: {v}", password),
        ("password = \"{v}\"  # TODO move to vault", password), ("SECRET_KEY = '{v}'", lambda: r(ALNUM + "!@#$%^&*(-_=+)", 50)),
        ("const apiSecret = `{v}`;", lambda: r(ALNUM, 32)), ("app.config['SECRET_KEY'] = '{v}'", lambda: r(HEX, 32)),
        ("[database]\npassword = \"{v}\"\n", password), ("credentials: {v}", lambda: r(ALNUM, 20) + "=="),
        ("Authorization: {v}", lambda: r(HEX, 40)), ("api-key: {v}", lambda: r(ALNUM, 32)),
        ("let subscriptionKey = \"{v}\"", lambda: r(HEX, 32)), ('appKey: "{v}"', lambda: r(ALNUM, 24)),
        ("API_KEY: str = \"{v}\"", lambda: r(ALNUM, 32)), ("password: String = \"{v}\"", password),
    ]
    for template, make in cases:
        value = make()
        while value[0] in "$%<{[" or value.lower().startswith("your"):
            value = make()
        if "'" in template or '"' in template or "`" in template or "<" in template:
            value = value.replace("'", "").replace('"', "").replace("`", "").replace("<", "")
        text = template.format(v=value)
        add("credential-assignment", text, value)
    return out


def token_positives() -> list[tuple[str, str, str]]:
    out = []
    for family, makers in TOKENS.items():
        templates = RNG.sample(CONTEXTS, 8)
        for i, template in enumerate(templates):
            token = makers[i % len(makers)]()
            out.append((family, context(template, token), token))
    return out


# --- negatives -----------------------------------------------------------------------------

def uuid() -> str:
    h = r(HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def placeholders() -> list[str]:
    """Placeholders in the shape of every family: documentation, templates, masked values."""
    prefixes = ["ghp_", "gho_", "github_pat_", "glpat-", "xoxb-", "xapp-", "sk-ant-api03-", "sk-proj-", "sk-",
                "AKIA", "AIza", "GOCSPX-", "ya29.", "npm_", "pypi-", "hf_", "sk_live_", "rk_live_", "sk_test_",
                "whsec_", "SG.", "SK", "dop_v1_", "shpat_", "shpss_", "dapi", "key-", "HRKU-", "ATATT3", "lin_api_",
                "secret_", "ntn_", "dp.st.", "hvs.", "glsa_", "glc_", "phc_", "phx_", "sntrys_", "sq0atp-", "EAAA",
                "pscale_pw_", "sb_secret_", "AGE-SECRET-KEY-1", "dckr_pat_", "gsk_"]
    out = []
    for p in prefixes:
        out += [p + "x" * 36, p + "X" * 40, p + "...", p + "\u2026", p + "*" * 24, p + "<your-key>",
                f"export TOKEN={p}0000000000000000000000000000000000000000"]
    out += [
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "https://hooks.slack.com/services/TXXXXXXXX/BXXXXXXXX/xxxxxxxxxxxxxxxxxxxxxxxx",
        "https://hooks.slack.com/services/<team>/<channel>/<secret>",
        "https://discord.com/api/webhooks/{id}/{token}",
        "https://discord.com/api/webhooks/000000000000000000/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "DefaultEndpointsProtocol=https;AccountName=<name>;AccountKey=<key>;EndpointSuffix=core.windows.net",
        "AccountKey=${AZURE_STORAGE_KEY}", "SharedAccessKey=...",
        "curl -u $USER:$PASSWORD https://x.example", "curl -u user:password https://x.example",
        "curl --user ${API_USER}:${API_PASS} https://x.example", "curl -u username:<password> https://x.example",
        "docker login -u $DOCKER_USER -p $DOCKER_PASS", "docker login -p \"$(cat ~/.docker-token)\"",
        "docker login --password-stdin < token.txt", "mysql -u root -p", "mysql -uroot -p${MYSQL_ROOT_PASSWORD}",
        "Authorization: Basic <base64(user:pass)>", "Authorization: Basic {{ basic_auth }}",
        "Authorization: Bearer ${TOKEN}", "Authorization: Bearer <token>", "Authorization: Bearer ...",
        "Authorization: Bearer YOUR_ACCESS_TOKEN", "Authorization: token %GITHUB_TOKEN%",
        "machine example.com login me password <password>", "machine host login user password ${NETRC_PASS}",
        '"private_key": "-----BEGIN PRIVATE KEY-----\\n...\\n-----END PRIVATE KEY-----\\n"',
        "-----BEGIN RSA PRIVATE KEY-----\n<your key here>\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n...\n-----END OPENSSH PRIVATE KEY-----",
        '"private_key_id": "<key-id>"', '"private_key_id": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"',
        "postgres://user:password@localhost:5432/db", "postgres://app:${DB_PASSWORD}@db:5432/app",
        "mongodb+srv://<username>:<password>@cluster0.mongodb.net/", "redis://:****@cache:6379",
        "https://user:xxxxxxxx@example.com/", "mysql://root:%DB_PASS%@localhost/test",
        "password=<redacted>", "password: '********'", "API_KEY=your-api-key-here", "api_key: {{ api_key }}",
        "SECRET_KEY=${SECRET_KEY}", "token=%TOKEN%", "client_secret: <client-secret>", "secretKey: '...'",
        "const authKey = process.env.AUTH_KEY;", "signingKey: '<signing key>'", "apiKey: 'xxxxxxxxxxxxxxxxxxxxxxxx'",
        "STRIPE_SECRET_KEY=sk_live_...", "OPENAI_API_KEY=sk-...", "ANTHROPIC_API_KEY=sk-ant-api03-...",
        "HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "AWS_ACCESS_KEY_ID=AKIAXXXXXXXXXXXXXXXX", "AWS_SECRET_ACCESS_KEY=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "TELEGRAM_BOT_TOKEN=123456789:AAxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "MAILGUN_API_KEY=key-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "SENDGRID_API_KEY=SG.xxxxxxxxxxxxxxxxxxxxxx.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "DISCORD_TOKEN=<bot token>", "VAULT_TOKEN=hvs.XXXXXXXXXXXXXXXXXXXXXXXX", "token: ghp_************************************",
        "export GITLAB_TOKEN=glpat-xxxxxxxxxxxxxxxxxxxx", "Bearer sk-proj-...", "key=AIzaSy...",
        "AGE-SECRET-KEY-1XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    ]
    return out


def generated_negatives() -> list[str]:
    out = []
    for _ in range(20):
        out.append(RNG.choice(["request_id={u}", "trace {u} finished in 12ms", '"id": "{u}"', "user {u} logged in",
                               "idempotencyKey: {u}", "Idempotency-Key: {u}", "correlation_id: {u}",
                               "DELETE /v1/records/{u} 204"]).format(u=uuid()))
    for _ in range(12):
        out.append(RNG.choice(["commit {h}", "git checkout {h7}", "Merge: {h7} {h7b}", "fixed in {h}",
                               "git revert {h}", "sha1: {h}", "HEAD is now at {h7} release"]).format(
            h=r(HEX, 40), h7=r(HEX, 7), h7b=r(HEX, 7)))
    for _ in range(12):
        out.append(RNG.choice(["sha256:{s}", "md5 {m}  file.tar.gz", "{s}  dist/qmem-1.0.tar.gz",
                               "image@sha256:{s}", "checksum = \"{s}\"", "etag: \"{m}\"", "\"hash\": \"{s}\"",
                               "cacheKey = \"{m}\"", "content_hash={s}"]).format(s=r(HEX, 64), m=r(HEX, 32)))
    for _ in range(12):
        blob = base64.b64encode(RNG.randbytes(RNG.choice([24, 48, 96, 300]))).decode()
        out.append(RNG.choice(["data:image/png;base64,{b}", "\"integrity\": \"sha512-{b}\"", "payload: {b}",
                               "<img src=\"data:image/gif;base64,{b}\">", "body={b}", "{b}",
                               "ssh-ed25519 {b} user@laptop", "publicKey: \"{b}\"", "nonce = \"{b}\""]).format(b=blob))
    for _ in range(10):
        out.append(RNG.choice(["v{a}.{b}.{c}", "build {a}.{b}.{c}-rc{a}", "listening on 0.0.0.0:{p}",
                               "pid {p} exited with status {a}", "{a}.{b}.{c}.{d}", "port={p} timeout={a}s"]).format(
            a=RNG.randint(0, 20), b=RNG.randint(0, 99), c=RNG.randint(0, 999), d=RNG.randint(0, 255),
            p=RNG.randint(1024, 65535)))
    # JWT-looking text that is not a JWT
    for _ in range(6):
        out.append("eyJ" + r(ALNUM, 30) + ".eyJ" + r(ALNUM, 30) + "." + r(ALNUM, 30))
    out.append(b64url(b'{"typ":"JWT","cty":"x"}') + "." + b64url(b'{"sub":"1"}') + "." + r(URLSAFE, 43))
    out.append("the header eyJhbGciOiJIUzI1NiJ9 decodes to {\"alg\":\"HS256\"}")
    out.append("JWTs start with eyJ because base64 of '{\"' is eyJ")
    # look-alikes: right prefix, wrong shape; inside identifiers
    out += [
        "ghp_" + r(ALNUM, 20), "my_ghp_" + r(ALNUM, 36), "ghx_" + r(ALNUM, 36), "github_pat_" + r(ALNUM, 22),
        "glpat-" + r(URLSAFE, 12), "xoxb-123-abc", "sk-ant-api03-" + r(URLSAFE, 10), "sk-proj-abc",
        "sk-" + r(ALNUM, 20), "task-" + r(LOWER, 40), "risk-assessment-matrix-for-the-quarterly-planning-review-2024",
        "AKIA" + r(UPPER_ALNUM, 12), "akia" + r(LOWER_ALNUM, 16), "ABIA" + r(UPPER_ALNUM, 16),
        "AIza" + r(URLSAFE, 20), "npm_config_registry=https://registry.npmjs.org/", "npm_" + r(ALNUM, 20),
        "pypi-simple-index", "hf_hub_download(repo_id='x')", "hf_" + r(LOWER, 34),
        "sk_live_" + r(ALNUM, 10), "sk_test_mode_enabled", "pk_live_" + r(ALNUM, 24), "pk_test_" + r(ALNUM, 24),
        "SG.enable_tracking", "SKU" + r(DIGITS, 12), "SK" + r(HEX, 20), "dop_v1_" + r(HEX, 20),
        "shpat_" + r(HEX, 12), "dapi" + r(HEX, 10), "dapi_version = 2", "key-value store", "key-" + r(HEX, 12),
        "monkey-" + r(HEX, 32), "12345678:AB" + r(URLSAFE, 33), "HRKU-" + r(ALNUM, 10),
        "lin_api_" + r(ALNUM, 10), "secret_" + r(LOWER, 20), "secret_santa_list", "ntn_" + r(ALNUM, 10),
        "dp.st.dev", "hvs." + r(ALNUM, 8), "glsa_" + r(ALNUM, 8), "glc_" + r(ALNUM, 8), "phc_" + r(ALNUM, 10),
        "sntry_" + r(HEX, 64), "sq0atp-" + r(ALNUM, 8), "EAAA" + r(ALNUM, 20), "pscale_pw_" + r(ALNUM, 8),
        "sb_publishable_" + r(URLSAFE, 31), "AGE-SECRET-KEY-1" + r(LOWER, 20), "dckr_pat_" + r(ALNUM, 8),
        "gsk_" + r(ALNUM, 20), "ATBB" + r(ALNUM, 12), "ATATT3xFfGF0", "GOCSPX-", "ya29.", "1//0",
        "AC" + r(HEX, 32) + " is the account SID", "account SID AC" + r(HEX, 32) + ", region us1",
        "BasicAuth middleware " + r(ALNUM, 6), "Basic " + base64.b64encode(b"helloworld").decode(),
        "Basic usage: run the tool", "Authorization: Basic realm=\"api\"",
        "https://hooks.slack.com/services/", "https://discord.com/api/webhooks/",
        "AccountName=" + r(LOWER, 10) + ";EndpointSuffix=core.windows.net",
    ]
    return out


HANDWRITTEN = """\
The password reset flow sends an e-mail; the password field needs 12 characters.
Set GITHUB_TOKEN in your environment and never commit it.
token: ${{ secrets.GITHUB_TOKEN }}
curl -H "Authorization: Bearer $TOKEN" https://api.github.com/user
password = os.environ["DB_PASSWORD"]
api_key = os.getenv("OPENAI_API_KEY")
const token = process.env.TOKEN;
const apiKey = process.env.STRIPE_SECRET_KEY_V2;
let secret = import.meta.env.VITE_APP_SECRET;
token := os.Getenv("SLACK_BOT_TOKEN")
String password = System.getenv("DB_PASSWORD");
var key = Environment.GetEnvironmentVariable("API_KEY");
api_key = ENV.fetch("API_KEY")
password = ENV["PASSWORD"]
let token = env::var("GITHUB_TOKEN").expect("token");
$apiKey = getenv('API_KEY');
secret_key = settings.SECRET_KEY
password = config.db.password2
self.api_key = api_key
self.token = kwargs.get("token")
password: Optional[str] = None
def login(user: str, password: str) -> Session:
if password == confirm_password:
password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
hashed_password = "$2b$12$KIXQJQ1dWq8a1Ylp3lMQzeW1Zr7vI1cpxDkHjUBS3ZqQmgV4x6D1a"
max_tokens = 4096
max_tokens: 2048
num_tokens = len(tokens)
next_page_token = response["nextPageToken"]
nextPageToken: "CAUQAA"
page_token=CAoQAA&page_size=50
csrf_token = request.cookies.get("csrftoken")
token_type: bearer
token_url: https://oauth2.googleapis.com/token
TOKEN_ENDPOINT = "https://login.example.com/oauth2/v2.0/token"
expires_in: 3600
primaryKey = "id"
sortKey: "created_at"
cacheKey = "user:" + id
foreignKey="user_id"
partitionKey: "/tenantId"
const storageKey = "qmem-settings-v1";
routingKey = "orders.created.v2"
objectKey = "uploads/2024/05/avatar-3.png"
i18nKey="nav.home.title"
translationKey: 'settings.profile.save_button'
queryKey: ['todos', page]
<li key={item.id}>{item.name}</li>
{"key": "feature_flag_new_checkout", "value": true}
hotkey: "Ctrl+Shift+K"
monkey = "banana"
keyboard: us-intl
keyName: my-ec2-keypair-2
key_id: 7
kid: 2024-05-key
publicKey: "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE="
public_key = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"
ssh_public_key: ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 user@host
STRIPE_PUBLISHABLE_KEY=pk_test_TYooMQauvdEDq54NiTphI7jx
valueFrom:\n  secretKeyRef:\n    name: db-secret\n    key: password
env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: postgres-credentials-2\n        key: password
existingSecret: postgres-secret-1
secretName: tls-example-com-2024
secret:\n  secretName: app-config-v2
credentials: aws-prod-2
credentialsId: 'github-creds-1'
kind: Secret\nmetadata:\n  name: mysecret\ntype: Opaque
aws_secretsmanager_secret.db.arn
secret_arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf"
password_file: /run/secrets/db_password
secret: /etc/app/secret-2.txt
token_file = "~/.config/gh/hosts.yml"
password_min_length=12
password_max_age_days: 90
password_policy: strong
the password must contain a digit, e.g. 'hunter2' is weak
Never write password=... in a config file; use the keychain.
We rotated the API key; the new one lives in 1Password under "Stripe (prod)".
GitHub personal access tokens start with ghp_ and fine-grained ones with github_pat_.
Stripe secret keys begin with sk_live_ or sk_test_; publishable keys begin with pk_.
Slack bot tokens look like xoxb-…, app-level tokens like xapp-….
Anthropic keys start with sk-ant- and OpenAI keys with sk- or sk-proj-.
An AWS access key id is 20 characters and starts with AKIA.
Use a Slack incoming webhook (hooks.slack.com/services/...) for alerts.
A Telegram bot token has the form <bot id>:<secret>.
Set Authorization: Basic with base64(user:password), never in a URL.
Connection strings look like Server=...;Database=...;User Id=...;Password=...;
curl -u reads the password from the prompt if you omit it: curl -u alice https://x.example
mysql -u root -p prompts for the password.
docker login reads the password from stdin with --password-stdin.
The .netrc file holds lines like: machine <host> login <user> password <password>
git clone git@github.com:owner/repo.git
git clone https://github.com/owner/repo.git
ssh://git@gitlab.example.com:2222/group/project.git
postgres://localhost:5432/app
postgresql://app@db.internal/app?sslmode=require
redis://cache.internal:6379/0
https://example.com/search?q=tokens&page=2
https://example.com/callback?code_challenge_method=S256&state=xyz
https://docs.github.com/en/authentication/managing-your-personal-access-tokens
https://api.example.com/v1/items?limit=50&offset=100&sort=created_at
https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s
https://example.com/reset?token=
https://example.com/?key=frontend&page=2
http://localhost:8080/health
mailto:ops@example.com?subject=rotate%20keys
The bearer token is sent in the Authorization header.
Bearer authentication (also called token authentication) is an HTTP scheme.
Authorization: Bearer
WWW-Authenticate: Bearer realm="example", error="invalid_token"
WWW-Authenticate: Basic realm="Access to staging", charset="UTF-8"
Authorization header missing
auth: { type: 'oauth2', flow: 'pkce' }
authKey: useAuthKey()
-----BEGIN CERTIFICATE-----
-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE1L3Zt6Jq9oHc5aKuE2Xk\n-----END PUBLIC KEY-----
A PEM private key starts with -----BEGIN PRIVATE KEY----- and ends with -----END PRIVATE KEY-----.
openssl genpkey -algorithm ed25519 -out key.pem
ssh-keygen -t ed25519 -C "me@example.com" -f ~/.ssh/id_ed25519
gpg --armor --export-secret-keys ABCD1234 > private.asc
age-keygen -o key.txt
vault login -method=github token=$GITHUB_TOKEN
vault kv get -field=password secret/db
kubectl create secret generic db --from-literal=password=$DB_PASSWORD
kubectl get secret db -o jsonpath='{.data.password}' | base64 -d
aws configure set aws_secret_access_key "$AWS_SECRET_ACCESS_KEY"
aws sts get-session-token --duration-seconds 3600
gh auth login --with-token < token.txt
gh secret set API_KEY --body "$API_KEY"
npm config set //registry.npmjs.org/:_authToken=${NPM_TOKEN}
pip install --index-url https://pypi.org/simple/ requests
docker run -e POSTGRES_PASSWORD -p 5432:5432 postgres:16
docker run -e POSTGRES_PASSWORD=$PW postgres
curl -X POST -H "Content-Type: application/json" -d '{"name": "x"}' https://api.example.com/v1
curl --user-agent "qmem/1.0" https://example.com
curl -u "$USER" https://x.example
mysql --user=root --password < dump.sql
2024-05-01T12:00:00Z INFO request_id=5b1c status=200 duration_ms=42
2024-05-01 12:00:01,234 WARNING token refresh failed: invalid_grant
[2024-05-01 12:00:02] ERROR auth: password authentication failed for user "app"
E0501 12:00:03.123456 1 reflector.go:138] Failed to watch *v1.Secret: unauthorized
level=info msg="rotated signing key" kid=2024-05 alg=RS256
FATAL: password authentication failed for user "postgres"
Traceback (most recent call last):\n  File "app.py", line 12, in <module>\n    token = get_token()
KeyError: 'API_KEY'
ValueError: invalid literal for int() with base 10: 'abc'
{"level":"error","msg":"token expired","exp":1714564800,"sub":"user_42"}
{"access_token": null, "token_type": "Bearer", "expires_in": 3600}
{"password": "", "username": "guest"}
{"error": "invalid_client", "error_description": "Client authentication failed"}
"scripts": {"test": "jest --coverage", "lint": "eslint ."}
[tool.poetry.dependencies]\npython = "^3.10"\nrequests = "^2.31"
[server]\nport = 8080\nhost = "0.0.0.0"
FROM python:3.12-slim\nRUN pip install --no-cache-dir -r requirements.txt
services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD_FILE: /run/secrets/pg_pw
steps:\n  - uses: actions/checkout@v4\n  - run: make test\n    env:\n      TOKEN: ${{ secrets.TOKEN }}
import jwt\npayload = jwt.decode(token, key, algorithms=["HS256"])
from cryptography.hazmat.primitives.asymmetric import rsa\nkey = rsa.generate_private_key(public_exponent=65537, key_size=2048)
secret = secrets.token_urlsafe(32)
api_key = generate_api_key(length=40)
token = jwt.encode({"sub": user.id}, SECRET_KEY, algorithm="HS256")
headers = {"Authorization": f"Bearer {token}"}
headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()}
req.Header.Set("Authorization", "Bearer "+token)
fetch(url, { headers: { Authorization: `Bearer ${accessToken}` } })
auth = HTTPBasicAuth(username, password)
requests.get(url, auth=(user, password))
client = OpenAI(api_key=api_key)
client = Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"])
stripe.api_key = settings.STRIPE_KEY
const octokit = new Octokit({ auth: process.env.GITHUB_TOKEN });
SECRET_KEY = get_random_secret_key()
DEBUG = False\nALLOWED_HOSTS = ["example.com"]
for token in tokenizer.tokenize(text):
tokens = text.split()
The tokenizer splits the text into 512 tokens.
Our LLM bill: 1.2M input tokens and 340k output tokens in May.
The session key is derived with HKDF from the shared secret.
A secret-sharing scheme splits the key into n shares.
git log --format='%H %s' | head
SELECT id, password_hash FROM users WHERE email = $1;
CREATE TABLE api_keys (id uuid primary key, key_hash text not null, created_at timestamptz);
ALTER TABLE users ADD COLUMN password_reset_token text;
UPDATE users SET password = crypt($1, gen_salt('bf')) WHERE id = $2;
#!/bin/bash\nset -euo pipefail\nread -rsp "Password: " PASSWORD
echo "Enter your API key:"; read -r API_KEY
$ export OPENAI_API_KEY=
Remember: tokens expire after 1h, refresh tokens after 30d.
Tip: `qmem_store` refuses text with credentials; store a reference instead.
We store the key in AWS Secrets Manager under prod/payments/stripe.
The CI job reads DOCKERHUB_TOKEN from the repository secrets.
version: 2.1\norbs:\n  python: circleci/python@2.1.1
resource "aws_iam_access_key" "ci" {\n  user = aws_iam_user.ci.name\n}
output "secret" {\n  value     = aws_iam_access_key.ci.secret\n  sensitive = true\n}
variable "db_password" {\n  type      = string\n  sensitive = true\n}
password = var.db_password
ansible-vault encrypt_string --name 'db_password' 'value'
db_password: "{{ vault_db_password }}"
SECRET_KEY_BASE: <%= ENV["SECRET_KEY_BASE"] %>
token: !vault |\n  $ANSIBLE_VAULT;1.1;AES256
Set the key to 'sort' to order by date.
The primary key is the id column; the foreign key references users.
Press the Enter key twice.
Each record has a key and a value.
cache key: user:42:profile
Unique key violation on (tenant_id, slug)
region: eu-central-1
bucket: my-app-assets-2024
vpc-0a1b2c3d4e5f67890
i-0123456789abcdef0
arn:aws:iam::123456789012:role/ci-deploy
projects/my-project-123/locations/global/keyRings/ring/cryptoKeys/key-1
sha512-0b6c9f1e4f3c2a1d
node_modules/.bin/tsc --noEmit
ERR_PNPM_FETCH_401 GET https://registry.npmjs.org/x: Unauthorized - 401
HTTP/1.1 401 Unauthorized
x-ratelimit-remaining: 4999
set-cookie: theme=dark; Path=/; SameSite=Lax
Content-Security-Policy: default-src 'self'; script-src 'nonce-2726c7f26c'
if (!apiKey) throw new Error("missing API key");
assert token is not None, "token required"
raise ValueError("password too short")
// TODO: rotate signing key before launch
# password reset tokens are single-use
<input type="password" name="password" autocomplete="current-password">
<label for="api-key">API key</label>
placeholder="sk-..."
pattern: ^sk-[A-Za-z0-9]{48}$
regex: r"gh[pousr]_[A-Za-z0-9]{36}"
The scanner refuses ghp_, xoxb-, sk-ant- and AKIA tokens.
Use 1Password CLI: op read "op://Private/Stripe/credential"
op://vault/item/password
keychain: security find-generic-password -s qmem -w
AWS_PROFILE=prod aws s3 ls
export AWS_REGION=us-east-1
export PATH="$HOME/.local/bin:$PATH"
PWD=/home/me/projects/qmem
OLDPWD=/tmp
HISTFILE=~/.bash_history
LANG=en_US.UTF-8
TZ=Europe/Rome
"""


def negatives() -> list[str]:
    hand = [line.replace("\\n", "\n") for line in HANDWRITTEN.splitlines() if line.strip()]
    return hand + placeholders() + generated_negatives()


# --- writing ------------------------------------------------------------------------------

_RUN = re.compile(r"[A-Za-z0-9_+/=.-]{12,}")


def defused_json_string(text: str) -> str:
    """JSON for *text* with every eighth character of long runs escaped as \\uXXXX."""
    escape = set()
    for run in _RUN.finditer(text):
        escape.update(range(run.start() + 1, run.end(), 8))
    parts = []
    for i, c in enumerate(text):
        parts.append(f"\\u{ord(c):04x}" if i in escape else json.dumps(c, ensure_ascii=True)[1:-1])
    return '"' + "".join(parts) + '"'


def line(fields: dict) -> str:
    body = ", ".join(f'"{k}": ' + ("null" if v is None else json.dumps(v) if k == "family"
                                   else defused_json_string(v)) for k, v in fields.items())
    encoded = "{" + body + "}"
    assert json.loads(encoded) == fields, fields
    return encoded


def main() -> None:
    positives = token_positives() + contextual_positives()
    with open(HERE / "positives.jsonl", "w", encoding="ascii", newline="\n") as f:
        for family, text, secret in positives:
            f.write(line({"family": family, "text": text, "secret": secret}) + "\n")
    seen = set()
    with open(HERE / "negatives.jsonl", "w", encoding="ascii", newline="\n") as f:
        for text in negatives():
            if text not in seen:
                seen.add(text)
                f.write(line({"family": None, "text": text}) + "\n")
    families = {family for family, _, _ in positives}
    print(f"{len(positives)} positives over {len(families)} families, {len(seen)} negatives")


if __name__ == "__main__":
    main()
