"""Tests for qmem.secretscan.

The corpus (``tests/corpora/secrets/*.jsonl``, made by ``make_corpus.py`` there) holds
synthetic credentials over every family and benign texts; the checks here hold exactly on
it.  Every credential in this file is assembled at run time from pieces, so that the file
holds nothing that a repository secret scanner would flag.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import queue
import random
import re
import string
import subprocess
import sys
import threading
import unittest
from collections.abc import Iterator
from pathlib import Path

from qmem.secretrules import RULES
from qmem.secretscan import FAMILIES, Finding, describe, first_finding, redact, scan, scan_values

REPO = Path(__file__).resolve().parents[1]

CORPUS = Path(__file__).resolve().parent / "corpora" / "secrets"
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
HEX = "0123456789abcdef"


def rand(alphabet: str, length: int, seed: int = 0) -> str:
    """A reproducible random string with upper case, lower case and a digit
    whenever the alphabet has them."""
    rng = random.Random(f"{alphabet}/{length}/{seed}")
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(length))
        wanted = [set(alphabet) & set(group) for group in
                  (string.ascii_uppercase, string.ascii_lowercase, string.digits)]
        if all(not group or set(text) & group for group in wanted):
            return text


def load_corpus() -> tuple[list[dict], list[dict]]:
    cases = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            cases += [json.loads(line) for line in f if line.strip()]
    return [c for c in cases if c["family"]], [c for c in cases if not c["family"]]


POSITIVES, NEGATIVES = load_corpus()

GITHUB = "gh" + "p_" + rand(ALNUM, 36)
STRIPE = "sk" + "_live_" + rand(ALNUM, 24)
BASIC = base64.b64encode(b"deploy:hunter22").decode()
JWT = ".".join(base64.urlsafe_b64encode(part).decode().rstrip("=") for part in
               (b'{"alg":"HS256","typ":"JWT"}', b'{"sub":"1234567890"}')) + "." + rand(URLSAFE, 43)

# One sample token per prefixed family, for the placeholder rule: (family, prefix, body).
PREFIXED = [
    ("github-token", "gh" + "p_", rand(ALNUM, 36)), ("gitlab-token", "gl" + "pat-", rand(URLSAFE, 20)),
    ("slack-token", "xo" + "xb-", "123456789012-1234567890123-" + rand(ALNUM, 24)),
    ("stripe-key", "sk" + "_live_", rand(ALNUM, 24)), ("stripe-key", "rk" + "_test_", rand(ALNUM, 24)),
    ("anthropic-key", "sk-" + "ant-api03-", rand(URLSAFE, 95)), ("openai-key", "sk-" + "proj-", rand(URLSAFE, 60)),
    ("openai-key", "sk-", rand(ALNUM, 48)),
    ("aws-access-key", "AK" + "IA", rand(string.ascii_uppercase + string.digits, 16)),
    ("google-api-key", "AI" + "za", rand(URLSAFE, 35)), ("google-oauth", "GOC" + "SPX-", rand(URLSAFE, 28)),
    ("npm-token", "np" + "m_", rand(ALNUM, 36)), ("huggingface-token", "h" + "f_", rand(string.ascii_letters, 34)),
    ("sendgrid-key", "S" + "G.", rand(URLSAFE, 22) + "." + rand(URLSAFE, 43)),
    ("twilio-key", "S" + "K", rand(HEX, 32)), ("digitalocean-token", "do" + "p_v1_", rand(HEX, 64)),
    ("shopify-token", "shp" + "at_", rand(HEX, 32)), ("databricks-token", "da" + "pi", rand(HEX, 32)),
    ("mailgun-key", "ke" + "y-", rand(HEX, 32)), ("linear-key", "lin" + "_api_", rand(ALNUM, 40)),
    ("vault-token", "hv" + "s.", rand(URLSAFE, 24)), ("posthog-key", "ph" + "x_", rand(ALNUM, 43)),
    ("dockerhub-token", "dck" + "r_pat_", rand(URLSAFE, 27)), ("groq-key", "gs" + "k_", rand(ALNUM, 52)),
    ("doppler-token", "dp" + ".st.", rand(ALNUM, 43)), ("planetscale-token", "pscale" + "_pw_", rand(URLSAFE, 43)),
]


def covers(finding: Finding, text: str, secret: str) -> bool:
    at = text.find(secret)
    return finding.start <= at and finding.end >= at + len(secret)


class CorpusTests(unittest.TestCase):
    """Exact expectations on the project's own corpus."""

    def test_corpus_is_large_and_covers_every_family(self) -> None:
        self.assertGreaterEqual(len(POSITIVES), 300)
        self.assertGreaterEqual(len(NEGATIVES), 500)
        families = {case["family"] for case in POSITIVES}
        self.assertGreaterEqual(len(families), 30)
        self.assertEqual(families, set(FAMILIES))

    def test_every_credential_is_found_under_its_family(self) -> None:
        for case in POSITIVES:
            text, family, secret = case["text"], case["family"], case["secret"]
            with self.subTest(family, text=text[:60]):
                findings = scan(text)
                self.assertEqual({f.family for f in findings}, {family})
                self.assertTrue(any(covers(f, text, secret) for f in findings),
                                f"{family} found, but not over the whole credential")

    def test_no_benign_text_is_flagged(self) -> None:
        for case in NEGATIVES:
            with self.subTest(text=case["text"][:60]):
                self.assertEqual(scan(case["text"]), [])

    def test_findings_never_overlap_and_are_ordered(self) -> None:
        # All positives in one text: findings stay disjoint and sorted.  A line
        # of ";" between cases keeps two seed phrases (or two JSON arrays of
        # words) from running into one list of 24 words, which is not a phrase.
        text = "\n;\n".join(case["text"] for case in POSITIVES)
        findings = scan(text)
        self.assertGreaterEqual(len(findings), len(POSITIVES))
        for before, after in zip(findings, findings[1:]):
            self.assertLessEqual(before.end, after.start)

    def test_redaction_removes_every_credential(self) -> None:
        for case in POSITIVES:
            with self.subTest(case["family"], text=case["text"][:60]):
                redacted = redact(case["text"])
                self.assertNotIn(case["secret"], redacted)
                self.assertIn(f"[redacted: {case['family']}]", redacted)
                self.assertEqual(scan(redacted), [])


