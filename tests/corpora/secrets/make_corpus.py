"""Write the credential scanner's corpus: ``positives.jsonl`` and ``negatives.jsonl``.

    python tests/corpora/secrets/make_corpus.py

It writes the first wave here (``positives.jsonl``, ``negatives.jsonl``) and the second,
from ``second_wave.py`` (``positives2.jsonl``, ``negatives2.jsonl``).  Each line is one JSON object: ``{"family": "...", "text": "...", "secret": "..."}`` for a
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

import second_wave

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
        ("the admin password is: {v}", password), ("ssh root@10.0.0.4 with password {v}", lambda: r(ALNUM, 10) + "9"),
        ("The staging password is {v}", lambda: "Hx" + r(ALNUM, 8) + "7!"), ("username: admin password: {v}", password),
        ("Passwort: {v}", password), ("contraseña: {v}", password), ("mot de passe : {v}", password),
        ("Set-Cookie: sessionid={v}; HttpOnly; Secure", lambda: r(ALNUM, 32)),
        ("Cookie: theme=dark; session={v}", lambda: r(HEX, 40)),
        ('<add key="ApiKey" value="{v}" />', lambda: r(ALNUM, 32)),
        ('<add key="SmtpPassword" value="{v}" />', password),
        ("wallet private key: 0x{v}", lambda: r(HEX, 64)), ("DB_PASS={v}", password),
        ('jwt_secret = "{v}"', lambda: r(string.ascii_letters, 32)), ("set PASSWORD={v}", password),
        ("api.key={v}", lambda: r(ALNUM, 32)), ("SMTP_PASS: {v}", password),
        ('log: {{\\"api_key\\":\\"{v}\\"}}', lambda: r(ALNUM, 32)),
        ('{{"request": "{{\\"user\\": \\"ci\\", \\"password\\": \\"{v}\\"}}"}}', password),
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


# Code, configuration, logs and documentation that handle credentials without holding one.
HANDWRITTEN_MORE = """\
def get_token(self) -> str:\\n    return self._token
if (token.type === TokenType.Identifier) { return parseIdentifier(token); }
for tok in lexer.tokens(): print(tok.kind, tok.value)
const { data: session } = useSession(); const accessToken = session?.accessToken;
let apiKey = req.headers['x-api-key'];
api_key = request.args.get("api_key")
password = request.form["password"]
user.set_password(form.cleaned_data["password1"])
if not check_password(password, user.password_hash): raise AuthError()
hashed = argon2.hash(password)
token = secrets.token_urlsafe(32)
key = Fernet.generate_key()
private_key = ec.generate_private_key(ec.SECP256R1())
public_key = private_key.public_key()
signature = private_key.sign(data, ec.ECDSA(hashes.SHA256()))
ssh-keygen -lf ~/.ssh/id_ed25519.pub
fingerprint: SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8
ECDSA key fingerprint is SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU.
The authenticity of host 'github.com (140.82.121.4)' can't be established.
Host key verification failed.
AWS_REGION=eu-west-1 AWS_PROFILE=staging terraform plan
kubectl -n prod get secret api-keys -o yaml
kubectl create secret tls web-tls --cert=tls.crt --key=tls.key
apiVersion: v1\\nkind: Secret\\nmetadata:\\n  name: db-credentials\\ntype: Opaque\\nstringData:\\n  username: app\\n  password: ${DB_PASSWORD}
envFrom:\\n  - secretRef:\\n      name: app-secrets-v2
- name: API_KEY\\n  valueFrom:\\n    secretKeyRef:\\n      name: openai\\n      key: api-key
volumes:\\n  - name: creds\\n    secret:\\n      secretName: gcp-sa-key-2024
serviceAccountName: ci-runner
imagePullSecrets:\\n  - name: regcred
annotations:\\n  vault.hashicorp.com/agent-inject-secret-db: "database/creds/readonly"
- uses: aws-actions/configure-aws-credentials@v4\\n  with:\\n    role-to-assume: arn:aws:iam::123456789012:role/gha\\n    aws-region: us-east-1
env:\\n  NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}
- run: echo "${{ secrets.DOCKERHUB_TOKEN }}" | docker login -u acme --password-stdin
docker login ghcr.io -u $GITHUB_ACTOR --password-stdin <<< "$GITHUB_TOKEN"
git config --global url."https://${GH_TOKEN}@github.com/".insteadOf "https://github.com/"
git remote set-url origin https://x-access-token:${GITHUB_TOKEN}@github.com/acme/app.git
pip install --extra-index-url https://__token__:${PYPI_TOKEN}@pypi.example.com/simple pkg
npm config set //npm.pkg.github.com/:_authToken '${NODE_AUTH_TOKEN}'
export OPENAI_API_KEY=$(op read op://dev/openai/credential)
export AWS_SECRET_ACCESS_KEY="$(aws configure get aws_secret_access_key)"
read -s -p "Enter token: " TOKEN && export TOKEN
curl -sS -H "PRIVATE-TOKEN: $GITLAB_TOKEN" "https://gitlab.example.com/api/v4/projects"
curl -H "Authorization: token $(gh auth token)" https://api.github.com/user
curl --header "X-Vault-Token: $VAULT_TOKEN" http://127.0.0.1:8200/v1/secret/data/app
http --auth-type=bearer --auth="$TOKEN" GET example.org
wget --header="Authorization: Bearer ${API_TOKEN}" https://example.com/file
Error: 401 Unauthorized: invalid API key provided
openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-proj-********************************************abcd.'}}
anthropic.AuthenticationError: invalid x-api-key
botocore.exceptions.NoCredentialsError: Unable to locate credentials
ERROR: (gcloud.auth.login) There was a problem refreshing your current auth tokens
fatal: Authentication failed for 'https://github.com/acme/app.git/'
remote: Invalid username or password.
psql: error: connection to server at "db" (10.0.0.5), port 5432 failed: FATAL:  password authentication failed for user "app"
WARN  [2024-05-02 10:11:12] token bucket refilled: 100 tokens
INFO  session=7f3a2c9e user_id=4312 action=checkout amount=19.99 currency=EUR
DEBUG request GET /api/v1/users?page=3&per_page=50 200 12ms
2024-05-02T10:11:12.345Z pid=4821 tid=1 level=warn msg="retrying" attempt=3 backoff=2s
Job 8a1f2b3c finished: 42 passed, 1 skipped, 0 failed
Successfully built 3f9d2a1b7c4e
Digest: sha256:9b2a8f7e6d5c4b3a2918273645546372819abcdefabcdefabcdefabcdefabcd
Pulling fs layer 4f4fb700ef54
commit 8f14e45fceea167a5a36dedd4bea2543d5d1a0e3\\nAuthor: Jane Doe <jane@example.com>
Merge pull request #4312 from acme/feature/token-refresh
fixup! rotate signing keys (#1234)
CVE-2024-3094 affects xz 5.6.0 and 5.6.1
id: 01HZX3K9V7Q2M8N4P6R5S1T0AB
ULID 01ARZ3NDEKTSV4RRFFQ69G5FAV, KSUID 0ujsswThIGTUYm2K8FjOOfXtY1K
nanoid V1StGXR8_Z5jdHi6B-myT
correlation-id: 6f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f
X-Request-Id: req_8d7c6b5a4f3e2d1c
Idempotency-Key: 3b1f8e2a-9c4d-4e7f-8a1b-2c3d4e5f6a7b
stripe customer: cus_NffrFeUfNV2Hib, subscription sub_1MowQVLkdIwHu7ixeRlqHVzs
PaymentIntent pi_3MtwBwLkdIwHu7ix28a3tqPa
event evt_1NG8Du2eZvKYlo2CUI79vXWy, charge ch_3MmlLrLkdIwHu7ix0snN0B15
price_1MoBy5LkdIwHu7ixZhnattbh
acct_1032D82eZvKYlo2C
whsec is the prefix of Stripe webhook signing secrets
See https://stripe.com/docs/keys#obtain-api-keys
Open https://platform.openai.com/api-keys and create a key
https://console.cloud.google.com/apis/credentials?project=my-project-123
https://github.com/settings/tokens?type=beta
https://api.slack.com/apps/A0123456789/oauth
https://app.posthog.com/project/12345/settings
https://dashboard.stripe.com/test/apikeys
https://www.npmjs.com/settings/acme/tokens/granular-access-tokens/new
https://example.com/verify?email=jane%40example.com&code=839201
https://example.com/unsubscribe?uid=42&t=1714640000
https://maps.googleapis.com/maps/api/geocode/json?address=Rome
https://www.example.com/?utm_source=newsletter&utm_medium=email&utm_campaign=spring_2024
https://cdn.example.com/assets/app.3f9a1c2b.js
https://docs.python.org/3/library/secrets.html#secrets.token_hex
s3://acme-backups/2024/05/02/db.sql.gz
gs://my-bucket/path/to/object.json
postgresql+psycopg://app@localhost/app
mongodb://localhost:27017/test
amqp://guest@rabbitmq:5672/
redis://default@redis:6379
ws://localhost:3000/socket
file:///home/jane/.config/app/settings.json
jdbc:postgresql://db.example.com:5432/app?ssl=true
The JWT has three parts: header.payload.signature, each base64url-encoded.
A token like eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0 is missing its signature.
eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9 is just the header
Bearer tokens must be sent over TLS.
Use `Authorization: Bearer <token>` for API calls.
Set the header Authorization: Basic base64(username:password)
The Basic scheme is defined in RFC 7617.
"scripts": {"build": "tsc -p .", "test": "vitest run --coverage"}
"dependencies": {"jsonwebtoken": "^9.0.2", "bcrypt": "^5.1.1", "dotenv": "^16.4.5"}
[tool.ruff]\\nline-length = 100\\nselect = ["E", "F", "S105", "S106"]
# noqa: S105 (hardcoded password false positive)
# nosec B105: this is the name of the setting, not a password
ALLOWED_HOSTS = ["localhost", "127.0.0.1", ".example.com"]
CSRF_COOKIE_SECURE = True\\nSESSION_COOKIE_HTTPONLY = True
AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"}]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.Argon2PasswordHasher"]
JWT_ALGORITHM = "RS256"\\nJWT_EXPIRATION_DELTA = timedelta(hours=1)
TOKEN_EXPIRY_SECONDS = 3600
SECRET_KEY_FALLBACKS = []
SESSION_ENGINE = "django.contrib.sessions.backends.cache"
type Config struct {\\n    APIKey string `json:"api_key" env:"API_KEY"`\\n}
APIKey string `yaml:"api_key"`
Password string `json:"password,omitempty" validate:"required,min=8"`
#[serde(rename = "apiKey")]\\npub api_key: String,
@Value("${app.jwt.secret}")\\nprivate String jwtSecret;
private static final String TOKEN_HEADER = "X-Auth-Token";
public static final String PASSWORD_PARAM = "password";
const TOKEN_STORAGE_KEY = 'app.auth.token';
localStorage.setItem('token', response.data.token);
sessionStorage.removeItem("accessToken");
document.cookie = `token=${token}; Secure; SameSite=Strict`;
res.cookie("refreshToken", refreshToken, { httpOnly: true });
<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">
<meta name="csrf-token" content="{{ csrf_token }}">
{% if user.is_authenticated %}Welcome{% endif %}
query { viewer { login } }
mutation { createToken(input: {name: "ci"}) { token } }
SELECT * FROM tokens WHERE expires_at < now();
INSERT INTO users (email, password_hash) VALUES ($1, $2);
CREATE INDEX idx_tokens_user ON tokens(user_id);
GRANT SELECT ON ALL TABLES IN SCHEMA public TO readonly;
ALTER USER app WITH PASSWORD :'new_password';
\\\\password app
ALTER ROLE app PASSWORD NULL;
mysql> SET PASSWORD FOR 'app'@'%' = PASSWORD(@new);
redis> AUTH default
127.0.0.1:6379> CONFIG SET requirepass ""
requirepass foobared
masterauth <master-password>
# requirepass foobared
vault write auth/approle/login role_id="$ROLE_ID" secret_id="$SECRET_ID"
vault kv put secret/app api_key=@api_key.txt
aws secretsmanager get-secret-value --secret-id prod/app --query SecretString --output text
gcloud secrets versions access latest --secret=db-password
az keyvault secret show --vault-name kv-prod --name api-key --query value -o tsv
op item get "Stripe" --fields label=credential
pass show work/aws | head -1
gpg --decrypt secrets.env.gpg > .env
sops -d secrets.enc.yaml
ansible-playbook site.yml --ask-vault-pass
terraform output -raw db_password
helm upgrade app ./chart --set-string secret.name=app-secret
docker secret create db_password ./db_password.txt
echo "PASSWORD=" >> .env.example
cp .env.example .env  # then fill in your keys
# .env.example\\nOPENAI_API_KEY=\\nANTHROPIC_API_KEY=\\nDATABASE_URL=postgres://user:pass@localhost:5432/db
DATABASE_URL=postgres://postgres:postgres@localhost:5432/test
REDIS_URL=redis://localhost:6379
SENTRY_DSN=https://examplePublicKey@o0.ingest.sentry.io/0
NEXT_PUBLIC_POSTHOG_HOST=https://eu.posthog.com
NEXT_PUBLIC_SUPABASE_URL=https://xyzcompany.supabase.co
VITE_API_BASE_URL=http://localhost:8000
STRIPE_PUBLISHABLE_KEY=pk_test_51H7xKzLkdIwHu7ixBQ8sL7bqUJmJbTQ5T6mMvZxZ9qS
ALGOLIA_SEARCH_ONLY_API_KEY is safe to expose in the browser
GOOGLE_CLOUD_PROJECT=my-project-123456
AZURE_TENANT_ID=72f988bf-86f1-41af-91ab-2d7cd011db47
AZURE_CLIENT_ID=04b07795-8ddb-461a-bbee-02f9e1bf7b46
ARM_SUBSCRIPTION_ID=00000000-0000-0000-0000-000000000000
TF_VAR_region=eu-west-1
CI_COMMIT_SHA=8f14e45fceea167a5a36dedd4bea2543d5d1a0e3
GITHUB_SHA=3f786850e387550fdab836ed7e6dc881de23001b
GITHUB_RUN_ID=9012345678
HOME=/home/runner
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin
SHELL=/bin/zsh
EDITOR=nvim
SSH_AUTH_SOCK=/tmp/ssh-XXXXabcd/agent.1234
GPG_TTY=$(tty)
KUBECONFIG=~/.kube/config:~/.kube/staging
Password: ••••••••
Enter passphrase for key '/home/jane/.ssh/id_ed25519':
[sudo] password for jane:
Password for 'https://jane@github.com':
Login succeeded
Your identification has been saved in /home/jane/.ssh/id_ed25519
The key's randomart image is:
mfa_code: 123456
otp: 492039
pin: 1234
verification code 839201 expires in 10 minutes
Your one-time code is 839201
invite code: WELCOME2024
coupon: SPRING25
promo_code = "SAVE20NOW"
license: MIT
license_key_file: /etc/app/license.lic
product key field is required
key_id = "2024-05-rotation"
kid: "a1b2c3"
x5t: "NjVBRjY5MDlCMUIwNzU4RTA2QzZFMDQ4QzQ2MDAyQjVDNjk1RTM2Qg"
nonce: "n-0S6_WzA2Mj"
state=af0ifjsldkj&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM
code_verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
salt = os.urandom(16)
iv = b"\\x00" * 16
checksum: 5d41402abc4b2a76b9719d911017c592
sha1sum: 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12
blake3: af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262
crc32: 414fa339
git lfs pointer: oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393
version https://git-lfs.github.com/spec/v1
integrity sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==
resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#679591c564c3bffaae8454cf0b3df370c3d6911c"
"packages/app/node_modules/.bin/jest": "../jest/bin/jest.js"
go.sum: golang.org/x/crypto v0.21.0 h1:X31++rzVUdKhX5sWmSOFZxx8UW/ldWx55cbf08iNAMA=
github.com/stretchr/testify v1.9.0/go.mod h1:r2ic/lqez/lEtzL7wO/rwa5dbSLXVDPFyf8C91i36aY=
<PackageReference Include="Newtonsoft.Json" Version="13.0.3" />
<add key="ClientValidationEnabled" value="true" />
<add key="webpages:Version" value="3.0.0.0" />
<add key="CacheDurationSeconds" value="3600" />
<add key="StorageContainer" value="uploads-2024" />
<setting name="ApiBaseUrl" serializeAs="String"><value>https://api.example.com</value></setting>
<key>CFBundleIdentifier</key><string>com.example.app</string>
<machineKey validationKey="AutoGenerate,IsolateApps" decryptionKey="AutoGenerate,IsolateApps" />
keystore.password=${KEYSTORE_PASSWORD}
storePassword System.getenv("STORE_PASSWORD")
signingConfigs { release { keyAlias 'upload'; keyPassword System.getenv('KEY_PASSWORD') } }
android:name="com.google.android.geo.API_KEY" android:value="@string/maps_api_key"
"apiKey": "@string/google_api_key"
apiKey: import.meta.env.VITE_FIREBASE_API_KEY,
authDomain: "my-app-12345.firebaseapp.com",
messagingSenderId: "123456789012",
appId: "1:123456789012:web:abcdef1234567890",
measurementId: "G-ABCDEF1234",
projectId: "my-app-12345",
storageBucket: "my-app-12345.appspot.com",
"client_id": "123456789012-abc.apps.googleusercontent.com", "auth_uri": "https://accounts.google.com/o/oauth2/auth"
"token_uri": "https://oauth2.googleapis.com/token", "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs"
"type": "service_account", "project_id": "demo-project", "client_email": "ci@demo-project.iam.gserviceaccount.com"
ssh -i ~/.ssh/deploy_key deploy@10.0.0.12 -p 2222
scp -P 2222 build.tgz deploy@host:/srv/app/
rsync -avz -e "ssh -p 2222" ./dist/ deploy@host:/srv/app
openssl req -new -x509 -key server.key -out server.crt -days 365 -subj "/CN=example.com"
openssl rand -base64 32
openssl pkcs12 -in cert.p12 -nodes -passin env:P12_PASSWORD
openssl enc -aes-256-cbc -pbkdf2 -in secrets.txt -out secrets.enc -pass file:./key.txt
keytool -importkeystore -srckeystore a.p12 -srcstoretype pkcs12 -deststorepass:env STOREPASS
htpasswd -c /etc/nginx/.htpasswd admin
mysqladmin -u root password
mongosh "mongodb+srv://cluster0.example.mongodb.net/" --apiVersion 1 --username admin
psql "host=db port=5432 dbname=app user=app sslmode=require"
redis-cli -h redis -p 6379 --tls
sqlcmd -S localhost -U sa -P "$SA_PASSWORD" -Q "SELECT 1"
ldapsearch -x -H ldap://ldap.example.com -b "dc=example,dc=com" -D "cn=admin,dc=example,dc=com" -W
The token budget is 200k tokens per minute (TPM) and 10k requests per minute.
GPT-4o costs $2.50 per 1M input tokens.
Token limit exceeded: 131072 tokens requested, 128000 allowed.
Each key in the map is a string; each value a list.
Use a composite key (tenant_id, created_at) for the sort order.
Press Ctrl+Shift+P, then type "Preferences: Open Keyboard Shortcuts".
The secret sauce is caching the embeddings.
My password manager generated a 24-character password for the bank.
I changed my password yesterday; the old one no longer works.
Rotate credentials every 90 days; our policy is in docs/security.md.
The API key for staging lives in the team vault under "staging/openai".
We never commit .env files; see .gitignore.
Remember to revoke the GitHub token after the migration.
Tokens created before 2024-01-01 were revoked.
password-protected zip files are not accepted
passwordless login via magic links
The passphrase dialog appears twice on macOS 14.
"token" and "key" are reserved words in our DSL.
"""


def code_and_docs() -> list[str]:
    """Code and prose around credentials, in many languages, with no credential in them."""
    return [
        "const authKey = 'auth';", "primaryKey: 'id'", "sortKey: \"created_at\"", "const cacheKey = `user:${id}`",
        "foreignKey: 'userId'", "partitionKey = '/pk'", "hashKey: 'pk'", "rangeKey: 'sk'",
        "export const STORAGE_KEY = 'app-state-v3';", "const TOKEN_KEY = 'auth_token';", "LOCAL_STORAGE_KEY = \"qmem.settings.2\"",
        "apiKeyHeader: 'X-API-Key'", "key: 'value'", "keyPrefix: 'sess:'", "KEY_LENGTH = 32", "key_size=2048", "ssh_key_path: ~/.ssh/id_ed25519",
        "secretKeyRef:\n  name: mysecret\n  key: api-key", "password: ${{ secrets.DB_PASSWORD }}", "token: ${{ github.token }}",
        "with:\n  token: ${{ secrets.GITHUB_TOKEN }}", "AWS_SECRET_ACCESS_KEY: ${{ secrets.AWS_SECRET_ACCESS_KEY }}",
        "api_key = os.environ.get('API_KEY', '')", "token = os.environ['TOKEN']", "secret = config['secret']",
        "password = getpass.getpass()", "password=input('Password: ')", "DB_PASSWORD = env('DB_PASSWORD')",
        "spring.datasource.password=${DB_PASSWORD}", "password: !!str ${PASS}", "token: !env_var GITHUB_TOKEN",
        "curl -u \"$CI_USER:$CI_TOKEN\" https://x.example", "curl -u ${USER}:${PASS} https://x.example",
        "docker run -u 1000:1000 -p 8080:80 nginx", "docker run --user 1000:1000 img", "docker exec -u www-data:www-data app ls",
        "git push -u origin main", "ps -u root", "sort -u file.txt", "mkdir -p /var/lib/app", "ssh -p 2222 me@host",
        "docker run -p 5432:5432 postgres", "mysql -u root -p appdb", "pip install -U pip", "tar -xzf a.tgz -C /opt",
        "npm publish --access public", "kubectl get pods -n kube-system", "helm install x --set image.tag=v1.2.3",
        "terraform apply -var 'region=eu-west-1'", "--token-file /var/run/secrets/token", "--password-file=/run/pw",
        "The tokens are refreshed every 3600 seconds.", "Password must be at least 8 characters long and contain 1 digit.",
        "the key is in the vault", "The API key is stored in AWS Secrets Manager.", "the password is in 1password",
        "password is required", "the password is 12 characters long", "The secret is to use a bloom filter.",
        "token is valid for 3600s", "the key is 'id'", "password was reset on 2024-05-01",
        "SHA256 of the file: " + r(HEX,64), "git rev-parse HEAD => " + r(HEX,40), "uuid: " + "550e8400-e29b-41d4-a716-446655440000",
        "md5sum: " + r(HEX,32), "docker image id sha256:" + r(HEX,64), "ETag: W/\"" + r(HEX,32) + "\"",
        "https://github.com/owner/repo/commit/" + r(HEX,40), "https://example.com/download?id=" + r(HEX,32) + "&format=zip",
        "https://s3.amazonaws.com/bucket/key.txt?versionId=" + r(ALNUM,32), "https://www.google.com/search?q=api+key+rotation",
        "https://example.com/oauth/authorize?client_id=abc123&redirect_uri=https://x.example/cb&response_type=code",
        "https://calendar.google.com/calendar/ical/abc%40group.calendar.google.com/public/basic.ics",
        "data: " + base64.b64encode(RNG.randbytes(120)).decode(), "\"sig\": \"" + r(ALNUM,43) + "\"",
        "eyJhbGciOiJub25lIn0", "a.eyJ.b", "JWT = header.payload.signature",
        "sk-learn is not a package name; use scikit-learn", "risk-ant-api03-foo", "task_live_update", "ask_live_question",
        "disk_test_results_2024_05_01_and_more_text", "hf_transfer enabled", "npm_package_version=1.2.3",
        "AKIA is the prefix of long-lived AWS access key ids", "The Slack token prefix xoxb- denotes a bot.",
        "ghp_ tokens expire", "Use the `sk_live_` key only on the server.", "key-value pairs", "monkey-patching",
        "dapi is the Databricks prefix", "SG. prefixed keys are SendGrid's", "AC account SIDs start with AC",
        "the private_key_id field", "AccountKey= is followed by the base64 key", "xapp-1-...",
        "Authorization: Basic", "basic auth is enabled", "Basic dXNlcg==", "use Basic authentication",
        "Authorization: Digest username=\"Mufasa\", realm=\"x\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\"",
        "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=" + r(HEX,64),
        "Authorization: Negotiate", "WWW-Authenticate: Bearer error=\"invalid_token\"",
        "password123 is a terrible password", "Don't use 'Password1!' anywhere.",
        "secret_santa_2024", "secrets.token_hex(16)", "my-secret-name", "tokenizer.json", "token.json",
        "TOKENIZERS_PARALLELISM=false", "MAX_TOKENS=4096", "OPENAI_API_BASE=https://api.openai.com/v1",
        "ANTHROPIC_BASE_URL=http://localhost:8080", "GITHUB_TOKEN_PATH=/run/secrets/gh", "PASSWORD_MIN=12",
        "CREDENTIALS_FILE=/etc/creds.json", "key_file: /etc/ssl/private/server.key", "tls.key: /certs/tls.key",
        "ssl_key = \"/etc/nginx/ssl/key.pem\"", "private_key_path = \"~/.ssh/id_rsa\"", "privateKeyFile: ./keys/dev.pem",
        "<password>${db.password}</password>", "<apiKey>${env.API_KEY}</apiKey>",
        "Password=;", "Pwd=;", "User ID=sa;Password=<password>;",
        "netrc: machine github.com login x-access-token password $GITHUB_TOKEN",
        "I logged in with my password and it worked.", "login failed: password incorrect",
        "2024-05-01 12:00:00 user=admin action=login result=ok ip=10.0.0.1",
        "client_id: 1234567890-abc123def456.apps.googleusercontent.com",
        "GOOGLE_CLIENT_ID=1234567890-" + r("abcdefghijklmnopqrstuvwxyz0123456789",32) + ".apps.googleusercontent.com",
        "twilio account sid AC" + r(HEX,32), "Stripe customer cus_" + r(ALNUM,14), "charge ch_" + r(ALNUM,24), "price_" + r(ALNUM,24),
        "pi_" + r(ALNUM,24) + "_secret_" + r(ALNUM,25),
        "arn:aws:kms:us-east-1:123456789012:key/" + "1234abcd-12ab-34cd-56ef-1234567890ab",
        "publishableKey: 'pk_live_" + r(ALNUM,24) + "'", "VITE_SUPABASE_ANON_KEY=sb_publishable_" + r(URLSAFE,31),
        "font-family: -apple-system, BlinkMacSystemFont", "color: #ff00ff; --token-color: #fff",
        "--primary-key-color: #123456", "token_count: 1234567", "session_key_ttl = 86400",
        "keyboard shortcut: Ctrl+K", "private: true", "secret: false", "secret: true", "token: null", "password: ''",
        "password: \"\"", "api_key: ~", "key: 12345", "access_key_id: AKIAXXXXXXXXXXXXXXXX",
    ]


def negatives() -> list[str]:
    hand = [line.replace("\\n", "\n") for text in (HANDWRITTEN, HANDWRITTEN_MORE)
            for line in text.splitlines() if line.strip()]
    return hand + code_and_docs() + placeholders() + generated_negatives()


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


# The first wave's Slack and Discord webhooks are one family now.
RENAMED = {"slack-webhook": "webhook-url", "discord-webhook": "webhook-url"}


def write(name: str, positives: list[tuple[str, str, str]], negatives: list[str], seen: set[str]) -> None:
    with open(HERE / f"positives{name}.jsonl", "w", encoding="ascii", newline="\n") as f:
        for family, text, secret in positives:
            f.write(line({"family": RENAMED.get(family, family), "text": text, "secret": secret}) + "\n")
    with open(HERE / f"negatives{name}.jsonl", "w", encoding="ascii", newline="\n") as f:
        for text in negatives:
            if text not in seen:
                seen.add(text)
                f.write(line({"family": None, "text": text}) + "\n")


def main() -> None:
    first = token_positives() + contextual_positives()
    seen: set[str] = set()
    write("", first, negatives(), seen)
    count = len(seen)
    second = second_wave.positives()
    write("2", second, second_wave.negatives(), seen)
    for name, positives, benign in (("first", first, count), ("second", second, len(seen) - count)):
        families = {RENAMED.get(family, family) for family, _, _ in positives}
        print(f"{name} wave: {len(positives)} positives over {len(families)} families, {benign} negatives")


if __name__ == "__main__":
    main()
