"""Tests for qmem.secretscan.engine.

The corpus (``tests/corpora/secrets/*.jsonl``, made by ``make_corpus.py`` there) holds
synthetic credentials over every family and benign texts; the checks here hold exactly on
it.  Every credential in this file is assembled at run time from pieces, so that the file
holds nothing that a repository secret scanner would flag.
"""

from __future__ import annotations

import base64
from qmem import valueclass
import fnmatch
import hashlib
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

from qmem.secretscan.engine import FAMILIES, Finding, describe, redact, scan, scan_values
from qmem.secretscan.families import RULES
from qmem.secretscan.seedphrase import WORD_LIST, is_seed_phrase, word_index, words

REPO = Path(__file__).resolve().parents[1]

CORPUS = Path(__file__).resolve().parent / "corpora" / "secrets"
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
HEX = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
B64 = ALNUM + "+/"


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
    ("prefect-key", "pn" + "u_", rand(ALNUM, 36)), ("rubygems-key", "rubygems" + "_", rand(HEX, 48)),
    ("pulumi-token", "pu" + "l-", rand(HEX, 40)), ("figma-token", "fig" + "d_", rand(URLSAFE, 40)),
    ("perplexity-key", "ppl" + "x-", rand(ALNUM, 48)), ("sonar-token", "sq" + "u_", rand(HEX, 40)),
    ("buildkite-token", "bku" + "a_", rand(HEX, 40)), ("newrelic-key", "NRA" + "K-", rand(UPPER_ALNUM, 27)),
    ("infracost-key", "ic" + "o-", rand(ALNUM, 32)), ("scalingo-token", "tk-" + "us-", rand(URLSAFE, 48)),
    ("tencent-key", "AK" + "ID", rand(ALNUM, 32)), ("alibaba-key", "LT" + "AI", rand(ALNUM, 20)),
    ("openshift-token", "sha256" + "~", rand(URLSAFE, 43)), ("readme-key", "rdm" + "e_", rand(LOWER_ALNUM, 70)),
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
        # One rule (qmem.secretscan.values.is_placeholder): a value that says EXAMPLE is one.
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