class PlaceholderTests(unittest.TestCase):
    """One placeholder rule for every family."""

    def test_real_samples_are_found(self) -> None:
        for family, prefix, body in PREFIXED:
            with self.subTest(family, prefix=prefix):
                self.assertEqual([f.family for f in scan(f"TOKEN={prefix}{body}")], [family])

    def test_placeholders_of_every_family_are_not_findings(self) -> None:
        for family, prefix, body in PREFIXED:
            for fill in ("x" * len(body), "X" * len(body), "0" * len(body), "*" * len(body),
                         "...", "\u2026", body[:8] + "...", "<your-key>", "${KEY}", "{{ key }}",
                         "%KEY%", "x" * 4 + "-" + "x" * (len(body) - 5)):
                for template in ("{}", "TOKEN={}", 'token: "{}"', "use {} here"):
                    text = template.format(prefix + fill)
                    with self.subTest(family, text=text[:60]):
                        self.assertEqual(scan(text), [])
            with self.subTest(family, truncated=True):
                self.assertEqual(scan(f"key: {prefix}{body}..."), [])

    def test_the_cases_of_the_issue(self) -> None:
        for text in ["ANTHROPIC_API_KEY=sk-" + "ant-api03-...", "OPENAI_API_KEY=sk-...",
                     "gh" + "p_" + "x" * 36, "h" + "f_" + "x" * 34, "HF_TOKEN=h" + "f_" + "x" * 34,
                     "password=<redacted>", "token=${TOKEN}", "api_key: {{ api_key }}",
                     "secret=%SECRET%", "password=********", "AK" + "IA" + "0" * 16]:
            with self.subTest(text=text):
                self.assertEqual(scan(text), [])


