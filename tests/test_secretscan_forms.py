"""Tests for the scanner's detection by form and context (issue 28): one test per class of form.

Each class is tried over several spellings made here at run time (so that this file holds
nothing a repository scanner would flag), beside the look-alikes that must stay benign.  The
tune half of ``tests/corpora/secrets/forms`` is checked exactly; its held-out half is read by
``scripts/bench_secretscan.py`` alone.  The last tests go through ``qmem_store`` and the MCP
server, where a refused text must never reach the gateway.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import subprocess
import sys
import unittest
from pathlib import Path

from qmem.secretscan.engine import scan

from .support import GatewayTestCase

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
FORMS = Path(__file__).resolve().parent / "corpora" / "secrets" / "forms"


def rand(alphabet: str, length: int, seed: object = 0) -> str:
    rng = random.Random(f"forms/{alphabet}/{length}/{seed}")
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(length))
        if all(set(text) & set(g) for g in (string.ascii_uppercase, string.ascii_lowercase, string.digits)
               if set(alphabet) & set(g)):
            return text


PASSWORD = rand(ALNUM, 11, "pw") + "#" + "7"
TOKEN = rand(ALNUM, 40, "token")


def found(text: str, secret: str) -> bool:
    at = text.find(secret)
    return any(f.start < at + len(secret) and f.end > at for f in scan(text))


class Case(unittest.TestCase):
    def assert_found(self, texts: list[str], secret: str | None = None) -> None:
        for text in texts:
            with self.subTest(text=text[:80]):
                if secret is None:
                    self.assertTrue(scan(text), "not found")
                else:
                    self.assertTrue(found(text, secret), "not found over the credential")

    def assert_benign(self, texts: list[str]) -> None:
        for text in texts:
            with self.subTest(text=text[:80]):
                self.assertEqual(scan(text), [])


def pem_lines(seed: int = 0, lines: int = 4) -> str:
    return "\n".join(rand(B64, 64, (seed, i)) for i in range(lines))


class KeyContainerTests(Case):
    """Key material in any container, public key material not."""

    def test_pem_blocks_of_any_private_label(self) -> None:
        for label in ("ML-DSA-65 PRIVATE KEY", "ED25519 PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "TSS2 PRIVATE KEY"):
            self.assert_found([f"-----BEGIN {label}-----\n{pem_lines()}\n-----END {label}-----"])
        hex_lines = "\n".join(rand("0123456789abcdef", 32, i) for i in range(6))
        self.assert_found([f"<tls-auth>\n-----BEGIN OpenVPN Static key V1-----\n{hex_lines}\n"
                           "-----END OpenVPN Static key V1-----\n</tls-auth>"])
        self.assert_benign([f"-----BEGIN PUBLIC KEY-----\n{pem_lines(1)}\n-----END PUBLIC KEY-----",
                            f"-----BEGIN CERTIFICATE-----\n{pem_lines(2)}\n-----END CERTIFICATE-----"])

    def test_ssh2_and_putty_keys(self) -> None:
        body = pem_lines(3)
        self.assert_found([f'---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "rsa-key, me@host"\n{body}\n'
                           "---- END SSH2 ENCRYPTED PRIVATE KEY ----"], body[:30])
        self.assert_found([f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 1\n{body[:64]}\n"
                           f"Private-Lines: 2\n{body[65:194]}\nPrivate-MAC: {rand('0123456789abcdef', 64)}"],
                          body[65:95])
        self.assert_benign([f"---- BEGIN SSH2 PUBLIC KEY ----\nComment: \"rsa-key\"\n{body}\n---- END SSH2 PUBLIC KEY ----",
                            f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\n{body[:129]}"])

    def test_pem_wrapped_in_base64(self) -> None:
        label = "RSA PRIVATE " + "KEY"
        wrapped = base64.b64encode(f"-----BEGIN {label}-----\n{pem_lines(4)}\n-----END {label}-----\n".encode()).decode()
        cert = base64.b64encode(f"-----BEGIN CERTIFICATE-----\n{pem_lines(5)}\n".encode()).decode()
        self.assert_found([f"    client-key-data: {wrapped}", f"data:\n  tls.key: {wrapped}", f"KEY_B64={wrapped}"],
                          wrapped[:30])
        self.assert_benign([f"    certificate-authority-data: {cert}", f"client-certificate-data: {cert}"])

    def test_jwk_private_members_but_not_public_keys(self) -> None:
        member = base64.urlsafe_b64encode(random.Random(1).randbytes(32)).decode().rstrip("=")
        for private in ({"kty": "EC", "crv": "P-256", "x": member[::-1], "y": member[1:], "d": member},
                        {"kty": "oct", "k": member}, {"kty": "OKP", "crv": "Ed25519", "x": member[2:], "d": member}):
            self.assert_found([json.dumps(private), json.dumps({"keys": [private]}, indent=2), repr(private),
                               "{" + ", ".join(f"{k}: '{v}'" for k, v in private.items()) + "}"], member)
        self.assert_benign([json.dumps({"kty": "EC", "crv": "P-256", "x": member, "y": member[::-1]}),
                            json.dumps({"keys": [{"kty": "RSA", "n": member * 8, "e": "AQAB", "kid": "a"}]})])

    def test_wallet_keys_by_their_checksum(self) -> None:
        alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

        def base58(data: bytes) -> str:
            number, out = int.from_bytes(data, "big"), ""
            while number:
                number, digit = divmod(number, 58)
                out = alphabet[digit] + out
            return out
        payload = b"\x80" + random.Random(2).randbytes(32) + b"\x01"
        wif = base58(payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4])
        broken = base58(payload + b"\0\0\0\0")
        self.assert_found([f"import this: {wif}", f"wif={wif}"], wif)
        self.assert_benign([f"import this: {broken}"])
        extended = "x" + "prv9s21ZrQH143K" + rand(alphabet, 95)
        self.assert_found([f"root: {extended}"], extended)


class AssignmentTests(Case):
    """An assignment in any syntax and language, its value judged whole."""

    def test_a_value_is_judged_whole_with_its_equals_signs(self) -> None:
        for value in ("Xk9=defGHIJ12345xyz", "5=9*7xqYpvyhP__7w4", "cYf=cLtBV4fO5iMI"):
            self.assert_found([f"DB_PASSWORD={value}", f"MAIL_PASSWORD: {value}", f"password={value}&user=u"], value)
        self.assert_benign(["Cookie: theme=dark; lang=en", "token_url=https://auth.example.org/token"])

    def test_the_word_for_password_in_many_languages(self) -> None:
        words = ["mot de passe", "contraseña", "senha", "Passwort", "wachtwoord", "lösenord", "passord", "salasana",
                 "hasło", "heslo", "пароль", "şifre", "κωδικός", "jelszó", "parolă", "密码", "密碼", "パスワード",
                 "비밀번호", "كلمة المرور", "סיסמה", "رمز عبور", "पासवर्ड", "รหัสผ่าน", "mật khẩu", "kata sandi"]
        self.assertGreaterEqual(len(words), 20)
        for word in words:
            self.assert_found([f"{word}: {PASSWORD}", f"{word} = {PASSWORD}", f'"{word}": "{PASSWORD}"',
                               f"{word}\uff1a{PASSWORD}"], PASSWORD)
        self.assert_benign(['"password": "請輸入密碼（至少8位）"', '"password": "パスワード"', "password=Kennwort",
                            'msgid "Enter password:"\nmsgstr "Introduzca la contraseña:"', "Passwort: ********",
                            "mot de passe : <votre mot de passe>", '"token": "Jeton d\'accès"'])

    def test_prose_separators_in_many_languages(self) -> None:
        self.assert_found([f"Password - {PASSWORD}", f"password -> {PASSWORD}", f"das Passwort ist {PASSWORD}",
                           f"la contraseña es {PASSWORD}", f"o senha é {PASSWORD}", f"le mot de passe est {PASSWORD}",
                           f"Kennwort lautet {PASSWORD}", f"密码是{PASSWORD}", f"パスワードは{PASSWORD}", f"пароль - {PASSWORD}",
                           f'<password value="{PASSWORD}"/>', f"pwd={PASSWORD}"], PASSWORD)
        self.assert_benign(["Password - required", "password -> hashed", "das Passwort ist erforderlich",
                            "la contraseña es obligatoria", "密码是必填项", '<password value="${PW}"/>', "pwd=/home/me"])

    def test_short_names_suffixes_and_other_nouns(self) -> None:
        self.assert_found([f'{name} = "{PASSWORD}"' for name in ("pw", "pwd", "psw", "tok", "db_pw", "admin_pwd")]
                          + [f"{name}={TOKEN}" for name in ("DB_PASSWORD_PROD", "API_TOKEN_V2", "SECRET_KEY_BASE",
                                                            "JWT_SECRET_B64", "PASSWORD_SALT", "WIFI_PSK", "SMTP_CREDS",
                                                            "DEPLOYER_PK", "DEVICE_PIN_CODE")], None)
        self.assert_benign(["pwd = os.getcwd()", "tok = tokens[i]", "pw = getpass.getpass()", "pk = 42",
                            "password_min_length = 12", "PASSWORD_HASHERS = ['argon2']", "spin = 3.5"])

    def test_a_name_and_a_value_on_a_line_of_their_own(self) -> None:
        self.assert_found([f"bind 127.0.0.1\nrequirepass {PASSWORD}\n", f"masterauth {PASSWORD}",
                           f"ENV POSTGRES_PASSWORD {PASSWORD}", f"set -x API_TOKEN {TOKEN}",
                           f'    storePassword "{PASSWORD}"', f'10.0.0.1 10.0.0.2 : PSK "{PASSWORD}"'], None)
        self.assert_benign(["password reset links expire after 24 hours", "requirepass foobared",
                            "ENV PASSWORD_MIN_LENGTH 12", "token rotation every 90 days", "set -x EDITOR vim"])

    def test_yaml_block_scalars_tags_and_tuples(self) -> None:
        self.assert_found([f"password: |\n  {PASSWORD}\n", f"secret: >-\n    {PASSWORD}\n", f"token: !!str {PASSWORD}",
                           f'user, password = "admin", "{PASSWORD}"'], PASSWORD)
        self.assert_benign(["password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256", 'user, role = "admin", "owner"'])

    def test_names_and_values_in_separate_fields(self) -> None:
        self.assert_found([f'{{"name": "DB_PASSWORD", "value": "{PASSWORD}"}}',
                           f"env:\n  - name: API_TOKEN\n    value: {TOKEN}",
                           f'variable "db_password" {{\n  default = "{PASSWORD}"\n}}',
                           f'<string name="api_key">{TOKEN}</string>', f"<key>ClientSecret</key>\n<string>{TOKEN}</string>",
                           f"define('DB_PASSWORD', '{PASSWORD}');", f'localStorage.setItem("token", "{TOKEN}");',
                           f"| host | user | password |\n|---|---|---|\n| db1 | admin | {PASSWORD} |"], None)
        self.assert_benign(['- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db\n      key: password',
                            '<string name="password">Password</string>', 'getenv("API_TOKEN", "default")',
                            "| field | meaning |\n|---|---|\n| password | the user's password |"])


class CookieTests(Case):
    def test_session_cookies_wherever_cookies_are_written(self) -> None:
        session = rand(string.ascii_lowercase + string.digits, 32, "sid")
        self.assert_found([f"Cookie: theme=dark; sessionid={session}", f"Set-Cookie: PHPSESSID={session}; path=/",
                           f"set-cookie: connect.sid=s%3A{session}.{TOKEN[:20]}; HttpOnly",
                           f"curl -b 'session={session}' https://h.example", f'cookies={{"sessionid": "{session}"}}',
                           f'document.cookie = "sid={session}; path=/";'], session)
        self.assert_benign([f"Cookie: csrftoken={TOKEN[:32]}; theme=light", "Set-Cookie: PHPSESSID=deleted; expires=0",
                            'Set-Cookie: sessionid=""; Max-Age=0', "The sessionid cookie is HttpOnly.",
                            "Cookie: _ga=GA1.2.1234567890.1712000000"])


class SplitLiteralTests(Case):
    def test_pieces_are_joined_before_judging(self) -> None:
        token = "gh" + "p_" + rand(ALNUM, 36, "split")
        self.assert_found([f'token = "{token[:10]}" + "{token[10:25]}" + "{token[25:]}"',
                           f"t = ('{token[:12]}'\n     '{token[12:]}')", f'String t = "{token[:20]}" +\n    "{token[20:]}";'],
                          token[:10])
        self.assert_found([f"password = '{PASSWORD[:4]}' . '{PASSWORD[4:]}'", f'$secret = "{PASSWORD[:5]}" "{PASSWORD[5:]}";'],
                          PASSWORD[:4])
        self.assert_benign(['"Hello, " + name + "!"', 'msg = "Enter your " + "password"', '"abc" "def"',
                            'err = "invalid " + "credentials"'])


class CallTests(Case):
    def test_secrets_passed_to_calls_that_authenticate(self) -> None:
        rng = random.Random(3)
        seed = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(30)) + "23"
        self.assert_found([f'client.login("admin", "{PASSWORD}")', f'requests.get(u, auth=("admin", "{PASSWORD}"))',
                           f'ds.setPassword("{PASSWORD}");', f'config.setApiToken("{TOKEN}")', f'ApiClient("{TOKEN}")',
                           f'wandb.login(key="{TOKEN}")', f'Client(key="{TOKEN}")'], None)
        self.assert_found([f'pyotp.TOTP("{seed}")', f'ROTP::TOTP.new("{seed}")', f"totp_seed = '{seed}'"], seed)
        self.assert_benign(['Client("localhost", 8080)', 'login("admin")', 'sdk.init("production")',
                            f'git.checkout("{rand("0123456789abcdef", 40)}")', "totp = pyotp.TOTP(user.otp_secret)",
                            'Client(key="id")', f'Client("AC{rand("0123456789abcdef", 32)}", "[redacted: twilio-key]")'])

    def test_seeds_shown_in_groups_of_four(self) -> None:
        rng = random.Random(4)
        seed = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(30)) + "27"
        grouped = " ".join(seed[i:i + 4] for i in range(0, 32, 4))
        self.assert_found([f"2FA setup key: {grouped}", f"MFA seed:\n{grouped}"], grouped[:9])
        self.assert_found([f"Your authenticator secret: {grouped.upper()}"], grouped[:9].upper())
        self.assert_benign(["key: abcd efgh ijkl mnop qrst", "totp_period = 30", "2FA: use an app (TOTP, 6 digits)"])

    def test_the_google_authenticator_example_is_decided_by_the_placeholder_rule(self) -> None:
        # JBSWY3DPEHPK3PXP does not say it is an example, so it is a seed like any other (README).
        self.assert_found(["secret=JBSWY3DPEHPK3PXP", "otpauth://totp/Example:alice?secret=JBSWY3DPEHPK3PXP"])
        self.assert_benign(["secret=EXAMPLEBASE32SEED", "secret=<base32 seed>"])


class CommandLineTests(Case):
    def test_password_options_of_more_programs(self) -> None:
        self.assert_found([f"zip -P {PASSWORD} out.zip dir", f"7z a -p{PASSWORD} out.7z dir", f"sqlcmd -U sa -P {PASSWORD}",
                           f"keytool -list -storepass {PASSWORD} -keystore k.jks", f"smbclient //fs/s -U admin%{PASSWORD}",
                           f"xfreerdp /v:h /u:admin /p:{PASSWORD}", f"cmdkey /add:h /user:admin /pass:{PASSWORD}",
                           f"net user backup {PASSWORD} /add", f"mytool --db-pass={PASSWORD}",
                           f'$p = ConvertTo-SecureString "{PASSWORD}" -AsPlainText -Force',
                           f"echo '{PASSWORD}' | sudo -S apt update", f"echo {PASSWORD} | passwd --stdin root",
                           f'printf "{PASSWORD}" | docker login -u me --password-stdin', f"sudo -S <<< '{PASSWORD}' ls"],
                          PASSWORD)
        self.assert_benign(['zip -P "$ZIP_PASSWORD" out.zip dir', "msbuild /p:Configuration=Release",
                            "openssl enc -in a -out b -pass file:./key.txt", "keytool -list -storepass:env SP",
                            "docker login --password-stdin", "net user backup * /add",
                            'echo "$PW" | docker login --password-stdin', "echo hello | wc -c", "echo done | sudo tee log"])

    def test_sql(self) -> None:
        self.assert_found([f"CREATE USER 'app'@'%' IDENTIFIED BY '{PASSWORD}';", f"ALTER ROLE app PASSWORD '{PASSWORD}';",
                           f"create user app identified by {PASSWORD};"], PASSWORD)
        self.assert_benign(["IDENTIFIED BY is followed by the password in single quotes.",
                            "ALTER ROLE app PASSWORD NULL;"])


class LookAlikeTests(Case):
    """Hashes, ids, integrity strings, images, documentation and code that reads a secret."""

    def test_benign_look_alikes(self) -> None:
        hex40, hex64 = rand("0123456789abcdef", 40), rand("0123456789abcdef", 64)
        digest = base64.b64encode(random.Random(5).randbytes(48)).decode()
        image = "iVBORw0KGgoAAAANSUhEUgAA" + base64.b64encode(random.Random(6).randbytes(90)).decode()
        self.assert_benign([f"commit {hex40}", f"sha256: {hex64}", f'integrity="sha384-{digest}"', f"image: a@sha256:{hex64}",
                            "request_id=0f8b6c1e-3a7d-4b2c-9e1f-5a6b7c8d9e0f", f'<img src="data:image/png;base64,{image}">',
                            "DB_PASSWORD: 2026-07-18T10:00:00Z", 'token := os.Getenv("API_TOKEN")',
                            "Passwords must be at least 12 characters long and contain a digit.",
                            "Das Passwort muss mindestens 12 Zeichen lang sein.", "密码长度至少为8位，且必须包含数字。"])


class CorpusOfFormsTests(unittest.TestCase):
    """The tune half of the corpus of forms, exactly (the held-out half is the benchmark's)."""

    def test_the_tune_half(self) -> None:
        with open(FORMS / "tune.jsonl", encoding="utf-8") as f:
            cases = [json.loads(line) for line in f if line.strip()]
        self.assertGreaterEqual(len({c["family"] for c in cases if c["family"]}), 30)
        for case in cases:
            with self.subTest(case["family"] or case["form"], text=case["text"][:60]):
                if case["family"]:
                    self.assertTrue(found(case["text"], case["secret"]))
                else:
                    self.assertEqual(scan(case["text"]), [])

    def test_the_generator_writes_the_files_it_is_checked_in_with(self) -> None:
        done = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import make_forms; "
                               "print(json.dumps({h: [make_forms.line(r) for r in rows] "
                               "for h, rows in make_forms.cases().items()}))".replace("json.dumps", "__import__('json').dumps"),
                               str(FORMS)], capture_output=True, text=True, timeout=120, check=True)
        written = json.loads(done.stdout)
        for half in ("tune", "heldout"):
            with self.subTest(half=half):
                self.assertEqual((FORMS / f"{half}.jsonl").read_text(encoding="ascii").splitlines(), written[half])
        forms = {json.loads(line)["family"] for half in written.values() for line in half} - {None}
        self.assertGreaterEqual(len(forms), 60)


