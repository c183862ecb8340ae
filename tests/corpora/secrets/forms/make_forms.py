"""Write the scanner's corpus of forms: ``tune.jsonl`` and ``heldout.jsonl``.

    python tests/corpora/secrets/forms/make_forms.py

The first two waves (``../*.jsonl``) name 97 families, mostly by vendor.  This corpus is of
*forms*: the containers key material comes in, the syntaxes an assignment is written in, the
languages a password is asked for in, cookies, split literals, service configuration lines,
short names, TOTP seeds -- and the benign texts that look most like them (placeholders, digests,
UUIDs, integrity strings, images, documentation about passwords, code that reads a secret,
translations of "Enter password:").

Each form is one generator, seeded by its own name, so that adding a form changes no other.
The forms are split in two by a hash of their name: ``tune.jsonl`` is what the scanner is tuned
on, ``heldout.jsonl`` what it is measured on and never tuned on (``scripts/bench_secretscan.py``
prints its recall and false positives; nothing else reads it).  A held-out form is a generator
the tuning never saw, so a rule that fits one example of the tune half does not carry over.

Each line: ``{"family": "form:<name>", "text": "...", "secret": "..."}`` for a credential
(``secret`` a part of the text that a finding must overlap) or ``{"family": null, "form":
"<name>", "text": "..."}`` for a benign text.  Every value is synthetic: random characters
from a seeded generator, never a real key; like the first waves, the writer escapes every
eighth character of long runs as ``\\uXXXX`` so that repository scanners do not flag the file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
PER_POSITIVE_FORM = 6
PER_BENIGN_FORM = 32

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"
B32 = UPPER + "234567"
SYMBOLS = "!#%&*+-=?@^_~$"


class Gen:
    """A form's random source and the value makers built on it."""

    def __init__(self, name: str) -> None:
        self.rng = random.Random(hashlib.sha256(name.encode()).digest())

    def choice(self, items):
        return self.rng.choice(items)

    def r(self, alphabet: str, n: int) -> str:
        groups = [set(alphabet) & set(g) for g in (UPPER, LOWER, DIGITS)]
        while True:
            text = "".join(self.rng.choice(alphabet) for _ in range(n))
            if n < 10 or all(not g or set(text) & g for g in groups):
                return text

    def password(self) -> str:
        return self.choice([
            lambda: self.r(ALNUM, 10) + self.choice("!#%&*@^"),
            lambda: self.r(ALNUM + SYMBOLS, 18),
            lambda: self.choice(["Falcon", "Harbor", "Juniper", "Maple", "Orbit"]) + str(self.rng.randint(10, 99))
            + self.choice("!#$%") + self.r(ALNUM, 4),
            lambda: self.r(ALNUM, 3) + "=" + self.r(ALNUM + "*_", 12),
            lambda: self.r(LOWER + DIGITS, 14),
            lambda: self.r(ALNUM, 16),
        ])()

    def token(self, n: int = 40) -> str:
        return self.choice([lambda: self.r(ALNUM, n), lambda: self.r(HEX, n), lambda: self.r(URLSAFE, n)])()

    def b64(self, nbytes: int) -> str:
        return base64.b64encode(self.rng.randbytes(nbytes)).decode()

    def b64url(self, nbytes: int) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(nbytes)).decode().rstrip("=")

    def b32(self, n: int = 32) -> str:
        while True:
            text = "".join(self.rng.choice(B32) for _ in range(n))
            if sum(c.isdigit() for c in text) >= 2:
                return text

    def word(self) -> str:
        return self.choice(["alpha", "billing", "staging", "orders", "ledger", "atlas", "relay", "harbor"])

    def hexs(self, n: int) -> str:
        return self.r(HEX, n)


POSITIVE: dict[str, Callable[[Gen], tuple[str, str]]] = {}
BENIGN: dict[str, Callable[[Gen], str]] = {}


def positive(name: str):
    def register(maker):
        POSITIVE[name] = maker
        return maker
    return register


def benign(name: str):
    def register(maker):
        BENIGN[name] = maker
        return maker
    return register