class FamilyTests(unittest.TestCase):
    """What the issue asks for by name, beside the corpus."""

    def test_key_names_with_a_value_shape_gate(self) -> None:
        secret = rand(ALNUM, 32)
        for text in [f'const authKey = "{secret}";', f"secretKey: '{secret}'", f"signingKey={secret}",
                     f'encryption_key = "{secret}"', f"APP_KEY={secret}"]:
            with self.subTest(text=text):
                self.assertEqual([f.family for f in scan(text)], ["credential-assignment"])
        for text in ['primaryKey = "id"', 'sortKey: "created_at"', 'cacheKey = "user:" + id',
                     'foreignKey="user_id"', 'objectKey = "uploads/2024/05/a-3.png"',
                     f'idempotencyKey: "{rand(HEX, 8)}-{rand(HEX, 4)}-4abc-8def-{rand(HEX, 12)}"',
                     f'publicKey: "{rand(ALNUM, 43)}="', 'key: password', 'routingKey = "orders.v2"']:
            with self.subTest(text=text):
                self.assertEqual(scan(text), [])

    def test_basic_authorization_in_headers_commands_and_code(self) -> None:
        for text in [f"Authorization: Basic {BASIC}", f"curl -H 'Authorization: Basic {BASIC}' https://x.example",
                     f'headers["Authorization"] = "Basic {BASIC}"',
                     f'req.Header.Set("Authorization", "Basic {BASIC}")',
                     f"{{'Authorization': 'Basic {BASIC}'}}", f'{{"auths": {{"r.example": {{"auth": "{BASIC}"}}}}}}']:
            with self.subTest(text=text):
                findings = scan(text)
                self.assertEqual([f.family for f in findings], ["basic-auth"])
                self.assertEqual(text[findings[0].start:findings[0].end], BASIC)
        helloworld = base64.b64encode(b"helloworld").decode()  # no colon: not user:password
        for text in [f"Basic {helloworld}", "Authorization: Basic <credentials>", "Basic usage: run it"]:
            with self.subTest(text=text):
                self.assertEqual(scan(text), [])

    def test_command_line_credentials(self) -> None:
        for text, value in [("curl -u deploy:" + "s3cr3t-Pw https://x.example", "s3cr3t-Pw"),
                            ("curl --user 'ci:" + "Tr0ub4dor&3' https://x.example", "Tr0ub4dor&3"),
                            ("docker login -u me -p " + "Zq8vX2pLm4 registry.example", "Zq8vX2pLm4"),
                            ("mysql -uroot -p" + "Kx92!mq shop", "Kx92!mq"),
                            ("deploy --token " + "a8f3e9c2d1b7 --env prod", "a8f3e9c2d1b7")]:
            with self.subTest(text=text):
                findings = scan(text)
                self.assertEqual([f.family for f in findings], ["cli-credential"])
                self.assertEqual(text[findings[0].start:findings[0].end], value)
        for text in ["curl -u $USER:$PASSWORD https://x.example", "docker run -u 1000:1000 img",
                     "git push -u origin main", "mysql -u root -p appdb", "ssh -p 2222 me@host",
                     "docker login --password-stdin", "mkdir -p /var/lib/app"]:
            with self.subTest(text=text):
                self.assertEqual(scan(text), [])

    def test_specific_family_wins_an_overlap(self) -> None:
        slack = "xo" + "xb-" + "123456789012-1234567890123-" + rand(ALNUM, 24)
        for text, family in [(f"GITHUB_TOKEN={GITHUB}", "github-token"),
                             (f"Authorization: Bearer {JWT}", "jwt"),
                             (f"https://example.com/hook?token={slack}", "slack-token"),
                             (f'"api_key": "{STRIPE}"', "stripe-key"),
                             (f"curl -u api:key-{rand(HEX, 32)} https://x.example", "mailgun-key")]:
            with self.subTest(family):
                self.assertEqual([f.family for f in scan(text)], [family])

    def test_documented_examples_are_placeholders_for_key_ids_and_secrets_alike(self) -> None:
        # One rule (qmem.secretvalues.is_placeholder): a value that says EXAMPLE is one.
        example_id = "AKIA" + "IOSFODNN7EXAMPLE"
        example_secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
        for text in [example_id, f"aws_access_key_id = {example_id}", f"aws_secret_access_key = {example_secret}",
                     f"AWS_SECRET_ACCESS_KEY={example_secret}", example_secret,
                     "AWS_ACCESS_KEY_ID=AKIA" + "I44QH8DHBEXAMPLE", 'password = "example-password-1"',
                     "api_key: sample_key_9f8e7d6c5b4a", "token: dummy-token-42", "DB_PASSWORD=changeme"]:
            with self.subTest(text=text):
                self.assertEqual(scan(text), [])
        # The same keys with the marker gone are credentials, id and secret alike.
        real_id = "AKIA" + rand(string.ascii_uppercase + string.digits, 16)
        real_secret = rand(ALNUM + "+/", 40)
        self.assertEqual([f.family for f in scan(real_id)], ["aws-access-key"])
        self.assertEqual([f.family for f in scan(f"aws_secret_access_key = {real_secret}")], ["credential-assignment"])

    def test_a_weak_password_is_still_a_password(self) -> None:
        # Strength is not the rule: shape is.  A digit or a symbol makes a password of a word.
        for text in ['password = "hunter2"', "DB_PASSWORD=Passw0rd", 'password: "letmein!"']:
            with self.subTest(text=text):
                self.assertEqual([f.family for f in scan(text)], ["credential-assignment"])
        for text in ["DB_PASSWORD=changeme", "DB_PASSWORD=postgres", "password: required", "password = ''"]:
            with self.subTest(text=text):
                self.assertEqual(scan(text), [])

    def test_private_key_needs_key_material(self) -> None:
        body = "\n".join(rand(ALNUM + "+/", 64, seed) for seed in range(3))
        block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
        findings = scan(f"key:\n{block}\nthanks")
        self.assertEqual([(f.family, f.start, f.end) for f in findings],
                         [("private-key", 5, 5 + len(block))])
        for text in ["-----BEGIN PRIVATE KEY-----", "files start with -----BEGIN PRIVATE KEY----- and end",
                     "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
                     "-----BEGIN PUBLIC KEY-----\n" + body]:
            with self.subTest(text=text[:40]):
                self.assertEqual(scan(text), [])