class StorePathTests(GatewayTestCase):
    """A text the scanner refuses never leaves: not through qmem_store, not through MCP."""

    TEXTS = [f"db creds: Passwort: {PASSWORD}", f"Cookie: sessionid={rand(string.ascii_lowercase + string.digits, 32)}",
             f"PuTTY-User-Key-File-3: ssh-ed25519\nPrivate-Lines: 2\n{pem_lines(7)[:129]}",
             f"token = \"{('gh' + 'p_' + rand(ALNUM, 36, 'store'))[:12]}\" + \"{('gh' + 'p_' + rand(ALNUM, 36, 'store'))[12:]}\""]

    def test_qmem_store_refuses_each_form(self) -> None:
        from qmem.store import ToolError, qmem_store
        rt = self.runtime()
        for text in self.TEXTS:
            with self.subTest(text=text[:40]), self.assertRaises(ToolError) as caught:
                qmem_store(rt, {"text": text, "project_id": "p", "kind": "fact"})
            self.assertIn("credential", str(caught.exception))
            self.assertNotIn(PASSWORD, str(caught.exception))
        self.assertEqual(self.gateway.requests, [])
        self.assertEqual(rt.index.status().records, 0)

    def test_mcp_qmem_store_refuses_each_form(self) -> None:
        lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}]
        lines += [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "qmem_store", "arguments": {"text": text, "project_id": "p"}}}
                  for i, text in enumerate(self.TEXTS, 1)]
        proc = subprocess.run([sys.executable, "-m", "qmem.mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                              capture_output=True, text=True, env=self.env, cwd=self.home, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        answers = [json.loads(line) for line in proc.stdout.splitlines()]
        for answer in answers[1:]:
            with self.subTest(id=answer["id"]):
                self.assertTrue(answer["result"]["isError"])
                self.assertIn("credential", answer["result"]["content"][0]["text"])
        self.assertNotIn(PASSWORD, proc.stdout + proc.stderr)
        self.assertEqual(self.gateway.requests, [])


if __name__ == "__main__":
    unittest.main()