def mnemonic(count: int, seed: int = 0) -> str:
    """A valid BIP39 phrase of *count* words, made here from random entropy."""
    rng = random.Random(f"bip39/{count}/{seed}")
    bits = count // 3
    entropy = rng.randbytes((count * 11 - bits) // 8)
    value = (int.from_bytes(entropy, "big") << bits) | (hashlib.sha256(entropy).digest()[0] >> (8 - bits))
    return " ".join(words()[(value >> (11 * (count - 1 - i))) & 2047] for i in range(count))


def broken(phrase: str) -> str:
    """*phrase* with one checksum bit of its last word flipped: the same words
    but for the last, and a checksum that fails."""
    *head, last = phrase.split()
    return " ".join(head + [words()[word_index()[last] ^ 1]])


# Where users paste a phrase: (template, how the phrase is written in it).
PHRASE_PLACES = [
    ("my seed phrase: {}. keep it offline", str), ('{{"mnemonic": "{}"}}', str), ('MNEMONIC="{}"', str),
    ("export SEED='{}'", str), ("mnemonic: {}\n", str), ("{}", str),
    ("words = {}", lambda p: json.dumps(p.split())), ("{}", lambda p: ", ".join(p.split())),
    ("{}", lambda p: "\n".join(f"{i}. {w}" for i, w in enumerate(p.split(), 1))),
    ("backup: {}", lambda p: " ".join(f"{i}) {w}" for i, w in enumerate(p.split(), 1))),
    ("Recovery phrase - {}", lambda p: p[0].upper() + p[1:]),
    ("seed phrase {} please keep it safe", str), ("```\n{}\n```", str),
]


class SeedPhraseTests(unittest.TestCase):
    """BIP39 phrases: a valid checksum, twelve to twenty-four words, wherever they are pasted."""

    def test_phrases_of_every_length_where_users_paste_them(self) -> None:
        for count in (12, 15, 18, 21, 24):
            for number, (template, written) in enumerate(PHRASE_PLACES):
                listed = mnemonic(count, number).split()
                text = template.format(written(" ".join(listed)))
                start = re.search(rf"\b{listed[0]}\b", text, re.IGNORECASE).start()
                end = text.rindex(listed[-1]) + len(listed[-1])
                with self.subTest(count=count, text=text[:50]):
                    findings = scan(text)
                    self.assertEqual([f.family for f in findings], ["seed-phrase"])
                    self.assertLessEqual(findings[0].start, start)
                    self.assertGreaterEqual(findings[0].end, end)

    def test_the_span_is_the_phrase(self) -> None:
        phrase = mnemonic(12, 99)
        text = f"Here it is: {phrase}. Thanks!"
        findings = scan(text)
        self.assertEqual([(f.family, text[f.start:f.end]) for f in findings], [("seed-phrase", phrase)])

    def test_a_failing_checksum_is_not_a_phrase(self) -> None:
        for count in (12, 24):
            for number, (template, written) in enumerate(PHRASE_PLACES):
                text = template.format(written(broken(mnemonic(count, number))))
                with self.subTest(count=count, text=text[:50]):
                    self.assertEqual(scan(text), [])

    def test_word_lists_are_not_phrases(self) -> None:
        # An excerpt of the list is in order; a phrase's words almost never are.
        for start in (0, 700, 2024):
            excerpt = words()[start:start + 24]
            for text in [" ".join(excerpt), "\n".join(excerpt[:12]), json.dumps(excerpt[:12])]:
                with self.subTest(text=text[:40]):
                    self.assertEqual(scan(text), [])
        self.assertEqual(scan("fruit: apple banana cherry grape lemon melon orange peach pear plum mango kiwi"), [])

    def test_documented_test_phrases_are_placeholders(self) -> None:
        for text in [" ".join(["abandon"] * 11 + ["about"]), " ".join(["abandon"] * 23 + ["art"]),
                     " ".join(["zoo"] * 11 + ["wrong"]), " ".join(["test"] * 11 + ["junk"]),
                     "legal winner thank year wave sausage worth useful legal winner thank yellow",
                     "letter advice cage absurd amount doctor acoustic avoid letter advice cage above"]:
            with self.subTest(text=text[:40]):
                self.assertEqual(scan(text), [])

    def test_a_run_of_list_words_is_not_searched_at_every_offset(self) -> None:
        # A phrase inside a longer list of list words ("cable" is not a framing
        # word) is not looked for at each offset: a list of 24 random words would
        # hold a valid 12-word stretch more often than not.
        phrase = mnemonic(12, 7)
        self.assertEqual(scan(f"cable {phrase} cable"), [])
        self.assertEqual([f.family for f in scan(f"seed phrase {phrase} please keep")], ["seed-phrase"])

    def test_two_phrases_quoted_in_one_array(self) -> None:
        first, second = mnemonic(12, 1), mnemonic(12, 2)
        text = json.dumps([first, second])
        self.assertEqual([text[f.start:f.end] for f in scan(text)], [first, second])


class WordListTests(unittest.TestCase):
    """The shipped BIP39 list is the published one."""

    def test_the_list_is_the_published_file(self) -> None:
        data = WORD_LIST.read_bytes()
        self.assertEqual(hashlib.sha256(data).hexdigest(),
                         "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda")
        listed = data.decode("ascii").split()
        self.assertEqual(len(listed), 2048)
        self.assertEqual(listed, sorted(set(listed)))
        self.assertTrue(WORD_LIST.with_name("bip39-english.LICENSE.txt").is_file())

    def test_published_test_vectors_validate(self) -> None:
        # From the BIP39 reference vectors (random entropy, so not placeholders).
        for phrase in ["scheme spot photo card baby mountain device kick cradle pact join borrow",
                       "hamster diagram private dutch cause delay private meat slide toddler razor book happy fancy "
                       "gospel tennis maple dilemma loan word shrug inflict delay length"]:
            numbers = [word_index()[word] for word in phrase.split()]
            self.assertTrue(is_seed_phrase(numbers))
            numbers[-1] ^= 1
            self.assertFalse(is_seed_phrase(numbers))

    def test_the_list_is_package_data(self) -> None:
        text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
        line = next(line for line in text.splitlines() if line.startswith("qmem = ["))
        patterns = json.loads(line.partition("=")[2])
        for name in (WORD_LIST.name, "bip39-english.LICENSE.txt"):
            with self.subTest(name=name):
                self.assertTrue(any(fnmatch.fnmatch(name, pattern) for pattern in patterns))


def guid(seed: int) -> str:
    h = rand(HEX, 32, seed)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class WebhookTests(unittest.TestCase):
    """One family for the URLs that are their own credential."""

    def test_incoming_webhooks_of_every_service(self) -> None:
        teams = guid(1) + "@" + guid(2) + "/IncomingWebhook/" + rand(HEX, 32) + "/" + guid(3)
        urls = [
            "https://acme.webhook.office.com/webhook" + "b2/" + teams,
            "https://acme.webhook.office.com/webhook" + "b2/" + teams + "/V2" + rand(URLSAFE, 43),
            "https://outlook.office.com/webhook/" + teams,
            "https://prod-27.westeurope.logic.azure.com:443/workflows/" + rand(HEX, 32)
            + "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig="
            + rand(URLSAFE, 43),
            "https://" + rand(HEX, 32) + ".0e.environment.api.powerplatform.com:443/powerautomate/automations/direct/"
            "workflows/" + rand(HEX, 32) + "/triggers/manual/paths/invoke?api-version=1&sig=" + rand(URLSAFE, 43),
            "https://chat.googleapis.com/v1/spaces/AAAA" + rand(URLSAFE, 7) + "/messages?key=AI" + "za"
            + rand(URLSAFE, 35) + "&token=" + rand(URLSAFE, 43) + "%3D",
            "https://hooks.zapier.com/hooks/catch/" + rand(string.digits, 7) + "/" + rand(LOWER_ALNUM, 6) + "/",
            "https://maker.ifttt.com/trigger/deploy/with/key/" + rand(URLSAFE, 22),
            "https://open.feishu.cn/open-apis/bot/v2/hook/" + guid(4),
            "https://oapi.dingtalk.com/robot/send?access_token=" + rand(HEX, 64),
            "https://hooks.slack.com/services/T" + rand(UPPER_ALNUM, 8) + "/B" + rand(UPPER_ALNUM, 10) + "/"
            + rand(ALNUM, 24),
            "https://discord.com/api/webhooks/" + rand(string.digits, 18) + "/" + rand(URLSAFE, 68),
        ]
        for url in urls:
            for template in ("{}", "post to {}.", 'WEBHOOK_URL="{}"'):
                text = template.format(url)
                with self.subTest(text=text[:70]):
                    findings = scan(text)
                    self.assertEqual([(f.family, text[f.start:f.end]) for f in findings], [("webhook-url", url)])

    def test_webhook_urls_without_their_secret(self) -> None:
        for text in [
            "https://prod-1.westus.logic.azure.com/workflows/" + rand(HEX, 32)
            + "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun",
            "https://prod-1.westus.logic.azure.com/workflows/" + rand(HEX, 32)
            + "/triggers/manual/paths/invoke?sig=<sig>",
            "https://chat.googleapis.com/v1/spaces/SPACE/messages?key=KEY&token=TOKEN",
            "https://acme.webhook.office.com/webhook" + "b2/<group>@<tenant>/IncomingWebhook/<id>/<owner>",
            "https://open.feishu.cn/open-apis/bot/v2/hook/xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
            "Teams incoming webhooks live under webhook.office.com/webhookb2/.",
        ]:
            with self.subTest(text=text[:70]):
                self.assertEqual(scan(text), [])


class NewFamilyTests(unittest.TestCase):
    """The shapes of issue 20 that need more than a prefix."""

    def test_issue_families_in_prose(self) -> None:
        cases = [
            ("terraform-token", rand(ALNUM, 14) + ".atlas" + "v1." + rand(URLSAFE, 67)),
            ("braintree-token", "access_token$" + "production$" + rand(LOWER_ALNUM, 16) + "$" + rand(HEX, 32)),
            ("mailchimp-key", rand(HEX, 32) + "-us" + "7"),
            ("postman-key", "PM" + "AK-" + rand(HEX, 24) + "-" + rand(HEX, 34)),
            ("mailgun-key", rand(HEX, 32) + "-" + rand(HEX, 8) + "-" + rand(HEX, 8)),
            ("facebook-token", "EA" + "AG" + rand(ALNUM, 160)),
        ]
        for family, token in cases:
            text = f"I think the key was {token}, can you check it?"
            with self.subTest(family):
                findings = scan(text)
                self.assertEqual([(f.family, text[f.start:f.end]) for f in findings], [(family, token)])

    def test_bootstrap_token_needs_its_setting(self) -> None:
        token = rand(LOWER_ALNUM, 6, 1) + "." + rand(LOWER_ALNUM, 16, 2)
        for text in [f"kubeadm join 10.0.0.1:6443 --token {token} --discovery-token-ca-cert-hash "
                     f"sha256:{rand(HEX, 64)}",
                     f"bootstrapTokens:\n- token: {token}\n", f"the join token is {token}"]:
            with self.subTest(text=text[:50]):
                self.assertEqual([(f.family, text[f.start:f.end]) for f in scan(text)], [("bootstrap-token", token)])
        for text in [f"see host {token} for the logs", "token: abcdef.ghijklmnopqrstuv",
                     "kubeadm join 10.0.0.1:6443 --token <token> --discovery-token-ca-cert-hash sha256:<hash>"]:
            with self.subTest(text=text[:50]):
                self.assertEqual(scan(text), [])

    def test_azure_storage_key_in_prose_but_not_a_digest(self) -> None:
        key = rand(B64, 86) + "=="
        for text in [f"the storage account key is {key}", f"AZURE_STORAGE_KEY={key}", f"Azure key1: {key}"]:
            with self.subTest(text=text[:40]):
                self.assertEqual([(f.family, text[f.start:f.end]) for f in scan(text)], [("azure-key", key)])
        for text in [f'"@azure/storage-blob": {{"integrity": "sha512-{key}"}}', f"signature: {key}",
                     f"payload {key} from the queue"]:
            with self.subTest(text=text[:40]):
                self.assertEqual(scan(text), [])
        secret = rand(ALNUM, 3) + "8Q" + "~" + rand(ALNUM + "_~.-", 34)
        self.assertEqual([f.family for f in scan(f"client secret: {secret}")], ["azure-key"])


class AssignmentShapeTests(unittest.TestCase):
    """A value is judged by its shape and entropy, not by its dots or dollar signs."""

    def test_generated_values_with_dots_dollars_and_subscripts(self) -> None:
        cases = [
            ("ACCESS_TOKEN={}", rand(UPPER_ALNUM, 7, 1) + "." + rand(UPPER_ALNUM, 8, 2) + "." + rand(ALNUM, 8, 3)),
            ("api_secret: {}", rand(LOWER_ALNUM, 6, 4) + "." + rand(LOWER_ALNUM, 18, 5)),
            ('configuration.api_key["appKeyAuth"] = "{}"', rand(HEX, 32)),
            ("config.api_key['api_key'] = '{}'", rand(ALNUM, 32)),
            ("SECRET={}", rand(ALNUM, 6, 6) + "$" + rand(ALNUM, 6, 7) + "$" + rand(ALNUM, 8, 8)),
            ("client_secret = {}", rand(ALNUM, 10, 9) + "." + rand(ALNUM, 12, 10) + "." + rand(ALNUM, 10, 11)),
        ]
        for template, value in cases:
            text = template.format(value)
            with self.subTest(text=text):
                findings = scan(text)
                self.assertEqual([(f.family, text[f.start:f.end]) for f in findings],
                                 [("credential-assignment", value)])

    def test_references_stay_benign(self) -> None:
        for text in ["ACCESS_TOKEN=${ACCESS_TOKEN}", "ACCESS_TOKEN=$ACCESS_TOKEN", "TOKEN=$(vault read -field=token x)",
                     "api_key = settings.API_KEY", "token: config.token.value", "password = self.db.password2",
                     "api_token: <api-token>", "api_token: {{ .Values.apiToken }}", 'apiKey = os.environ["API_KEY"]',
                     "apiKey: process.env.API_KEY", "token = get_token()", "key_file = /etc/ssl/private/key.pem",
                     "API_TOKEN=v2.4.1", "token_host=api.example.co.uk", "secret: vault:secret/data/app#password",
                     'configuration.api_key["appKeyAuth"] = os.environ["DD_APP_KEY"]',
                     "configuration.api_key_prefix['api_key'] = 'Bearer'", "api_key = settings.secrets.stripe.key_v2",
                     "password: Schema$inbound", "ACCESS_TOKEN=./secrets/access.token"]:
            with self.subTest(text=text):
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

    def test_findings_come_in_text_order(self) -> None:
        self.assertEqual(scan("nothing to see"), [])
        text = f"password=hunter22 then {GITHUB}"
        self.assertEqual([f.family for f in scan(text)], ["credential-assignment", "github-token"])

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
        with self.assertRaises(AttributeError):  # a frozen value class
            finding.start = 0  # type: ignore[misc]
        self.assertEqual([f.name for f in valueclass.fields(Finding)], ["family", "start", "end"])


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
    "пароль: " + "Zq8vX2pLm4", "Пароль = " + "Zq8vX2pLm4", "ПАРОЛЬ: " + "Zq8vX2pLm4",
]
# A sample of each name ending the assignment rules look for (issue 28), and the credentials of
# the tune half of the corpus of forms (never of its held-out half).
EXTRA_SAMPLES += [f"{name}: Zq8vX2pLm4#" + rand(ALNUM, 12, 2) for name in (
    "passcode", "pw", "psw", "pswd", "passw", "pword", "psk", "device_pin", "tok", "tkn", "creds", "basic_auth",
    "sessid", "salt", "pepper", "seed", "cookie", "wif", "pk", "otp", "contrasenya", "parola", "parola d'ordine",
    "lösenord", "passord", "adgangskode", "kodeord", "lykilorð", "salasana", "salasõna", "jelszó", "sifre",
    "heslo", "geslo", "lozinka", "kata sandi", "kata laluan", "mat khau", "nenosiri", "Schlüssel", "sleutel",
    "secrète", "anahtari", "clé API", "clave de API", "chave de API", "klucz API")]