class ResultTests(unittest.TestCase):

    def test_multiple_findings_in_order(self) -> None:
        text = f"github {GITHUB}\npassword=hunter22 and {STRIPE}\n{JWT}"
        findings = scan(text)
        self.assertEqual([f.family for f in findings],
                         ["github-token", "credential-assignment", "stripe-key", "jwt"])
        self.assertEqual([text[f.start:f.end] for f in findings], [GITHUB, "hunter22", STRIPE, JWT])

    def test_several_secrets_in_one_url(self) -> None:
        text = "https://u:" + "pw-9x8y7z@h.example/p?token=" + "abc123def&q=1#sig=" + "zz99yy88"
        findings = scan(text)
        self.assertEqual([f.family for f in findings], ["credential-url"] * 3)
        self.assertEqual([text[f.start:f.end] for f in findings], ["pw-9x8y7z", "abc123def", "zz99yy88"])

    def test_first_finding(self) -> None:
        self.assertIsNone(first_finding("nothing to see"))
        text = f"password=hunter22 then {GITHUB}"
        self.assertEqual(first_finding(text), scan(text)[0])
        self.assertEqual(first_finding(text).family, "credential-assignment")

    def test_scan_values_scans_each_value_separately(self) -> None:
        values = ["fine", f"key {STRIPE}", "also fine", f"pw: x and {GITHUB}"]
        pairs = scan_values(values)
        self.assertEqual([(i, f.family) for i, f in pairs], [(1, "stripe-key"), (3, "github-token")])
        index, finding = pairs[1]
        self.assertEqual(values[index][finding.start:finding.end], GITHUB)
        self.assertEqual(scan_values(iter([])), [])
        self.assertEqual(scan_values([GITHUB[:20], GITHUB[20:]]), [])
        self.assertEqual(scan_values(["password=", "hunter22"]), [])

    def test_non_str_input_is_a_type_error(self) -> None:
        for bad in (None, b"password=hunter22", 12, ["x"]):
            with self.subTest(bad=bad):
                with self.assertRaises(TypeError):
                    scan(bad)  # type: ignore[arg-type]
                with self.assertRaises(TypeError):
                    redact(bad)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            scan_values(["ok", b"bytes"])  # type: ignore[list-item]

    def test_finding_is_frozen_and_plain(self) -> None:
        finding = Finding("jwt", 1, 5)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            finding.start = 0  # type: ignore[misc]
        self.assertEqual([f.name for f in dataclasses.fields(Finding)], ["family", "start", "end"])


