"""Tests for qmem.secretscan.

Every credential here is assembled at run time from pieces, so that this file
holds nothing that a repository secret scanner would flag.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import string
import time
import unittest

from qmem.secretscan import FAMILIES, Finding, describe, first_finding, scan, scan_values

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
URLSAFE = ALNUM + "_-"


def rand(alphabet: str, length: int, seed: int = 0) -> str:
    """A reproducible random string that contains upper case, lower case and a digit
    whenever the alphabet has them."""
    rng = random.Random(f"{alphabet}/{length}/{seed}")
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(length))
        wanted = [set(alphabet) & set(group) for group in
                  (string.ascii_uppercase, string.ascii_lowercase, string.digits)]
        if all(not group or set(text) & group for group in wanted):
            return text


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_jwt(header: dict | None = None, payload: dict | None = None) -> str:
    header = {"alg": "HS256", "typ": "JWT"} if header is None else header
    payload = {"sub": "1234567890", "name": "John Doe", "iat": 1516239022} \
        if payload is None else payload
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(payload).encode()),
                     rand(URLSAFE, 43)])


GITHUB = "gh" + "p_" + rand(ALNUM, 36)
GITHUB_PAT = "github" + "_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)
GITLAB = "gl" + "pat-" + rand(URLSAFE, 20)
SLACK_BOT = "xo" + "xb-" + "123456789012-1234567890123-" + rand(ALNUM, 24)
SLACK_USER = "xo" + "xp-" + "1234567890-1234567890-1234567890-" + rand("0123456789abcdef", 32)
ANTHROPIC = "sk-" + "ant-api03-" + rand(URLSAFE, 93) + "AA"
OPENAI_PROJECT = "sk-" + "proj-" + rand(URLSAFE, 120)
OPENAI_CLASSIC = "sk-" + rand(ALNUM, 48)
AWS_EXAMPLE_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
AWS_TEMPORARY = "AS" + "IA" + rand(UPPER_ALNUM, 16)
GOOGLE = "AI" + "za" + rand(URLSAFE, 35)
NPM = "np" + "m_" + rand(ALNUM, 36)
PYPI = "py" + "pi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 120)
HUGGINGFACE = "h" + "f_" + rand(string.ascii_letters, 34)
JWT = make_jwt()
BASIC = base64.b64encode(b"deploy:hunter22").decode()

# family -> [(text, the part of it a finding must cover)]
POSITIVES: dict[str, list[tuple[str, str]]] = {
    "github-token": [
        (f"export GH_TOKEN={GITHUB}", GITHUB),
        (f"cloned with {GITHUB} yesterday", GITHUB),
        (f"token: {GITHUB_PAT}", GITHUB_PAT),
        ("gho_" + GITHUB[4:] + " (oauth)", "gho_" + GITHUB[4:]),
        ("(ghs_" + GITHUB[4:] + ")", "ghs_" + GITHUB[4:]),
    ],
    "gitlab-token": [
        (f"GITLAB_TOKEN={GITLAB}", GITLAB),
        (f"use {GITLAB} for the runner", GITLAB),
    ],
    "slack-token": [
        (f"bot token {SLACK_BOT}", SLACK_BOT),
        (f"SLACK={SLACK_USER}", SLACK_USER),
    ],
    "anthropic-key": [
        (f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
        (f"the key '{ANTHROPIC}' was rotated", ANTHROPIC),
    ],
    "openai-key": [
        (f"OPENAI_API_KEY={OPENAI_PROJECT}", OPENAI_PROJECT),
        (f"old key {OPENAI_CLASSIC} revoked", OPENAI_CLASSIC),
    ],
    "aws-access-key": [
        (f"aws_access_key_id = {AWS_EXAMPLE_ID}", AWS_EXAMPLE_ID),
        (f"temporary {AWS_TEMPORARY}.", AWS_TEMPORARY),
    ],
    "google-api-key": [
        (f"https://maps.googleapis.com/maps/api/js?key={GOOGLE}&callback=x", GOOGLE),
        (f"firebase apiKey {GOOGLE}", GOOGLE),
    ],
    "npm-token": [
        (f"//registry.npmjs.org/:_authToken={NPM}", NPM),
        (f"npm token {NPM} for CI", NPM),
    ],
    "pypi-token": [
        (f"password = {PYPI}", PYPI),
        (f"twine upload -p {PYPI} dist/*", PYPI),
    ],
    "huggingface-token": [
        (f"HF_TOKEN={HUGGINGFACE}", HUGGINGFACE),
        (f"login with {HUGGINGFACE}", HUGGINGFACE),
    ],
    "private-key": [
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow…", "-----BEGIN RSA PRIVATE KEY-----"),
        ("key:\n-----BEGIN PRIVATE KEY-----\n", "-----BEGIN PRIVATE KEY-----"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ("x -----BEGIN EC PRIVATE KEY----- y", "-----BEGIN EC PRIVATE KEY-----"),
        ("-----BEGIN DSA PRIVATE KEY-----", "-----BEGIN DSA PRIVATE KEY-----"),
        ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "-----BEGIN ENCRYPTED PRIVATE KEY-----"),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
    ],
    "jwt": [
        (f"id_token={JWT}", JWT),
        (f"Authorization: Bearer {JWT}", JWT),
        (make_jwt({"alg": "RS256", "kid": "k1"}, {"iss": "x"}),
         make_jwt({"alg": "RS256", "kid": "k1"}, {"iss": "x"})),
    ],
    "credential-url": [
        ("db at postgres://app:" + "s3cr3t-Pw@db.internal:5432/app", "s3cr3t-Pw"),
        ("redis://:" + "p4ssw0rd@cache:6379/0", "p4ssw0rd"),
        ("see https://api.example.com/v1/items?limit=5&api_key=" + "9f8e7d6c5b4a&x=1",
         "9f8e7d6c5b4a"),
        ("(https://cdn.example.com/f.zip?sv=2021&sig=" + "AbC123%2Bxyz%3D)", "AbC123%2Bxyz%3D"),
        ("https://app.example.com/cb#access_token=" + "ya29.a0Af1234&state=s", "ya29.a0Af1234"),
    ],
    "bearer-token": [
        ("Authorization: Bearer " + "0123456789abcdefABCDEF", "0123456789abcdefABCDEF"),
        ("curl -H 'authorization: bearer " + "tok_9a8b7c6d5e4f3a2b1c'", "tok_9a8b7c6d5e4f3a2b1c"),
    ],
    "basic-auth": [
        (f"Authorization: Basic {BASIC}", BASIC),
        (f'headers = {{"Authorization": "Basic {BASIC}"}}', BASIC),
    ],
    "credential-assignment": [
        ("password=" + "hunter22", "hunter22"),
        ('{"password": "' + "c0rrect-h0rse" + '"}', "c0rrect-h0rse"),
        ("api_key = '" + "a1b2c3d4e5f6" + "'", "a1b2c3d4e5f6"),
        ("AWS_SECRET_ACCESS_KEY=" + AWS_EXAMPLE_SECRET, AWS_EXAMPLE_SECRET),
        ("clientSecret: " + "Zx9-Qw8-Er7", "Zx9-Qw8-Er7"),
        ("passwd: " + "Tr0ub4dor&3", "Tr0ub4dor"),
        ("run it with --db-password=" + "pa55word!", "pa55word!"),
        ("X-Api-Key: " + "5f4dcc3b5aa7", "5f4dcc3b5aa7"),
        ("note: password=" + "hunter22.", "hunter22"),
        ("secret_key => " + '"' + "k#9Lm!2pQ" + '"', "k#9Lm!2pQ"),
    ],
}

# family -> texts that must produce no finding at all (near misses).
NEGATIVES: dict[str, list[str]] = {
    "github-token": [
        "use a GitHub token (ghp_…) here",
        "my_" + GITHUB,                      # inside a longer identifier
        "x" + GITHUB,
        GITHUB + "x",                        # 37 characters
        GITHUB[:-1],                         # 35 characters
        "ghx_" + GITHUB[4:],
        "github_pat_" + rand(ALNUM, 22),
    ],
    "gitlab-token": ["glpat-" + rand(URLSAFE, 19), "myglpat-" + rand(URLSAFE, 20),
                     "create a glpat- token in settings"],
    "slack-token": ["xoxb-your-token-here", "set SLACK to an xoxb- token",
                    "axoxb-123-" + rand(ALNUM, 24), "xoxb-123-abc"],
    "anthropic-key": ["sk-ant-...", "sk-ant-api03-" + rand(URLSAFE, 10),
                      "task-ant-api03-" + rand(URLSAFE, 60)],
    "openai-key": ["sk-proj-abc", "sk-" + rand(ALNUM, 47), "sk-" + rand(ALNUM, 49),
                   "risk-proj-" + rand(URLSAFE, 60), "keys start with sk-"],
    "aws-access-key": ["AKIA" + rand(UPPER_ALNUM, 15), AWS_EXAMPLE_ID + "X",
                       "akia" + rand(UPPER_ALNUM, 16).lower(), "XAKIA" + rand(UPPER_ALNUM, 16),
                       "ABIA" + rand(UPPER_ALNUM, 16)],
    "google-api-key": ["AIza" + rand(URLSAFE, 34), "AIza" + rand(ALNUM, 36),
                       "xAIza" + rand(URLSAFE, 35)],
    "npm-token": ["npm_" + rand(ALNUM, 35), "npm_config_registry", "my_npm_" + rand(ALNUM, 36)],
    "pypi-token": ["pypi-simple-index", "pypi-AgE" + rand(URLSAFE, 20),
                   "pypi-" + "a-really-long-package-name-that-goes-on-and-on-and-on-and-on"],
    "huggingface-token": ["hf_" + rand(string.ascii_lowercase, 34),   # an identifier
                          "hf_" + rand(string.ascii_letters, 20),
                          "xhf_" + rand(string.ascii_letters, 34)],
    "private-key": ["-----BEGIN PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----",
                    "-----BEGIN RSA PUBLIC KEY-----", "begin private key", "BEGIN PRIVATE KEY"],
    "jwt": [
        make_jwt({"typ": "JWT"}),                                   # header without alg
        ".".join(JWT.split(".")[:2]) + ".abc",                      # short signature
        "JWTs look like eyJhbGciOi... and are signed",
        "eyJ" + rand(ALNUM, 30) + ".eyJ" + rand(ALNUM, 30) + "." + rand(ALNUM, 30),  # not JSON
    ],
    "credential-url": [
        "scheme://user:pass@host",
        "https://user:${PASSWORD}@example.com",
        "ssh://git@github.com/owner/repo.git",
        "https://example.com/callback?token=",
        "https://example.com/search?key=frontend&page=2",
        "https://example.com/?token=<token>",
        "https://example.com:8443/path?page_token=abc123def456",
    ],
    "bearer-token": ["Authorization: Bearer <token>", "Authorization: Bearer $TOKEN",
                     "the bearer token is sent in a header",
                     "Bearer tokenauthenticationscheme"],
    "basic-auth": ["Authorization: Basic <credentials>",
                   "Basic " + BASIC,                           # no Authorization header
                   "Authorization: Basic " + base64.b64encode(b"helloworld").decode()],
    "credential-assignment": [
        "the password field", "password reset flow", "token=", "password=",
        "password: required", "password = os.environ['PW']", "password = get_password()",
        "password=self.password", "password=***", "password=<redacted>",
        "password=${DB_PASSWORD}", "password=$DB_PASSWORD", "password=changeme123",
        "password=abc1", "max_tokens=4096", "next_page_token=CAUQAA12345",
        "api_key: YOUR_API_KEY", 'password = "correct horse battery 9"',
        "password: Optional[str] = None", "secret_key = os.urandom(32)",
        "password_min_length=12", "password=letmein",
    ],
}

BENIGN_PROSE = """\
The password reset flow sends an e-mail; the password field needs 12 characters.
Set GITHUB_TOKEN in your environment and never commit it; CI reads
token: ${{ secrets.GITHUB_TOKEN }} and curl sends "Authorization: Bearer $TOKEN".

    def login(user: str, password: Optional[str] = None) -> Session:
        token = request.headers.get("Authorization")
        password = os.environ["DB_PASSWORD"]
        api_key: str = settings.API_KEY
        if password == confirm_password:
            password_hash = bcrypt.hashpw(password, salt)
        max_tokens = 4096