def pem_body(g: Gen, lines: int = 4, width: int = 64) -> str:
    data = g.b64(lines * width * 3 // 4)
    return "\n".join(data[i:i + width] for i in range(0, len(data), width))


def pem(g: Gen, label: str, lines: int = 4) -> str:
    return f"-----BEGIN {label}-----\n{pem_body(g, lines)}\n-----END {label}-----"


# --- key material in its containers ------------------------------------------------

@positive("pem-label-variants")
def _(g):
    label = g.choice(["ENCRYPTED PRIVATE KEY", "ED25519 PRIVATE KEY", "X25519 PRIVATE KEY", "TSS2 PRIVATE KEY",
                      "SM2 PRIVATE KEY", "ML-DSA-65 PRIVATE KEY", "X448 PRIVATE KEY", "ANY PRIVATE KEY"])
    block = pem(g, label)
    return g.choice(["{}", "key.pem:\n{}", "```\n{}\n```"]).format(block), block.splitlines()[1]


@positive("pem-openvpn-static-key")
def _(g):
    lines = "\n".join(g.hexs(32) for _ in range(8))
    block = f"-----BEGIN OpenVPN Static key V1-----\n{lines}\n-----END OpenVPN Static key V1-----"
    return g.choice(["<tls-auth>\n{}\n</tls-auth>", "ta.key:\n{}", "<secret>\n{}\n</secret>"]).format(block), \
        block.splitlines()[1]


@positive("pem-in-json-string")
def _(g):
    label = g.choice(["PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY"])
    body = g.b64(120)
    text = json.dumps({g.choice(["signingKey", "tls_key", "key"]): f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"})
    return text, body[:40]


@positive("putty-ppk")
def _(g):
    algo = g.choice(["ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256"])
    pub = pem_body(g, 2)
    priv = pem_body(g, g.choice([1, 3, 5]))
    n_priv = len(priv.splitlines())
    version = g.choice(["2", "3"])
    text = (f"PuTTY-User-Key-File-{version}: {algo}\nEncryption: none\nComment: {g.word()}-key-2024\n"
            f"Public-Lines: {len(pub.splitlines())}\n{pub}\nPrivate-Lines: {n_priv}\n{priv}\n"
            f"Private-MAC: {g.hexs(64)}")
    if g.rng.random() < 0.3:
        text = text.split("Private-Lines", 1)[1]
        text = "...\nPrivate-Lines" + text
    return text, priv.splitlines()[0][:40]


@positive("ssh2-tectia-block")
def _(g):
    label = g.choice(["SSH2 ENCRYPTED PRIVATE KEY", "SSH2 PRIVATE KEY"])
    body = pem_body(g, 5, 70)
    comment = g.choice([f'Comment: "{g.word()} 2048-bit rsa, {g.word()}@host"', f"Comment: {g.word()}-key"])
    text = f"---- BEGIN {label} ----\n{comment}\n{body}\n---- END {label} ----"
    return text, body.splitlines()[1][:40]


@positive("base64-wrapped-pem")
def _(g):
    label = g.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    wrapped = base64.b64encode(pem(g, label, 6).encode() + b"\n").decode()
    template = g.choice([
        "users:\n- name: admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {v}",
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {cert}\n  tls.key: {v}",
        "SSH_PRIVATE_KEY_B64={v}",
        '{{"deployKey": "{v}"}}',
    ])
    cert = base64.b64encode(pem(g, "CERTIFICATE", 3).encode()).decode()
    return template.format(v=wrapped, cert=cert), wrapped[:40]


@positive("jwk-private-members")
def _(g):
    kind = g.choice(["RSA", "EC", "oct", "OKP"])
    if kind == "RSA":
        key = {"kty": "RSA", "n": g.b64url(256), "e": "AQAB", "d": g.b64url(256), "p": g.b64url(128),
               "q": g.b64url(128), "dp": g.b64url(128), "dq": g.b64url(128), "qi": g.b64url(128)}
        secret = key["d"]
    elif kind == "EC":
        key = {"kty": "EC", "crv": "P-256", "x": g.b64url(32), "y": g.b64url(32), "d": g.b64url(32)}
        secret = key["d"]
    elif kind == "oct":
        key = {"kty": "oct", "kid": g.word(), "alg": "HS256", "k": g.b64url(32)}
        secret = key["k"]
    else:
        key = {"kty": "OKP", "crv": "Ed25519", "x": g.b64url(32), "d": g.b64url(32)}
        secret = key["d"]
    text = json.dumps(g.choice([key, {"keys": [key]}]), indent=g.choice([None, 2]))
    return text, secret


@positive("wireguard-keys")
def _(g):
    v = g.b64(32)
    text = g.choice([f"[Interface]\nPrivateKey = {v}\nAddress = 10.0.0.2/32",
                     f"[Peer]\nPublicKey = {g.b64(32)}\nPresharedKey = {v}\nAllowedIPs = 0.0.0.0/0"])
    return text, v


@positive("crypto-extended-private-key")
def _(g):
    v = g.choice(["xprv", "tprv"]) + "9s21ZrQH143K" + g.r("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", 95)
    return g.choice(["wallet root: {}", "XPRV={}", '"xpriv": "{}"']).format(v), v


# --- assignments in every syntax ------------------------------------------------------

@positive("unquoted-value-with-equals")
def _(g):
    v = g.r(ALNUM, g.choice([1, 2, 3])) + "=" + g.r(ALNUM + "*_", 14)
    name = g.choice(["DB_PASSWORD", "MAIL_PASSWORD", "SMTP_PASS", "API_SECRET", "ADMIN_TOKEN"])
    return g.choice(["{n}={v}", "{n}: {v}", "export {n}={v}", "  {n} = {v}"]).format(n=name, v=v), v


@positive("toml-ini-sections")
def _(g):
    v = g.password()
    return g.choice([f"[database]\nhost = \"db\"\npassword = \"{v}\"", f"[smtp]\nuser=mailer\npass={v}\n",
                     f"[auth]\nclient_secret = '{v}'"]), v


@positive("xml-attributes-and-elements")
def _(g):
    v = g.password()
    return g.choice([f'<datasource user="app" password="{v}" url="jdbc:h2:mem"/>',
                     f"<credentials>\n  <username>deploy</username>\n  <password>{v}</password>\n</credentials>",
                     f'<Connection Secret="{v}" />']), v


@positive("hcl-terraform")
def _(g):
    v = g.password()
    return g.choice([f'resource "aws_db_instance" "db" {{\n  username = "admin"\n  password = "{v}"\n}}',
                     f'variable "db_password" {{\n  default = "{v}"\n}}',
                     f'provider "x" {{\n  api_token = "{v}"\n}}']), v


@positive("keyword-arguments")
def _(g):
    v = g.password()
    return g.choice([f'psycopg2.connect(host="db", user="app", password="{v}")',
                     f"pymysql.connect(host='db', user='root', passwd='{v}', db='{g.word()}')",
                     f'Redis(host="cache", port=6379, password="{v}")',
                     f'client = Client(api_secret="{v}")']), v


@positive("setter-and-builder-calls")
def _(g):
    v = g.password()
    return g.choice([f'ds.setPassword("{v}");', f'builder.password("{v}").build()', f"conn.set_password('{v}')",
                     f'config.setApiToken("{v}");', f'opts.withSecret("{v}")']), v


@positive("cli-long-flags")
def _(g):
    v = g.password()
    return g.choice([f"mytool deploy --password {v} --yes", f"app --db-pass={v}", f"sync --client-secret '{v}'",
                     f"run --api-token {v}", f"backup --passphrase=\"{v}\""]), v


@positive("cli-single-dash-long-options")
def _(g):
    v = g.password()
    return g.choice([f"keytool -importkeystore -srckeystore a.p12 -srcstorepass {v} -deststorepass {v}",
                     f"keytool -genkey -alias app -keypass {v} -keystore k.jks",
                     f"jarsigner -storepass {v} app.jar alias"]), v


@positive("cli-archive-and-db-flags")
def _(g):
    v = g.r(ALNUM, 12) + g.choice("!#%")
    return g.choice([f"zip -P {v} backup.zip data/", f"unzip -P {v} backup.zip", f"7z a -p{v} out.7z dir",
                     f"sqlcmd -S db -U sa -P {v} -Q \"select 1\"", f"smbclient //fs/share -U admin%{v}"]), v


@positive("cli-windows-slash-options")
def _(g):
    v = g.password()
    return g.choice([f"xfreerdp /v:host /u:admin /p:{v}", f"cmdkey /add:server01 /user:admin /pass:{v}",
                     f"net use Z: \\\\fs\\share /user:CORP\\svc {v}", f"net user backup {v} /add"]), v


@positive("powershell-securestring")
def _(g):
    v = g.password()
    return g.choice([f'$pw = ConvertTo-SecureString "{v}" -AsPlainText -Force',
                     f"ConvertTo-SecureString -String '{v}' -AsPlainText -Force",
                     f'$cred = New-Object PSCredential("admin", (ConvertTo-SecureString "{v}" -AsPlainText -Force))']), v


@positive("dockerfile-and-shell-space-forms")
def _(g):
    v = g.password()
    return g.choice([f"FROM postgres:16\nENV POSTGRES_PASSWORD {v}", f"ARG NPM_TOKEN {v}",
                     f"set -x API_TOKEN {v}", f"set -gx DB_PASSWORD {v}", f"setenv SECRET_KEY {v}"]), v


@positive("gradle-signing-config")
def _(g):
    v = g.password()
    return g.choice([f"signingConfigs {{\n  release {{\n    storePassword \"{v}\"\n    keyAlias 'app'\n  }}\n}}",
                     f"    keyPassword '{v}'", f"storePassword=\"{v}\""]), v


@positive("php-define-and-tuples")
def _(g):
    v = g.password()
    return g.choice([f"define('DB_PASSWORD', '{v}');", f"define( 'AUTH_KEY', '{v}' );",
                     f'("password", "{v}")', f'os.setenv("API_TOKEN", "{v}")', f"putenv('SECRET={v}');"]), v


@positive("storage-setitem")
def _(g):
    v = g.token(40)
    return g.choice([f'localStorage.setItem("token", "{v}");', f"sessionStorage.setItem('auth_token', '{v}')",
                     f'cache.set("api_key", "{v}")', f'headers.set("X-Auth-Token", "{v}")']), v


@positive("mobile-resources")
def _(g):
    v = g.token(39)
    return g.choice([f'<string name="api_key">{v}</string>', f'<string name="client_secret">{v}</string>',
                     f"<key>APIKey</key>\n<string>{v}</string>", f"<key>ClientSecret</key><string>{v}</string>"]), v


@positive("yaml-block-scalars")
def _(g):
    v = g.password()
    return g.choice([f"password: |\n  {v}\n", f"secret: >-\n    {v}\n", f"token: !!str {v}"]), v


@positive("markdown-table-credentials")
def _(g):
    v = g.password()
    return g.choice([f"| host | user | password |\n|---|---|---|\n| db1 | admin | {v} |",
                     f"| Service | Token |\n| --- | --- |\n| ci | {v} |"]), v


@positive("keyword-with-suffix")
def _(g):
    v = g.password()
    name = g.choice(["DB_PASSWORD_PROD", "API_TOKEN_V2", "STRIPE_SECRET_LIVE", "ADMIN_PASS_OLD", "JWT_SECRET_B64",
                     "SECRET_KEY_BASE", "GITHUB_TOKEN_RW", "REDIS_PASSWORD_1", "client_secret_value"])
    return g.choice(["{n}={v}", "{n}: \"{v}\"", "{n} = '{v}'"]).format(n=name, v=v), v


@positive("other-secret-nouns")
def _(g):
    v = g.token(32)
    name = g.choice(["PASSWORD_SALT", "HASH_PEPPER", "WALLET_SEED", "DEVICE_PIN_CODE", "WIFI_PSK", "SMTP_CREDS",
                     "BASIC_AUTH", "APP_PASSCODE", "SESSION_COOKIE", "SIGNING_SALT"])
    return g.choice(["{n}={v}", "{n}: {v}", "\"{n}\": \"{v}\""]).format(n=name, v=v), v


@positive("short-key-names")
def _(g):
    v = g.password()
    name = g.choice(["pw", "pwd", "psw", "pswd", "passw", "tok", "tkn", "db_pw", "admin_pwd", "api_tok"])
    return g.choice(['{n} = "{v}"', "{n}: {v}", "{n}={v}", "let {n} = '{v}';", "{n} := \"{v}\""]).format(n=name, v=v), v


@positive("service-config-lines")
def _(g):
    v = g.password()
    return g.choice([f"# redis.conf\nbind 127.0.0.1\nrequirepass {v}\n", f"masterauth {v}",
                     f"network={{\n    ssid=\"office\"\n    psk=\"{v}\"\n}}", f"interface=wlan0\nwpa_passphrase={v}",
                     f": PSK \"{v}\"", f"10.0.0.1 10.0.0.2 : PSK '{v}'", f"bindpw {v}", f"rootpw {v}"]), v


@positive("sql-credentials")
def _(g):
    v = g.password().replace("'", "")
    return g.choice([f"CREATE USER 'app'@'%' IDENTIFIED BY '{v}';", f"ALTER USER app IDENTIFIED BY \"{v}\";",
                     f"CREATE ROLE app WITH LOGIN PASSWORD '{v}';", f"ALTER ROLE reporter PASSWORD '{v}';",
                     f"create user app identified by {v};"]), v


@positive("mail-client-configs")
def _(g):
    v = g.password()
    return g.choice([f"account work\nhost smtp.{g.word()}.io\nuser me\npassword {v}",
                     f"poll mail.{g.word()}.io protocol imap user \"me\" password \"{v}\"",
                     f"[smtp.{g.word()}.io]:587 me@{g.word()}.io:{v}", f"set imap_pass = \"{v}\""]), v


# --- passwords in other languages -------------------------------------------------------

LANGUAGES = {
    "romance": ["mot de passe", "Mot de passe", "contraseña", "Contraseña", "senha", "Senha", "parola d'ordine",
                "parolă", "contrasenya"],
    "germanic": ["Passwort", "Kennwort", "wachtwoord", "lösenord", "Lösenord", "passord", "adgangskode",
                 "lykilorð"],
    "slavic-baltic": ["пароль", "Пароль", "hasło", "Hasło", "heslo", "Heslo", "лозинка", "lozinka", "парола",
                      "geslo", "slaptažodis", "parole"],
    "cjk": ["密码", "密碼", "パスワード", "비밀번호", "암호", "口令"],
    "other-europe": ["şifre", "Şifre", "parola", "κωδικός", "Κωδικός", "salasana", "Salasana", "jelszó",
                     "Jelszó", "salasõna"],
    "asia-africa-rtl": ["كلمة المرور", "كلمة السر", "סיסמה", "رمز عبور", "पासवर्ड", "รหัสผ่าน", "mật khẩu",
                        "Mật khẩu", "kata sandi", "kata laluan", "পাসওয়ার্ড", "nenosiri"],
}
KEY_WORDS = ["clé API", "clé secrète", "API-Schlüssel", "Zugangstoken", "clave de API", "chave de API", "APIキー",
             "API 密钥", "访问令牌", "API 키", "ключ API", "токен доступа", "klucz API", "API-sleutel", "API anahtarı"]


def _localized(g: Gen, words: list[str], value: str) -> str:
    word = g.choice(words)
    colon = "：" if any("\u3000" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af" for c in word) else ":"
    return g.choice([f"{word}{colon} {value}", f"{word} = {value}", f'"{word}": "{value}"',
                     f"{g.word()}\n{word}{colon} {value}\n", f"- {word}{colon} `{value}`"])


for _group, _words in LANGUAGES.items():
    def _make(g, words=_words):
        v = g.password()
        return _localized(g, words, v), v
    POSITIVE[f"password-keyword-{_group}"] = _make


@positive("api-key-keyword-languages")
def _(g):
    v = g.token(36)
    return _localized(g, KEY_WORDS, v), v


# --- cookies and session headers -------------------------------------------------------

@positive("cookie-header-session")
def _(g):
    v = g.choice([g.r(LOWER + DIGITS, 32), g.r("abcdefghijklmnopqrstuv0123456789", 26), g.r(HEX.upper(), 32)])
    name = g.choice(["sessionid", "PHPSESSID", "JSESSIONID", "laravel_session", "_session_id", "sid", "ci_session"])
    return g.choice([f"Cookie: theme=dark; {name}={v}; lang=en", f"Cookie: {name}={v}",
                     f"cookie: {name}={v}; _ga=GA1.2.{g.rng.randint(10**8, 10**9)}.1712000000"]), v


@positive("set-cookie-session")
def _(g):
    v = g.choice(["s%3A" + g.r(URLSAFE, 32) + "." + g.b64(32).rstrip("="), g.r(ALNUM, 40), g.b64(48)])
    name = g.choice(["connect.sid", "express.sid", "rack.session", "_myapp_session", "ASP.NET_SessionId",
                     "__Secure-next-auth.session-token", "remember_user_token", "auth"])
    return g.choice([f"Set-Cookie: {name}={v}; Path=/; HttpOnly", f"set-cookie: {name}={v}; Secure; SameSite=Lax",
                     f"< Set-Cookie: {name}={v}; expires=Fri, 31 Dec 2027 23:59:59 GMT"]), v


@positive("cookie-in-tools")
def _(g):
    v = g.r(LOWER + DIGITS, 32)
    name = g.choice(["sessionid", "PHPSESSID", "session", "sid", "user_session"])
    return g.choice([f"curl -b '{name}={v}' https://app.{g.word()}.io/api", f"curl --cookie \"{name}={v}\" https://x.io",
                     f'requests.get(url, cookies={{"{name}": "{v}"}})', f'document.cookie = "{name}={v}; path=/";',
                     f"http https://x.io Cookie:{name}={v}"]), v


@positive("session-and-auth-headers")
def _(g):
    v = g.token(40)
    return g.choice([f"X-Session-Token: {v}", f"X-Auth-Token: {v}", f"PRIVATE-TOKEN: {v}", f"X-Api-Key: {v}",
                     f"-H 'X-Vault-Token: {v}'", f"Api-Key: {v}"]), v


# --- split literals ---------------------------------------------------------------------

def _pieces(value: str, g: Gen, n: int) -> list[str]:
    cuts = sorted(g.rng.sample(range(2, len(value) - 2), n - 1))
    return [value[a:b] for a, b in zip([0] + cuts, cuts + [len(value)])]


@positive("split-literals-vendor-tokens")
def _(g):
    token = g.choice(["gh" + "p_" + g.r(ALNUM, 36), "sk" + "_live_" + g.r(ALNUM, 24), "xox" + "b-" + "1234567890-"
                      + g.r(ALNUM, 24), "AKIA" + g.r(UPPER + DIGITS, 16), "gl" + "pat-" + g.r(URLSAFE, 20)])
    parts = _pieces(token, g, 3)
    join = g.choice(['"{}" + "{}" + "{}"', "'{}' '{}' '{}'", '"{}" +\n    "{}" +\n    "{}"', '("{}"\n "{}"\n "{}")'])
    return g.choice(["token = {}", "const key = {};", "String t = {};", "{}"]).format(join.format(*parts)), parts[0]


@positive("split-literals-passwords")
def _(g):
    v = g.r(ALNUM, 12) + g.choice("!#%")
    parts = _pieces(v, g, g.choice([2, 3]))
    quote = g.choice(['"', "'"])
    op = g.choice([" + ", " ", " . ", " .. ", " ++ "])
    joined = op.join(f"{quote}{p}{quote}" for p in parts)
    return g.choice(["password = {}", "DB_PASS = {}", "$secret = {};", "var pwd = {};"]).format(joined), parts[0]


@positive("split-literals-template")
def _(g):
    v = g.token(40)
    parts = _pieces(v, g, 2)
    return g.choice([f'api_key = "{parts[0]}" \\\n    "{parts[1]}"', f"const apiToken = `{parts[0]}` + `{parts[1]}`;",
                     f'#define API_SECRET "{parts[0]}" "{parts[1]}"']), parts[0]


# --- keys passed positionally, bare names ---------------------------------------------

@positive("positional-vendor-keys")
def _(g):
    v = g.choice([g.hexs(32), g.r(ALNUM, 40), g.r(URLSAFE, 43)])
    return g.choice([f'client = algoliasearch("{g.r(UPPER + DIGITS, 10)}", "{v}")', f'mp = Mixpanel("{v}")',
                     f'api = ApiClient("{v}")', f'sdk.init("{v}")', f'new Octokit({{ auth: "{v}" }})',
                     f'service = Client("{v}")', f'authenticate("{v}")', f'set_api_key("{v}")']), v


@positive("bare-key-in-auth-call")
def _(g):
    v = g.choice([g.hexs(40), g.r(ALNUM, 40)])
    return g.choice([f'wandb.login(key="{v}")', f"client.login(key='{v}')", f'Auth(key="{v}", region="eu")',
                     f'connect(host="h", key="{v}")', f'Client(key="{v}")']), v


# --- TOTP seeds -------------------------------------------------------------------------

@positive("totp-seed-in-code")
def _(g):
    v = g.b32(g.choice([16, 32]))
    return g.choice([f'totp = pyotp.TOTP("{v}")', f'ROTP::TOTP.new("{v}")', f'hotp = pyotp.HOTP("{v}")',
                     f'code = otp.totp("{v}")', f'TOTP_SEED = "{v}"', f'mfa_seed: {v}', f'"otp_seed": "{v}"']), v


@positive("totp-seed-grouped")
def _(g):
    v = g.b32(32)
    if g.rng.random() < 0.5:
        v = v.lower()
    grouped = " ".join(v[i:i + 4] for i in range(0, len(v), 4))
    return g.choice([f"2FA setup key: {grouped}", f"Your authenticator secret: {grouped}",
                     f"MFA backup seed:\n{grouped}", f"Enter this key in your app: {grouped}"]), grouped[:9]


# --- more forms: lines, pairs, tuples, wallets, messages ------------------------------

@positive("pgpass-lines")
def _(g):
    v = g.password().replace(":", "")
    return g.choice([f"db.{g.word()}.internal:5432:{g.word()}:app:{v}", f"*:*:*:replicator:{v}",
                     f"# ~/.pgpass\nlocalhost:5432:*:postgres:{v}"]), v


@positive("connection-strings")
def _(g):
    v = g.password().replace(";", "")
    return g.choice([f"Server=db;Database={g.word()};User Id=sa;Password={v};",
                     f"Data Source=db;Initial Catalog=app;User ID=app;Pwd={v}",
                     f"Driver={{ODBC Driver 18}};Server=tcp:db,1433;Uid=app;Pwd={v};Encrypt=yes;",
                     f"Host=db;Username=app;Password={v};Database={g.word()}"]), v


@positive("wifi-qr-payload")
def _(g):
    v = g.password().replace(";", "")
    return g.choice([f"WIFI:S:{g.word()}-guest;T:WPA;P:{v};;", f"WIFI:T:WPA;S:office;P:{v};H:false;;"]), v


def _base58check(payload: bytes) -> str:
    alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    data = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number = int.from_bytes(data, "big")
    out = ""
    while number:
        number, digit = divmod(number, 58)
        out = alphabet[digit] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


@positive("wallet-private-keys")
def _(g):
    wif = _base58check(b"\x80" + g.rng.randbytes(32) + g.choice([b"", b"\x01"]))
    hexkey = "0x" + g.hexs(64)
    v = g.choice([wif, hexkey])
    return g.choice([f"DEPLOYER_PK={v}", f"wif: {v}", f'"privateKey": "{v}"', f"import this key: {v}",
                     f"my wallet key {v}"]), v


@positive("basic-auth-tuples")
def _(g):
    v = g.password()
    return g.choice([f'requests.get(url, auth=("admin", "{v}"))', f'HTTPBasicAuth("deploy", "{v}")',
                     f'.basicAuth("svc", "{v}")', f'auth = ("{g.word()}", "{v}")', f'BasicAuth(login="u", password="{v}")',
                     f'client.login("admin", "{v}")']), v


@positive("name-value-pairs")
def _(g):
    v = g.password()
    name = g.choice(["DB_PASSWORD", "API_TOKEN", "SECRET_KEY", "SMTP_PASS", "CLIENT_SECRET"])
    return g.choice([f"env:\n  - name: {name}\n    value: \"{v}\"", f'{{"name": "{name}", "value": "{v}"}}',
                     f'{{ name = "{name}", value = "{v}" }}', f"- name: {name}\n  value: {v}"]), v


@positive("prose-password-phrases")
def _(g):
    v = g.r(ALNUM, 10) + g.choice("!#%&") + str(g.rng.randint(0, 9))
    return g.choice([f"use {v} as the password for the staging box", f"the new password for {g.word()} is now {v}",
                     f"pw for the vpn: {v}", f"login admin / {v}", f"creds are admin:{v}",
                     f"I set the root password to {v} yesterday"]), v


@positive("email-temporary-credentials")
def _(g):
    v = g.r(ALNUM, 10) + g.choice("!#%&")
    return g.choice([f"Your temporary password: {v}\nPlease change it after your first login.",
                     f"Hello,\nyour account was created.\nUsername: jdoe\nPassword: {v}",
                     f"Temporary passcode - {v}", f"Initial password = {v}"]), v


@positive("ansible-inventory")
def _(g):
    v = g.password()
    return g.choice([f"web1 ansible_host=10.0.0.5 ansible_user=root ansible_password={v}",
                     f"[db]\ndb1 ansible_become_pass={v}", f"ansible_ssh_pass: \"{v}\""]), v


@positive("compose-and-k8s-env")
def _(g):
    v = g.password()
    return g.choice([f"services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD={v}",
                     f"stringData:\n  password: {v}", f"    environment:\n      MYSQL_ROOT_PASSWORD: \"{v}\"",
                     f"docker run -e DB_PASS={v} app"]), v


@positive("git-credential-output")
def _(g):
    v = g.token(40)
    return g.choice([f"protocol=https\nhost=github.com\nusername=x-access-token\npassword={v}",
                     f"https://x-access-token:{v}@github.com"]), v


@positive("url-form-bodies")
def _(g):
    v = g.password().replace("&", "")
    return g.choice([f"grant_type=password&username=u&password={v}", f"-d 'client_id=app&client_secret={v}'",
                     f"--data-urlencode \"password={v}\""]), v


@positive("code-literals-other-languages")
def _(g):
    v = g.password()
    return g.choice([f":password => '{v}'", f'Password: "{v}",', f"password: '{v}',", f'@password = "{v}"',
                     f'val apiSecret = "{v}"', f'let apiToken: String = "{v}"']), v


@positive("prose-token-sentences")
def _(g):
    v = g.r(ALNUM, 40)
    return g.choice([f"here is the deploy token {v} for CI", f"The service account secret is {v}.",
                     f"paste your access key {v} into the form", f"bot token = {v}"]), v


# --- benign look-alikes -----------------------------------------------------------------

@benign("placeholders-in-assignments")
def _(g):
    v = g.choice(["<your-password>", "your_api_key_here", "${DB_PASSWORD}", "{{ .Values.password }}", "********",
                  "xxxxxxxxxxxx", "changeme", "REPLACE_ME", "<redacted>", "%SECRET%", "TODO", "..."])
    name = g.choice(["password", "DB_PASSWORD", "api_key", "client_secret", "token", "pw", "requirepass", "psk"])
    return g.choice(["{n}={v}", "{n}: {v}", '{n} = "{v}"', "{n} {v}"]).format(n=name, v=v)


@benign("placeholders-i18n")
def _(g):
    words = [w for ws in LANGUAGES.values() for w in ws]
    v = g.choice(["<votre mot de passe>", "<Passwort>", "********", "<パスワード>", "${PASSWORD}", "xxxxxxxx",
                  "<пароль>", "<contraseña>"])
    return f"{g.choice(words)}: {v}"


@benign("digests-and-commits")
def _(g):
    return g.choice([f"sha1: {g.hexs(40)}", f"sha256sum: {g.hexs(64)}  release.tar.gz", f"commit {g.hexs(40)}",
                     f"Merge {g.hexs(7)} into {g.hexs(7)}", f"checksum = \"sha256:{g.hexs(64)}\"",
                     f"image: app@sha256:{g.hexs(64)}", f"{g.hexs(64)}  ./dist/app.whl",
                     f"md5 {g.hexs(32)}", f"revision: {g.hexs(40)}", f"git checkout {g.hexs(40)}"])


@benign("integrity-strings")
def _(g):
    v = g.choice(["sha384-" + g.b64(48), "sha512-" + g.b64(64), "sha256-" + g.b64(32)])
    return g.choice([f'<script src="/app.js" integrity="{v}" crossorigin="anonymous"></script>',
                     f'"integrity": "{v}"', f"  integrity {v}", f"resolved ... integrity={v}"])


@benign("uuids-and-ids")
def _(g):
    u = "-".join(g.hexs(n) for n in (8, 4, 4, 4, 12))
    ulid = "01" + "".join(g.choice("0123456789ABCDEFGHJKMNPQRSTVWXYZ") for _ in range(24))
    return g.choice([f"request_id={u}", f'"tenant_id": "{u}"', f"trace-id: {u}", f"client_id = {u}",
                     f'"id": "{ulid}"', f"order {ulid} shipped", f"subscription_id: {u}", f"correlationId={u}"])


@benign("base64-images")
def _(g):
    data = "iVBORw0KGgoAAAANSUhEUgAA" + g.b64(90)
    return g.choice([f'<img src="data:image/png;base64,{data}">', f'"icon": "data:image/png;base64,{data}"',
                     f"background: url(data:image/png;base64,{data});", f"![logo](data:image/png;base64,{data})"])


@benign("docs-about-passwords")
def _(g):
    return g.choice([
        "Passwords must be at least 12 characters long and contain a digit and a symbol.",
        "The password field is hashed with bcrypt (cost 12) before it is stored.",
        "Set the password with `passwd` and rotate the API token every 90 days.",
        "requirepass enables AUTH; see redis.conf for the requirepass directive.",
        "Use `--password-stdin` so the password never appears in shell history.",
        "The session cookie is HttpOnly; the sessionid cookie expires after 2 weeks.",
        "psk: the pre-shared key, 8 to 63 characters (see wpa_supplicant.conf(5)).",
        "Token rotation: old tokens stay valid for 24h after a new token is issued.",
        "Le mot de passe doit contenir au moins 8 caractères.",
        "Das Passwort muss mindestens 12 Zeichen lang sein.",
        "La contraseña debe tener al menos 8 caracteres.",
        "密码长度至少为8位，且必须包含数字。",
        "パスワードは8文字以上で入力してください。",
        "비밀번호는 8자 이상이어야 합니다.",
        "Пароль должен содержать не менее 8 символов.",
        "Şifreniz en az 8 karakter olmalıdır.",
        "IDENTIFIED BY is followed by the password in single quotes.",
        "ConvertTo-SecureString converts plain text to a secure string; avoid -AsPlainText in scripts.",
    ])


@benign("code-reading-secrets")
def _(g):
    return g.choice([
        'password = os.environ["DB_PASSWORD"]', 'token := os.Getenv("API_TOKEN")',
        'String secret = System.getenv("CLIENT_SECRET");', 'secret_key_base = ENV.fetch("SECRET_KEY_BASE")',
        'let key = std::env::var("API_KEY")?;', "$password = $_ENV['DB_PASSWORD'];",
        'var apiKey = Environment.GetEnvironmentVariable("API_KEY");', "pw = getpass.getpass()",
        "pwd = os.getcwd()", "tok = tokens[i]", "tok = next(lexer)", 'psk = config["wifi"]["psk"]',
        "requirepass ${REDIS_PASSWORD}", "ENV DB_PASSWORD_FILE /run/secrets/db_password",
        "keyPassword System.getenv('KEY_PASSWORD')", 'totp = pyotp.TOTP(user.otp_secret)',
        "seed = pyotp.random_base32()", 'cookies = {"sessionid": request.cookies.get("sessionid")}',
        '$pw = Read-Host -AsSecureString', "client = Client(api_key=os.environ['API_KEY'])",
        'ds.setPassword(System.getenv("DB_PASSWORD"));', "mp = Mixpanel(settings.MIXPANEL_TOKEN)",
        "zip -P \"$ZIP_PASSWORD\" out.zip dir", "keytool -list -storepass:env STOREPASS -keystore k.jks",
    ])


@benign("i18n-ui-strings")
def _(g):
    return g.choice([
        '"login.password": "Passwort"', 'msgid "Enter password:"\nmsgstr "Introduzca la contraseña:"',
        'password_label = "Mot de passe"', '{"password": "パスワード"}', '"password": "비밀번호를 입력하세요"',
        '"passwordPlaceholder": "Введите пароль"', "password=Kennwort", "password.label=Contraseña",
        'password.required=Das Passwort ist erforderlich', '"password": "请输入密码（至少8位）"',
        '"forgot_password": "Passwort vergessen?"', 'mot de passe : 8 caractères minimum',
        '"password_hint": "Mindestens 8 Zeichen, 1 Ziffer"', 'şifre: "Şifrenizi girin"',
        '"token": "Jeton d\'accès"', '"api_key": "Clé API"', "heslo: Zadejte heslo", "密码：请输入您的密码",
        '"password": "كلمة المرور"', 'hasło: "Wpisz hasło (min. 8 znaków)"',
    ])


@benign("public-key-material")
def _(g):
    return g.choice([
        pem(g, "PUBLIC KEY", 3), pem(g, "CERTIFICATE", 5), f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.b64(32)} me@host",
        f"---- BEGIN SSH2 PUBLIC KEY ----\nComment: \"rsa-key\"\n{pem_body(g, 3, 70)}\n---- END SSH2 PUBLIC KEY ----",
        "certificate-authority-data: " + base64.b64encode(pem(g, "CERTIFICATE", 3).encode()).decode(),
        json.dumps({"kty": "RSA", "kid": g.word(), "use": "sig", "n": g.b64url(256), "e": "AQAB"}),
        json.dumps({"keys": [{"kty": "EC", "crv": "P-256", "x": g.b64url(32), "y": g.b64url(32)}]}),
        f"[Peer]\nPublicKey = {g.b64(32)}\nEndpoint = vpn.example.org:51820",
        f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\n{pem_body(g, 2)}",
    ])


@benign("cookies-without-secrets")
def _(g):
    return g.choice([
        "Cookie: theme=dark; lang=en-US", f"Cookie: _ga=GA1.2.{g.rng.randint(10**8, 10**9)}.1712000000; _gid=GA1.2.55",
        'Set-Cookie: sessionid=""; expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/',
        "Set-Cookie: session=<value>; HttpOnly; Secure", 'SESSION_COOKIE_NAME = "sessionid"',
        "app.use(session({ name: 'connect.sid', cookie: { secure: true } }))",
        f"Cookie: csrftoken={g.r(ALNUM, 32)}; theme=light", "Set-Cookie: PHPSESSID=deleted; expires=Thu, 01-Jan-1970",
        "curl -b cookies.txt https://example.org/", "Set-Cookie: consent=accepted; Max-Age=31536000",
    ])


@benign("split-literals-benign")
def _(g):
    return g.choice([
        '"Hello, " + name + "!"', 'msg = "Enter your " + "password"', '"abc" "def"',
        'label = "Pass" + "word:"', 'url = "https://" + host + "/api/" + "v2"', "path = 'a/b' 'c/d'",
        'print("token " + "expired")', 'err = "invalid " + "credentials"',
    ])


@benign("positional-calls-benign")
def _(g):
    return g.choice([
        'Client("localhost", 8080)', 'login("admin")', f'git.checkout("{g.hexs(40)}")',
        f'hashlib.sha256(b"{g.word()}").hexdigest()', 'Client("https://api.example.com/v1")',
        f'uuid.UUID("{"-".join(g.hexs(n) for n in (8, 4, 4, 4, 12))}")', 'sdk.init("production")',
        'authenticate("ldap")', f'repo.get_commit("{g.hexs(40)}")', 'set_api_key(os.environ["KEY"])',
        f'Mixpanel(settings.TOKEN).track("{g.word()}")', f'cache.get("{g.hexs(32)}")',
    ])


@benign("base32-look-alikes")
def _(g):
    cid = "bafybei" + "".join(g.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(52))
    onion = "".join(g.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(56)) + ".onion"
    return g.choice([f"ipfs://{cid}", f"cid: {cid}", f"http://{onion}/", 'ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"',
                     "totp_period = 30", "totp_digits: 6", "2FA: use an authenticator app (TOTP, 6 digits, 30 s)",
                     f"ULID {''.join(g.choice('0123456789ABCDEFGHJKMNPQRSTVWXYZ') for _ in range(26))}"])


@benign("config-lines-benign")
def _(g):
    return g.choice([
        "password_min_length = 12", "PASSWORD_HASHERS = ['argon2']", "password_reset_timeout: 3600",
        "passwordless: true", "requirepass foobared", "# requirepass yourpassword", "psk=",
        "wpa_passphrase=YourPassphrase", "token_ttl = 3600s", "pass_through = true", "auth_method = scram-sha-256",
        "bindpw_file /etc/nslcd.bindpw", "rootpw {SSHA}", "masterauth <master-password>",
        "session_timeout=1800", "ENV PASSWORD_MIN_LENGTH 12", "set -x EDITOR vim",
    ])


_NAMES = ["password", "DB_PASSWORD", "api_key", "client_secret", "token", "SECRET_KEY", "smtp_pass", "auth_token"]


@benign("references-in-values")
def _(g):
    name = g.choice(_NAMES)
    v = g.choice(["${{ secrets.%s }}" % name.upper(), "!vault |", "{{ vault_%s }}" % name.lower(),
                  "$(cat /run/secrets/%s)" % name.lower(), '"$%s"' % name.upper(), "process.env.%s" % name.upper(),
                  "ENV['%s']" % name.upper(), "settings.%s" % name.upper(), "secretKeyRef", "arn:aws:secretsmanager:"
                  "eu-west-1:123456789012:secret:%s" % g.word(), "vault:secret/data/%s#%s" % (g.word(), name.lower())])
    return g.choice(["{n}: {v}", "{n}={v}", '{n} = {v}', '"{n}": "{v}"']).format(n=name, v=v)


@benign("urls-paths-and-names")
def _(g):
    name = g.choice(_NAMES)
    v = g.choice([f"/run/secrets/{g.word()}", f"https://auth.{g.word()}.io/oauth/token", f"{g.word()}-db-password",
                  f"projects/{g.word()}/secrets/{g.word()}/versions/{g.rng.randint(1, 9)}", f"~/.config/{g.word()}/token",
                  f"{g.word()}/{g.word()}/{name.lower()}"])
    suffix = g.choice(["_file", "_url", "_name", "_path", "_ref", ""])
    return g.choice(["{n}{s}: {v}", "{n}{s}={v}", '"{n}{s}": "{v}"']).format(n=name, s=suffix, v=v)


@benign("ids-with-plain-names")
def _(g):
    name = g.choice(["build_id", "etag", "nonce_hint", "cache_key", "idempotency_key", "public_key", "commit_sha",
                     "object_id", "checksum", "digest", "fingerprint", "run_id", "key_id", "token_type", "hash"])
    v = g.choice([g.hexs(40), g.hexs(32), "-".join(g.hexs(n) for n in (8, 4, 4, 4, 12)), g.hexs(64), "Bearer",
                  str(g.rng.randint(10**5, 10**12))])
    return g.choice(["{n}: {v}", "{n}={v}", '"{n}": "{v}"', "{n} = '{v}'"]).format(n=name, v=v)


@benign("prose-with-secret-words")
def _(g):
    kw = g.choice(["password", "token", "secret", "API key", "session cookie", "passphrase", "PSK", "credentials",
                   "Passwort", "mot de passe", "contraseña", "пароль", "密码", "パスワード"])
    place = g.choice(["the vault", "1Password", "AWS Secrets Manager", "the CI settings", "a sealed secret",
                      "the team's password manager", "Kubernetes"])
    return g.choice([f"The {kw} for {g.word()} lives in {place}; ask the on-call to rotate it.",
                     f"Never paste the {kw} into chat: store a reference to {place} instead.",
                     f"Rotated the {g.word()} {kw} on {g.rng.randint(1, 28)} March; the old one is revoked.",
                     f"If the {kw} expires, run `{g.word()} login` again.",
                     f"{kw}: see {place}", f"Where is the {kw}? In {place}."])


@benign("timestamps-versions-numbers")
def _(g):
    name = g.choice(_NAMES + ["token_expiry", "password_changed_at", "secret_version", "api_version"])
    v = g.choice([f"2026-0{g.rng.randint(1, 9)}-1{g.rng.randint(0, 9)}T10:00:00Z", f"v{g.rng.randint(1, 9)}.{g.rng.randint(0, 20)}.{g.rng.randint(0, 9)}",
                  str(g.rng.randint(1, 99999)), "true", "null", "required", "optional", "3600s"])
    return g.choice(["{n}: {v}", "{n}={v}", '"{n}": "{v}"']).format(n=name, v=v)


@benign("data-blobs")
def _(g):
    v = g.b64(g.choice([96, 150, 300]))
    return g.choice([f'"data": "{v}"', f"payload={v}", f'"thumbnail": "data:image/jpeg;base64,{v}"',
                     f"font: url(data:font/woff2;base64,{v})", f"<data>{v}</data>"])


# --- writing ----------------------------------------------------------------------------

def held_out(form: str) -> bool:
    """The split: a form is held out by the first byte of a hash of its name."""
    return hashlib.sha256(f"qmem-forms/{form}".encode()).digest()[0] % 2 == 1


_RUN = re.compile(r"[A-Za-z0-9_+/=.-]{12,}")


def defused_json_string(text: str) -> str:
    escape = set()
    for run in _RUN.finditer(text):
        escape.update(range(run.start() + 1, run.end(), 8))
    return '"' + "".join(f"\\u{ord(c):04x}" if i in escape else json.dumps(c, ensure_ascii=True)[1:-1]
                         for i, c in enumerate(text)) + '"'


def line(fields: dict) -> str:
    body = ", ".join(f'"{k}": ' + ("null" if v is None else json.dumps(v) if k in ("family", "form")
                                   else defused_json_string(v)) for k, v in fields.items())
    encoded = "{" + body + "}"
    assert json.loads(encoded) == fields, fields
    return encoded


def cases() -> dict[str, list[dict]]:
    halves: dict[str, list[dict]] = {"tune": [], "heldout": []}
    for name, maker in POSITIVE.items():
        g = Gen(name)
        seen = set()
        for _ in range(PER_POSITIVE_FORM * 4):
            if len(seen) == PER_POSITIVE_FORM:
                break
            text, secret = maker(g)
            assert secret in text, (name, text)
            if text not in seen:
                seen.add(text)
                halves["heldout" if held_out(name) else "tune"].append(
                    {"family": f"form:{name}", "text": text, "secret": secret})
    for name, maker in BENIGN.items():
        g = Gen(name)
        seen = set()
        for _ in range(PER_BENIGN_FORM * 4):
            if len(seen) == PER_BENIGN_FORM:
                break
            text = maker(g)
            if text not in seen:
                seen.add(text)
                halves["heldout" if held_out(name) else "tune"].append({"family": None, "form": name, "text": text})
    return halves


def main() -> None:
    halves = cases()
    for half, rows in halves.items():
        with open(HERE / f"{half}.jsonl", "w", encoding="ascii", newline="\n") as f:
            for row in rows:
                f.write(line(row) + "\n")
    for half, rows in halves.items():
        forms = {row["family"] or row["form"] for row in rows}
        positives = sum(1 for row in rows if row["family"])
        print(f"{half}: {positives} credentials and {len(rows) - positives} benign texts over {len(forms)} forms",
              file=sys.stderr)


if __name__ == "__main__":
    main()