class RedactTests(unittest.TestCase):

    def test_each_finding_is_replaced_by_its_family(self) -> None:
        text = f"gateway said: token {GITHUB} rejected; retry with password=hunter22."
        self.assertEqual(redact(text), "gateway said: token [redacted: github-token] rejected; "
                                       "retry with password=[redacted: credential-assignment].")

    def test_text_without_findings_is_returned_unchanged(self) -> None:
        for text in ["", "HTTP 422: field 'scope' is required", "unknown key 'recallUrl'"]:
            with self.subTest(text=text):
                self.assertIs(redact(text), text)

    def test_a_server_detail_with_a_bearer_value(self) -> None:
        token = rand(URLSAFE, 40)
        detail = json.dumps({"detail": f"invalid header Authorization: Bearer {token}"})
        redacted = redact(detail)
        self.assertNotIn(token, redacted)
        self.assertIn("[redacted: bearer-token]", redacted)


class DisclosureTests(unittest.TestCase):

    def test_secret_never_in_repr_or_describe(self) -> None:
        for case in POSITIVES:
            with self.subTest(case["family"], text=case["text"][:40]):
                findings = scan(case["text"])
                shown = repr(findings) + str(findings) + describe(findings)
                self.assertNotIn(case["secret"], shown)
                self.assertNotIn(case["secret"][-6:], shown)  # not even a piece of it

    def test_describe(self) -> None:
        findings = scan(f"{GITHUB} {JWT} {GITHUB}")
        message = describe(findings)
        self.assertEqual(message, "text looks like it contains a credential (github-token, jwt); "
                                  "remove it and store a reference instead")
        self.assertEqual(describe(iter(findings)), message)
        with self.assertRaises(ValueError):
            describe([])


# --- hostile input ----------------------------------------------------------------
#
# Catastrophic backtracking makes a scan take minutes, hours or years on an input that the linear
# scan reads in milliseconds; so these tests scan hostile inputs in a child process and fail when
# one input has not finished after WATCHDOG seconds.  No time is measured or compared: how the
# scan's time grows with its input is printed by scripts/bench_secretscan.py.

WATCHDOG = 60.0       # seconds for one input; the linear scan of any of them takes milliseconds
RULE_INPUT = 16_384   # characters of each input made from a rule's sample
PIECE_INPUT = 50_000
VALUE_INPUT = 1_000   # a value is read at most 1024 characters far

# Samples of the rules that the corpus has no case of.
EXTRA_SAMPLES = [
    "runner token GR" + "1348941" + rand(URLSAFE, 20, 1),
    "openssl rsa -in key.pem -passin pass:" + "Tr0ub4dor&3x",
    "machine h.example password " + "Zq8vX2pLm4",
    "Kennwort: " + "Zq8vX2pLm4", "senha = " + "Zq8vX2pLm4", "wachtwoord: " + "Zq8vX2pLm4",
    "пароль: " + "Zq8vX2pLm4",
]