Clone with git clone git@github.com:owner/repo.git, browse
https://docs.github.com/en/authentication/managing-your-personal-access-tokens
and connect to postgres://localhost:5432/app. -----BEGIN CERTIFICATE----- is fine.
"""


class FamilyTests(unittest.TestCase):

    def test_every_family_has_positives_and_negatives(self) -> None:
        self.assertEqual(set(POSITIVES), set(FAMILIES))
        self.assertEqual(set(NEGATIVES), set(FAMILIES))
        for family in FAMILIES:
            with self.subTest(family):
                self.assertGreaterEqual(len(POSITIVES[family]), 2)
                self.assertGreaterEqual(len(NEGATIVES[family]), 2)

    def test_positives_are_found_at_the_right_offsets(self) -> None:
        for family, cases in POSITIVES.items():
            for text, secret in cases:
                with self.subTest(family, text=text[:40]):
                    findings = scan(text)
                    self.assertEqual(len(findings), 1, findings)
                    finding = findings[0]
                    self.assertEqual(finding.family, family)
                    self.assertEqual(text[finding.start:finding.end], secret)
                    self.assertEqual(finding.start, text.index(secret))

    def test_negatives_are_not_found(self) -> None:
        for family, texts in NEGATIVES.items():
            for text in texts:
                with self.subTest(family, text=text[:40]):
                    self.assertEqual(scan(text), [])

    def test_benign_developer_text(self) -> None:
        self.assertEqual(scan(BENIGN_PROSE), [])
        self.assertEqual(scan(""), [])

    def test_aws_documentation_keys_are_findings(self) -> None:
        # A deliberate decision (see the module docstring): no exemptions.
        self.assertEqual([f.family for f in scan(AWS_EXAMPLE_ID)], ["aws-access-key"])
        text = f"aws_secret_access_key = {AWS_EXAMPLE_SECRET}"
        self.assertEqual([f.family for f in scan(text)], ["credential-assignment"])
        # On its own the secret key is just a base64 string.
        self.assertEqual(scan(AWS_EXAMPLE_SECRET), [])


class ResultTests(unittest.TestCase):

    def test_multiple_findings_in_order(self) -> None:
        text = (f"github {GITHUB}\n"
                f"password=hunter22 and {AWS_EXAMPLE_ID}\n"
                "-----BEGIN OPENSSH PRIVATE KEY-----\n"
                f"{JWT}")
        findings = scan(text)
        self.assertEqual([f.family for f in findings],
                         ["github-token", "credential-assignment", "aws-access-key",
                          "private-key", "jwt"])
        self.assertEqual([text[f.start:f.end] for f in findings],
                         [GITHUB, "hunter22", AWS_EXAMPLE_ID,
                          "-----BEGIN OPENSSH PRIVATE KEY-----", JWT])
        self.assertEqual(findings, sorted(findings, key=lambda f: f.start))

    def test_several_secrets_in_one_url(self) -> None:
        text = "https://u:" + "pw-9x8y7z@h.example/p?token=" + "abc123def&q=1#sig=" + "zz99yy88"
        findings = scan(text)
        self.assertEqual([f.family for f in findings], ["credential-url"] * 3)
        self.assertEqual([text[f.start:f.end] for f in findings],
                         ["pw-9x8y7z", "abc123def", "zz99yy88"])

    def test_specific_family_wins_an_overlap(self) -> None:
        for text, family in [
            (f"GITHUB_TOKEN={GITHUB}", "github-token"),
            (f"Authorization: Bearer {JWT}", "jwt"),
            (f"https://example.com/hook?token={SLACK_BOT}", "slack-token"),
            (f'"api_key": "{OPENAI_CLASSIC}"', "openai-key"),
        ]:
            with self.subTest(family):
                self.assertEqual([f.family for f in scan(text)], [family])

    def test_first_finding(self) -> None:
        self.assertIsNone(first_finding(BENIGN_PROSE))
        text = f"password=hunter22 then {GITHUB}"
        self.assertEqual(first_finding(text), scan(text)[0])
        self.assertEqual(first_finding(text).family, "credential-assignment")

    def test_scan_values_scans_each_value_separately(self) -> None:
        values = ["fine", f"key {GOOGLE}", "also fine", f"pw: x and {NPM}"]
        pairs = scan_values(values)
        self.assertEqual([(i, f.family) for i, f in pairs],
                         [(1, "google-api-key"), (3, "npm-token")])
        index, finding = pairs[1]
        self.assertEqual(values[index][finding.start:finding.end], NPM)
        self.assertEqual(scan_values(iter([])), [])

    def test_scan_values_does_not_join_values(self) -> None:
        self.assertEqual(scan_values([GITHUB[:20], GITHUB[20:]]), [])
        self.assertEqual(scan_values(["password=", "hunter22"]), [])

    def test_non_str_input_is_a_type_error(self) -> None:
        for bad in (None, b"password=hunter22", 12, ["x"]):
            with self.subTest(bad=bad):
                with self.assertRaises(TypeError):
                    scan(bad)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            scan_values(["ok", b"bytes"])  # type: ignore[list-item]

    def test_finding_is_frozen_and_plain(self) -> None:
        finding = Finding("jwt", 1, 5)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            finding.start = 0  # type: ignore[misc]
        self.assertEqual(finding, Finding("jwt", 1, 5))
        self.assertEqual([f.name for f in dataclasses.fields(Finding)],
                         ["family", "start", "end"])


class DisclosureTests(unittest.TestCase):

    def test_secret_never_in_repr_or_describe(self) -> None:
        for family, cases in POSITIVES.items():
            for text, secret in cases:
                with self.subTest(family, text=text[:40]):
                    findings = scan(text)
                    self.assertTrue(findings)
                    shown = repr(findings) + str(findings) + describe(findings)
                    self.assertNotIn(secret, shown)
                    # Not even a recognisable piece of it.
                    self.assertNotIn(secret[-6:], shown)

    def test_describe(self) -> None:
        findings = scan(f"{GITHUB} {JWT} {GITHUB}")
        message = describe(findings)
        self.assertEqual(
            message,
            "text looks like it contains a credential (github-token, jwt); "
            "remove it and store a reference instead")
        self.assertNotIn("\n", message)
        self.assertEqual(describe(iter(findings)), message)

    def test_describe_needs_a_finding(self) -> None:
        with self.assertRaises(ValueError):
            describe([])


class LinearTimeTests(unittest.TestCase):
    """Guards against quadratic blow-up on hostile input, not a benchmark."""

    SIZE = 10**6
    LIMIT_SECONDS = 2.0

    def adversarial_inputs(self) -> dict[str, str]:
        pieces = ["a", "-----BEGIN ", "eyJ", "password=", "eyJa.", "https://", "ghp_",
                  "Bearer ", 'x="', "a=", "http://a/?token=abc123&", "password=hunter22 "]
        inputs = {repr(piece): (piece * (self.SIZE // len(piece) + 1))[:self.SIZE]
                  for piece in pieces}
        inputs["long value"] = "a=" + "b" * self.SIZE
        inputs["unclosed quote"] = 'password="' + "b" * self.SIZE
        inputs["long url"] = "https://a:" + "b" * self.SIZE
        inputs["long jwt header"] = "eyJ" + "a" * self.SIZE + ".eyJ"
        return inputs

    def test_adversarial_input_scans_quickly(self) -> None:
        for name, text in self.adversarial_inputs().items():
            with self.subTest(name):
                started = time.perf_counter()
                scan(text)
                self.assertLess(time.perf_counter() - started, self.LIMIT_SECONDS)


if __name__ == "__main__":
    unittest.main()