EXTRA_SAMPLES += [f"{name}: Zq8vX2pLm4#" + rand(ALNUM, 12, 3) for word in (
    "пароль", "hasło", "parolă", "slaptažodis", "şifre", "κωδικός", "κωδικος", "лозинка", "парола", "密码", "密碼",
    "口令", "パスワード", "비밀번호", "암호", "كلمة المرور", "كلمة السر", "סיסמה", "סיסמא", "رمز عبور", "पासवर्ड",
    "รหัสผ่าน", "mật khẩu", "পাসওয়ার্ড", "токен", "токен доступа", "anahtarı", "密钥", "秘钥", "令牌", "キー",
    "토큰", "키") for name in (word, word.capitalize(), word.upper())]
EXTRA_SAMPLES += [f"{name}: Zq8vX2pLm4#" + rand(ALNUM, 12, 4) for name in ("ключ API", "Ключ API", "КЛЮЧ API")]
PEM_LINES = "\n".join(rand(B64, 64, seed) for seed in range(4))
EXTRA_SAMPLES += [
    "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 2\n" + PEM_LINES[:129],
    "client-key-data: " + base64.b64encode(("-----BEGIN RSA PRIVATE " + "KEY-----\n" + PEM_LINES).encode()).decode(),
]
SEED32 = " ".join(rand("abcdefghijklmnopqrstuvwxyz234567", 32, 5)[i:i + 4] for i in range(0, 32, 4))
EXTRA_SAMPLES += [
    "net use Z: \\\\fs\\share /user:CORP\\svc Zq8vX2pLm4#", 'ConvertTo-SecureString "Zq8vX2pLm4#" -AsPlainText',
    "CREATE USER 'a'@'%' IDENTIFIED BY 'Zq8vX2pLm4#';", "ALTER USER a IDENTIFIED BY Zq8vX2pLm4;",
    "CREATE ROLE a WITH LOGIN PASSWORD 'Zq8vX2pLm4#';", f"setup key: {SEED32}", f"secret: {SEED32}",
    f"seed: {SEED32}", '<password value="Zq8vX2pLm4#"/>',
    "{'kty': 'oct', 'k': '" + rand(URLSAFE, 43, 6) + "'}", "{kty: 'EC', d: '" + rand(URLSAFE, 43, 7) + "'}",
    "{kty: 'oct', k: '" + rand(URLSAFE, 43, 8) + "'}", "echo 'Zq8vX2pLm4#' | sudo -S ls",
    'printf "Zq8vX2pLm4#" | docker login --password-stdin', "sudo -S <<< 'Zq8vX2pLm4#' ls",
]
with open(CORPUS / "forms" / "tune.jsonl", encoding="utf-8") as _tune:
    EXTRA_SAMPLES += [case["text"] for case in map(json.loads, _tune) if case["family"]]

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
    # The second wave: words of the list, marks found inside tokens, webhook hosts.
    "abandon ", "abandon, ", '"abandon", ', "1. abandon\n", "1) abandon ", "abandonment ", "abandon 1 ",
    "seed phrase ", "Q~", "a8Q~", "==", "A==", "-us1", "0" * 32 + "-us", "a" * 32 + "-", ".atlasv1.",
    "access_token$production$", "a1b2c3.", "token a1b2c3.", "webhook.office.com/webhookb2/",
    "logic.azure.com/workflows/", "chat.googleapis.com/v1/spaces/a/messages?", "EAA", "sk.eyJ", "dG9rO", "pat",
    "pat.", "api_key[\"a\"] = ", "key['", ".M" + "a" * 23,
    # Issue 28: containers, cookies, split literals, calls, fields, tables, lines, prose.
    "-----BEGIN A B C D ", "---- BEGIN ", "Private-Lines: 1\n", "LS0tLS1CRUdJTi", '"d": "', '"kty" "d":"',
    "Cookie: a=", "Cookie: sessionid=", "-b ", '"a" "', '"a" + ', "'a' . ", '"a"\n', '("password", "', "(\"",
    '(\"a\", \"', "Client(", "name: password ", "<key>password</key>", '<string name="password">', "| password |",
    "|", "WIFI:", "WIFI:P:", "identified by ", "password '", "a:b:c:d:", "password for a is ", "login a / ",
    " as the password", "key: abcd ", "secret: ABCD ", "zip -P ", "7z -p", "-U a%", "/p:", "/pass:", "net user a ",
    "/user:a ", "-storepass ", "ConvertTo-SecureString '", "xprv", "5K", "L", '<a value="', "pw ", "ENV A ",
    "requirepass ", "password ", "密码是", "Passwort ist ", "password - ", "password -> ", "_prod=", "_v2=",
    "password: |\n  ", "token: !!str ", "a, password = ", "login(key=", "Xk9=", "：", "echo a | ", "<<< '",
    "{kty: 'oct', k: '", "'d': '",
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
    'configuration.api_key["appKeyAuth"] = "', "kubeadm join --token ", "the storage account key is ",
    "my seed phrase: ", "https://chat.googleapis.com/v1/spaces/a/messages?token=",
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
    listed = words()
    yield "a long run of list words", " ".join(listed[i * 7 % 2048] for i in range(size // 7))
    yield "a long numbered list", "".join(f"{i % 99 + 1}. {listed[i * 13 % 2048]}\n" for i in range(size // 12))
    yield "list words with a long word after every eleven", " ".join(
        listed[i * 7 % 2048] if i % 12 else "incomprehensibilities" for i in range(size // 8))
    yield "a long lower-case stretch", "a" + "b" * size
    yield "a long base64 run before ==", "azure storage " + "A" * size + "=="


def value_inputs(length: int = VALUE_INPUT) -> Iterator[tuple[str, str]]:
    """A value of about *length* characters of each filler in each setting."""
    for setting in VALUE_SETTINGS:
        for filler in VALUE_FILLERS:
            yield f"{setting!r} + {filler!r}", setting + "a" + filler * (length // len(filler)) + "!x"


LARGE_INPUT = 2_000_000  # a quadratic scan of any of these takes hours; the linear one, seconds
# Texts where a match can start again inside the last one (a URL in a URL, a
# numbered list whose items are numbered lists) or a token's body holds its
# own prefix: a search that looks from every place in there is quadratic.
LARGE_PIECES = ["://", "https://a", "abandon 1 ", "1. abandon\n", "whsec_+", "sntrys_-", "xoxe-1-",
                "a" * 32 + "-us1-", "Q~" + "a" * 33, "==" + "A" * 84,
                # Issue 28: a chain of literals that never ends, a cookie line that never ends.
                '"ab" "', '"ab" + ', "Cookie: sessionid=a; ", "| password |\n"]


def large_inputs(size: int = LARGE_INPUT) -> Iterator[tuple[str, str]]:
    """A few pieces repeated to *size* characters."""
    for piece in LARGE_PIECES:
        yield f"{piece[:30]!r} repeated to {size:,}", (piece * (size // len(piece) + 1))[:size]


HOSTILE_INPUTS = {"rules": rule_inputs, "pieces": piece_inputs, "values": value_inputs, "large": large_inputs}
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
        self.assertEqual(self.scan_under_watchdog("pieces"), len(PIECES) + 12)

    def test_large_inputs_where_a_match_starts_inside_the_last(self) -> None:
        self.assertEqual(self.scan_under_watchdog("large"), len(LARGE_PIECES))

    def test_every_value_check_on_long_values(self) -> None:
        self.assertEqual(self.scan_under_watchdog("values"), len(VALUE_SETTINGS) * len(VALUE_FILLERS))


if __name__ == "__main__":
    unittest.main()