# Hostile pieces, each repeated to PIECE_INPUT characters: prefixes, separators, half-made
# credentials and look-alikes, so that every rule starts a match at almost every position.
PIECES = [
    "a", "-----BEGIN ", "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * 64 + "\n", "eyJ", "eyJa.", "eyJ.eyJ.",
    "password=", "password=hunter22 ", "a=a=", "key:", "key: ", 'key="', "token is ", "://", "https://",
    "https://a:b@", "http://a/?token=abc123&", "ghp_", "gh" + "p_ghp_", "sk-", "sk-ant-", "AKIA", "xoxb-1-",
    "hooks.slack.com/services/T", "Bearer ", "Bearer Bearer ", "Basic ", "Authorization: ", "auth=",
    "--token ", "-p ", " login -p x", "curl -u a:b ", "login a password ", "machine ", ":AA", "1//0",
    "<password>", 'key="ApiKey" value="', "x" * 40, "0" * 40, "AC" + "0" * 32 + ":",
    "a ? key : ", "the password is ", "Set-Cookie: session=", "%a%", "${", "a.b.c", "1.2.3.",
]

# Where a value is judged, and what it is made of: each value is VALUE_INPUT characters of one
# filler after an "a" and before "!x", so that a check that can match each filler in two ways
# has 2 ** (VALUE_INPUT / length of the filler) ways to try before it fails.
VALUE_SETTINGS = [
    "password=", "token: ", "apiKey = '", 'secret="', "api_key: str = ", "<password>", "the password is ",
    "with password ", "sk-", "curl -u a:", "--token ", "https://h.example/?token=", "postgres://u:",
    "Authorization: Bearer ", "Authorization: token ", "Authorization: Basic ", "machine h password ",
    "login u password ", '<add key="ApiKey" value="', "mysql -p", "docker login -p ",
    "openssl rsa -passin pass:", "Set-Cookie: session=",
]
VALUE_FILLERS = ["1", "a1", "1a", "Ab", "aB1", "a.", "a?.", "/a", "%a", "$a", "a-", "0x", ":a", "aa ", "A_", "a$",
                 "a=", "+/"]


def rule_samples() -> list[tuple[str, str, str]]:
    """For each rule of the table that matches a corpus case or an extra sample: a label, the
    text it matches and the part of that text from the match to the end of what it reports
    (a match that its check accepts where there is one)."""
    texts = [case["text"] for case in POSITIVES] + EXTRA_SAMPLES
    samples = []
    for number, rule in enumerate(RULES):
        pattern = re.compile(rule.pattern, re.VERBOSE)
        chosen = None
        for text in texts:
            source = text.lower() if rule.folded else text
            if len(source) != len(text):
                continue  # offsets in the folded copy would not be those of the text
            for match in pattern.finditer(source):
                spans = rule.check(text, match)
                if chosen is None or spans:
                    end = max([match.end()] + [span_end for _, span_end in spans])
                    chosen = (text, text[match.start():end])
                if spans:
                    break
            else:
                continue
            break
        if chosen is not None:
            samples.append((f"rule {number} ({rule.family})", *chosen))
    return samples


def _class_ends(sample: str) -> list[int]:
    """Where a run of letters and digits, of white space or of one symbol ends in *sample*."""
    def kind(c: str) -> str:
        return "w" if c.isalnum() else " " if c.isspace() else c
    return [i for i in range(1, len(sample)) if kind(sample[i]) != kind(sample[i - 1])] + [len(sample)]


def rule_inputs(size: int = RULE_INPUT) -> Iterator[tuple[str, str]]:
    """Hostile inputs made from each rule's sample: its case over and over (a match and a check at
    every line), the sample glued to itself or cut short (a start of a match at every few
    characters), and the sample cut after each run with that run going on for *size*
    characters (one match that reads far and then fails)."""
    def repeat(piece: str) -> str:
        return (piece * (size // len(piece) + 1))[:size]
    for label, text, sample in rule_samples():
        yield f"{label}: its case, repeated", repeat(text + "\n")
        yield f"{label}: its match, glued", repeat(sample)
        yield f"{label}: its match less one, glued", repeat(sample[:-1])
        yield f"{label}: its match less one, spaced", repeat(sample[:-1] + " ")
        for end in _class_ends(sample)[:6]:
            yield f"{label}: cut at {end}, run on", sample[:end] + sample[end - 1] * size + "!x"
        yield f"{label}: run on with mixed case", sample + "aB3" * (size // 3) + "!x"


def piece_inputs(size: int = PIECE_INPUT) -> Iterator[tuple[str, str]]:
    """Each hostile piece repeated to *size* characters, and long runs after a prefix."""
    for piece in PIECES:
        yield f"{piece[:30]!r} repeated", (piece * (size // len(piece) + 1))[:size]
    yield "a long value", "a=" + "b" * size
    yield "an unclosed quote", 'password="' + "b" * size
    yield "a long URL", "https://a:" + "b" * size
    yield "a long JWT header", "eyJ" + "a" * size + ".eyJ"
    yield "a long token body", "sk-ant-" + "0" * size + "a"
    yield "a long PEM body", "-----BEGIN PRIVATE KEY-----\n" + "A" * size
    yield "a long name", "a" * size + "password=x1y2z3w4"


def value_inputs(length: int = VALUE_INPUT) -> Iterator[tuple[str, str]]:
    """A value of about *length* characters of each filler in each setting."""
    for setting in VALUE_SETTINGS:
        for filler in VALUE_FILLERS:
            yield f"{setting!r} + {filler!r}", setting + "a" + filler * (length // len(filler)) + "!x"


HOSTILE_INPUTS = {"rules": rule_inputs, "pieces": piece_inputs, "values": value_inputs}
DONE = "all scanned"


def scan_hostile_inputs(kind: str) -> None:
    """Scan each input of *kind*, saying which before it starts (run in the child process)."""
    for label, text in HOSTILE_INPUTS[kind]():
        print(label, flush=True)
        scan(text)
    print(DONE, flush=True)


class BacktrackingTests(unittest.TestCase):
    """Every rule, every value check and the hostile pieces scan without catastrophic
    backtracking: a child process scans each input while this test waits at most WATCHDOG
    seconds for it to start on the next one."""

    def scan_under_watchdog(self, kind: str) -> int:
        """Scan the inputs of *kind* in a child process; return how many it scanned."""
        child = subprocess.Popen(
            [sys.executable, "-c", f"from tests.test_secretscan import scan_hostile_inputs; "
                                   f"scan_hostile_inputs({kind!r})"],
            cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(child.stderr.close)
        self.addCleanup(child.stdout.close)
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            for line in child.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        label, scanned = "the first input", 0
        while True:
            try:
                line = lines.get(timeout=WATCHDOG)
            except queue.Empty:
                child.kill()
                child.wait()
                self.fail(f"the scan of {label} did not finish within {WATCHDOG:.0f} s: it backtracks")
            if line is None or line == DONE:
                break
            label, scanned = line, scanned + 1
        self.assertEqual(child.wait(timeout=WATCHDOG), 0, child.stderr.read())
        self.assertEqual(line, DONE)
        return scanned

    def test_every_rule_has_a_sample(self) -> None:
        labels = {label for label, _, _ in rule_samples()}
        for number, rule in enumerate(RULES):
            with self.subTest(number=number, family=rule.family):
                self.assertTrue(f"rule {number} ({rule.family})" in labels,
                                "no corpus case (nor extra sample) matches this rule: add one")

    def test_every_rule_on_input_made_from_its_sample(self) -> None:
        self.assertGreaterEqual(self.scan_under_watchdog("rules"), 6 * len(RULES))

    def test_hostile_pieces(self) -> None:
        self.assertEqual(self.scan_under_watchdog("pieces"), len(PIECES) + 7)

    def test_every_value_check_on_long_values(self) -> None:
        self.assertEqual(self.scan_under_watchdog("values"), len(VALUE_SETTINGS) * len(VALUE_FILLERS))


if __name__ == "__main__":
    unittest.main()
