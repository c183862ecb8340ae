"""The corpus's second wave: seed phrases, webhooks and the families of issue 20, and their look-alikes.

``make_corpus.py`` writes these cases to ``positives2.jsonl`` and ``negatives2.jsonl``
(same format as the first wave).  They come from their own seed, so the first wave's
files do not change when these do.  Every credential is synthetic: random characters in
a family's published shape, and seed phrases made from random entropy with a checksum
computed here with hashlib (the mnemonics of no wallet).  Negatives are made to look
like the positives: phrases whose checksum fails, word lists, digests, base64 data,
webhook URLs without their secret, manifests without tokens, references in values.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
from pathlib import Path

RNG = random.Random(20261201)
WORDS = (Path(__file__).resolve().parents[3] / "qmem" / "bip39-english.txt").read_text(encoding="ascii").split()

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + DIGITS
LOWER_ALNUM = LOWER + DIGITS
UPPER_ALNUM = UPPER + DIGITS
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"


def r(alphabet: str, n: int) -> str:
    """A random string that mixes the classes of its alphabet, as real tokens do."""
    groups = [set(alphabet) & set(g) for g in (UPPER, LOWER, DIGITS)]
    while True:
        text = "".join(RNG.choice(alphabet) for _ in range(n))
        if n < 12 or all(not g or set(text) & g for g in groups):
            return text


def guid() -> str:
    h = r(HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


# --- seed phrases ---------------------------------------------------------------------------

def checksum_ok(words: list[str]) -> bool:
    value = 0
    for word in words:
        value = (value << 11) | WORDS.index(word)
    bits = len(words) // 3
    entropy = (value >> bits).to_bytes((len(words) * 11 - bits) // 8, "big")
    return value & ((1 << bits) - 1) == hashlib.sha256(entropy).digest()[0] >> (8 - bits)


def phrase(count: int) -> list[str]:
    """A valid BIP39 phrase of *count* words from random entropy."""
    bits = count // 3
    entropy = RNG.randbytes((count * 11 - bits) // 8)
    value = (int.from_bytes(entropy, "big") << bits) | (hashlib.sha256(entropy).digest()[0] >> (8 - bits))
    words = [WORDS[(value >> (11 * (count - 1 - i))) & 2047] for i in range(count)]
    assert checksum_ok(words)
    return words


def broken_phrase(count: int) -> list[str]:
    """*count* words of the list whose checksum fails: a phrase that is not one."""
    while True:
        words = [RNG.choice(WORDS) for _ in range(count)]
        if not checksum_ok(words):
            return words


PHRASE_CONTEXTS = [
    "my seed phrase: {p}. keep it offline",
    "Recovery phrase: {P}",
    "wallet backup words are:\n{p}\n",
    '{{"mnemonic": "{p}", "path": "m/44\'/60\'/0\'/0/0"}}',
    'MNEMONIC="{p}"',
    "export SEED_PHRASE='{p}'",
    "WALLET_MNEMONIC={p}",
    "mnemonic: {p}",
    'const mnemonic = "{p}";',
    "words = {json}",
    "{json}",
    "{numbered}",
    "{inline_numbered}",
    "seed phrase {p} please keep it safe",
    "here it is -- {p} -- do not share",
    "```\n{p}\n```",
    "hardhat: accounts: {{ mnemonic: \"{p}\" }}",
    "{commas}",
    "restore with: cast wallet import dev --mnemonic \"{p}\"",
    "{p}",
]


def phrase_text(template: str, words: list[str]) -> tuple[str, str]:
    """The text and the part of it that is the phrase."""
    p = " ".join(words)
    if "{P}" in template:
        capital = p[0].upper() + p[1:]
        return template.format(P=capital), capital
    if "{json}" in template:
        listed = json.dumps(words)
        return template.format(json=listed), listed[2:-2]
    if "{numbered}" in template:
        listed = "\n".join(f"{i}. {w}" for i, w in enumerate(words, 1))
        return template.format(numbered=listed), listed[3:]
    if "{inline_numbered}" in template:
        listed = " ".join(f"{i}) {w}" for i, w in enumerate(words, 1))
        return template.format(inline_numbered=listed), listed[3:]
    if "{commas}" in template:
        listed = ", ".join(words)
        return template.format(commas=listed), listed
    return template.format(p=p), p


def seed_phrase_positives() -> list[tuple[str, str, str]]:
    out = []
    for i, template in enumerate(PHRASE_CONTEXTS):
        for count in ((12, 24) if i % 2 == 0 else (12,)) + ((15, 18, 21)[i % 3:i % 3 + 1] if i < 6 else ()):
            text, secret = phrase_text(template, phrase(count))
            out.append(("seed-phrase", text, secret))
    two = phrase(12), phrase(12)
    out.append(("seed-phrase", "a: " + " ".join(two[0]) + "\nb: " + " ".join(two[1]), " ".join(two[0])))
    return out


def seed_phrase_negatives() -> list[str]:
    out = []
    for i, template in enumerate(PHRASE_CONTEXTS):
        for count in (12, 24) if i % 2 else (12, 15):
            out.append(phrase_text(template, broken_phrase(count))[0])
    start = RNG.randrange(0, 2000)
    excerpt = WORDS[start:start + 24]
    out += [
        " ".join(excerpt), "\n".join(excerpt[:12]), json.dumps(excerpt[:12]),
        "BIP39 word list, first entries: " + ", ".join(WORDS[:16]),
        " ".join(["abandon"] * 11 + ["about"]),
        "the test vector is: " + " ".join(["abandon"] * 23 + ["art"]),
        " ".join(["zoo"] * 11 + ["wrong"]),
        "legal winner thank year wave sausage worth useful legal winner thank yellow",
        "letter advice cage absurd amount doctor acoustic avoid letter advice cage above",
        'colors = ["red", "green", "blue", "yellow", "orange", "purple", "pink", "black", "white", "gray", '
        '"brown", "silver", "gold", "olive"]',
        "animals: cat dog horse lion tiger zebra monkey rabbit eagle whale shark snake spider",
        "fruit basket with apple banana cherry grape lemon melon orange peach pear plum mango kiwi",
        "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat all day",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore",
        "we should also keep this list short because people never read long notes about the project",
        "please write the seed phrase on paper and never share it with anyone; store it somewhere safe",
        "A seed phrase is 12 or 24 words from the BIP39 list, such as 'abandon' or 'zoo'.",
        "correct horse battery staple is a famous example of a passphrase",
        "use: test test test test test test test test test test test junk (the hardhat default)",
    ]
    # Prose that happens to hold many list words in a row.
    for _ in range(12):
        out.append("note: " + " ".join(RNG.choice(WORDS) for _ in range(RNG.choice([8, 11, 13]))) + ". done")
    return out


# --- webhooks ---------------------------------------------------------------------------------

def webhook_positives() -> list[tuple[str, str, str]]:
    urls = [
        "https://acme.webhook.office.com/webhookb2/" + guid() + "@" + guid() + "/IncomingWebhook/" + r(HEX, 32)
        + "/" + guid(),
        "https://contoso365.webhook.office.com/webhookb2/" + guid() + "@" + guid() + "/IncomingWebhook/"
        + r(HEX, 32) + "/" + guid() + "/V2" + r(URLSAFE, 43),
        "https://outlook.office.com/webhook/" + guid() + "@" + guid() + "/IncomingWebhook/" + r(HEX, 32) + "/"
        + guid(),
        "https://prod-" + str(RNG.randint(10, 99)) + ".westeurope.logic.azure.com:443/workflows/" + r(HEX, 32)
        + "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig="
        + r(URLSAFE, 43),
        "https://prod-07.eastus.logic.azure.com/workflows/" + r(HEX, 32)
        + "/triggers/When_a_HTTP_request_is_received/paths/invoke?api-version=2016-10-01&sig=" + r(URLSAFE, 43)
        + "&sp=%2Ftriggers%2Frun",
        "https://" + r(HEX, 32) + ".0e.environment.api.powerplatform.com:443/powerautomate/automations/direct/"
        "workflows/" + r(HEX, 32) + "/triggers/manual/paths/invoke?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun"
        "&sv=1.0&sig=" + r(URLSAFE, 43),
        "https://chat.googleapis.com/v1/spaces/AAAA" + r(URLSAFE, 7) + "/messages?key=AIzaSyDdI0hCZtE6vySjMm"
        "-WEfRq3CPzqKqqsHI&token=" + r(URLSAFE, 43) + "%3D",
        "https://chat.googleapis.com/v1/spaces/AAAA" + r(URLSAFE, 7) + "/messages?token=" + r(URLSAFE, 43)
        + "&key=AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
        "https://hooks.zapier.com/hooks/catch/" + r(DIGITS, 7) + "/" + r(LOWER_ALNUM, 6) + "/",
        "https://maker.ifttt.com/trigger/backup_done/with/key/" + r(URLSAFE, 22),
        "https://maker.ifttt.com/trigger/door/json/with/key/" + r(URLSAFE, 43),
        "https://open.feishu.cn/open-apis/bot/v2/hook/" + guid(),
        "https://open.larksuite.com/open-apis/bot/v2/hook/" + guid(),
        "https://oapi.dingtalk.com/robot/send?access_token=" + r(HEX, 64),
        "https://hooks.slack.com/workflows/T" + r(UPPER_ALNUM, 9) + "/A" + r(UPPER_ALNUM, 10) + "/"
        + r(DIGITS, 18) + "/" + r(ALNUM, 24),
        "https://canary.discord.com/api/webhooks/" + r(DIGITS, 19) + "/" + r(URLSAFE, 68),
    ]
    contexts = ["TEAMS_WEBHOOK_URL={u}", "post the alert to {u} when the job fails", '{{"webhook": "{u}"}}',
                "curl -X POST -H 'Content-Type: application/json' -d '{{\"text\":\"hi\"}}' \"{u}\"",
                "webhook_url: {u}", "<{u}>", "notify: {u}.", "[alerts]\nurl = \"{u}\"\n"]
    out = []
    for i, url in enumerate(urls):
        out.append(("webhook-url", contexts[i % len(contexts)].format(u=url), url))
        if i < 8:
            out.append(("webhook-url", contexts[(i + 3) % len(contexts)].format(u=url), url))
    return out


def webhook_negatives() -> list[str]:
    g = "00000000-0000-0000-0000-000000000000"
    return [
        "https://xxxx.webhook.office.com/webhookb2/" + g + "@" + g + "/IncomingWebhook/" + "0" * 32 + "/" + g,
        "https://contoso.webhook.office.com/webhookb2/<group-id>@<tenant-id>/IncomingWebhook/<id>/<owner>",
        "https://{tenant}.webhook.office.com/webhookb2/{guid}@{tenant}/IncomingWebhook/{id}/{owner}",
        "Create an Incoming Webhook connector in the Teams channel; the URL ends in /IncomingWebhook/<id>/<guid>.",
        "https://prod-12.westus.logic.azure.com:443/workflows/" + r(HEX, 32)
        + "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0",
        "https://prod-12.westus.logic.azure.com/workflows/" + r(HEX, 32)
        + "/triggers/manual/paths/invoke?api-version=2016-06-01&sig=<signature>",
        "https://prod-12.westus.logic.azure.com/workflows/{id}/triggers/manual/paths/invoke?sig=${SIG}",
        "https://chat.googleapis.com/v1/spaces/SPACE_ID/messages?key=KEY&token=TOKEN",
        "https://chat.googleapis.com/v1/spaces/AAAA" + r(URLSAFE, 7) + "/messages?key=<key>&token=YOUR_TOKEN",
        "https://chat.googleapis.com/v1/spaces/AAAA" + r(URLSAFE, 7) + "/messages",
        "GET https://chat.googleapis.com/v1/spaces/AAAA" + r(URLSAFE, 7) + "/messages?pageSize=50",
        "https://hooks.zapier.com/hooks/catch/<account>/<hook>/",
        "https://maker.ifttt.com/trigger/{event}/with/key/{your_key}",
        "https://open.feishu.cn/open-apis/bot/v2/hook/xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
        "https://oapi.dingtalk.com/robot/send?access_token=${DINGTALK_TOKEN}",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "Slack, Teams, Google Chat and Discord webhooks are configured under alerts.webhooks in values.yaml.",
        "webhook_url: ${{ secrets.TEAMS_WEBHOOK_URL }}",
        "https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook",
        "https://developers.google.com/workspace/chat/quickstart/webhooks",
        "https://outlook.office.com/mail/inbox",
        "https://management.azure.com/subscriptions/" + guid() + "/resourceGroups/rg/providers/Microsoft.Logic/"
        "workflows/wf?api-version=2016-06-01",
        "https://webhook.site/" + guid(),
        "https://example.com/webhooks/github?delivery=" + guid(),
    ]


# --- the families of issue 20 --------------------------------------------------------------

TOKENS: dict[str, list] = {
    "terraform-token": [lambda: r(ALNUM, 14) + ".atlasv1." + r(URLSAFE, RNG.choice([60, 67, 70]))],
    "braintree-token": [lambda: "access_token$" + RNG.choice(["production", "sandbox"]) + "$" + r(LOWER_ALNUM, 16)
                        + "$" + r(HEX, 32)],
    "mailchimp-key": [lambda: r(HEX, 32) + "-us" + str(RNG.randint(1, 21))],
    "postman-key": [lambda: "PMAK-" + r(HEX, 24) + "-" + r(HEX, 34)],
    "facebook-token": [lambda: "EAA" + RNG.choice("BGCMIJ") + r(ALNUM, RNG.choice([150, 180, 200]))],
    "flyio-token": [lambda: "fo1_" + r(URLSAFE, 43), lambda: "fm2_" + r(B64, 220) + "==",
                    lambda: "fm1r_" + r(B64, 160)],
    "newrelic-key": [lambda: "NRAK-" + r(UPPER_ALNUM, 27), lambda: "NRII-" + r(URLSAFE, 32)],
    "dynatrace-token": [lambda: "dt0c01." + r(UPPER_ALNUM, 24) + "." + r(UPPER_ALNUM, 64)],
    "pulumi-token": [lambda: "pul-" + r(HEX, 40)],
    "figma-token": [lambda: "figd_" + r(URLSAFE, 40)],
    "alibaba-key": [lambda: "LTAI" + r(ALNUM, RNG.choice([16, 20]))],
    "tencent-key": [lambda: "AKID" + r(ALNUM, 32)],
    "yandex-key": [lambda: "AQVN" + r(URLSAFE, 36)],
    "jfrog-token": [lambda: "AKCp" + r(ALNUM, 69), lambda: "cmVmd" + r(ALNUM, 59)],
    "typeform-token": [lambda: "tfp_" + r(URLSAFE, 59)],
    "frameio-token": [lambda: "fio-u-" + r(URLSAFE, 64)],
    "prefect-key": [lambda: "pnu_" + r(ALNUM, 36)],
    "readme-key": [lambda: "rdme_" + r(LOWER_ALNUM, 70)],
    "rubygems-key": [lambda: "rubygems_" + r(HEX, 48)],
    "clojars-token": [lambda: "CLOJARS_" + r(LOWER_ALNUM, 60)],
    "infracost-key": [lambda: "ico-" + r(ALNUM, 32)],
    "scalingo-token": [lambda: "tk-us-" + r(URLSAFE, 48)],
    "brevo-key": [lambda: "xkeysib-" + r(HEX, 64) + "-" + r(ALNUM, 16),
                  lambda: "xsmtpsib-" + r(HEX, 64) + "-" + r(ALNUM, 16)],
    "mapbox-token": [lambda: "sk.eyJ1Ijoi" + r(ALNUM, 60) + "." + r(URLSAFE, 22)],
    "duffel-token": [lambda: "duffel_" + RNG.choice(["live", "test"]) + "_" + r(URLSAFE, 43)],
    "easypost-key": [lambda: RNG.choice(["EZAK", "EZTK"]) + r(ALNUM, 54)],
    "shippo-token": [lambda: "shippo_" + RNG.choice(["live", "test"]) + "_" + r(HEX, 40)],
    "flutterwave-key": [lambda: "FLWSECK" + RNG.choice(["", "_TEST"]) + "-" + r(HEX, 32) + "-X"],
    "razorpay-key": [lambda: "rzp_" + RNG.choice(["live", "test"]) + "_" + r(ALNUM, 14)],
    "plaid-token": [lambda: "access-" + RNG.choice(["sandbox", "development", "production"]) + "-" + guid()],
    "airtable-token": [lambda: "pat" + r(ALNUM, 14) + "." + r(HEX, 64)],
    "contentful-token": [lambda: "CFPAT-" + r(URLSAFE, 43)],
    "adobe-key": [lambda: "p8e-" + r(ALNUM, 32)],
    "sonar-token": [lambda: "sq" + RNG.choice("upa") + "_" + r(HEX, 40)],
    "intercom-token": [lambda: base64.b64encode(f"tok:{guid()}:1:0".encode()).decode()],
    "perplexity-key": [lambda: "pplx-" + r(ALNUM, 48)],
    "xai-key": [lambda: "xai-" + r(ALNUM, 80)],
    "replicate-token": [lambda: "r8_" + r(ALNUM, 37)],
    "langsmith-key": [lambda: "lsv2_" + RNG.choice(["pt", "sk"]) + "_" + r(HEX, 32) + "_" + r(HEX, 10)],
    "cerebras-key": [lambda: "csk-" + r(LOWER_ALNUM, 48)],
    "onepassword-token": [lambda: "ops_eyJzaWduSW5BZGRyZXNzIjoi" + r(B64, 300)],
    "openshift-token": [lambda: "sha256~" + r(URLSAFE, 43)],
    "harness-token": [lambda: RNG.choice(["pat", "sat"]) + "." + r(URLSAFE, 22) + "." + r(ALNUM, 24) + "."
                      + r(ALNUM, 20)],
    "sourcegraph-token": [lambda: "sgp_" + r(HEX, 40), lambda: "sgp_" + r(HEX, 16) + "_" + r(HEX, 40),
                          lambda: "sgp_local_" + r(HEX, 40)],
    "buildkite-token": [lambda: "bkua_" + r(HEX, 40)],
    "circleci-token": [lambda: "CCIPAT_" + r(ALNUM, 22) + "_" + r(HEX, 40)],
    "nuget-key": [lambda: "oy2" + r(LOWER_ALNUM, 43)],
    "hubspot-token": [lambda: "pat-" + RNG.choice(["na1", "eu1", "na2"]) + "-" + guid()],
    "clickup-token": [lambda: "pk_" + r(DIGITS, 8) + "_" + r(UPPER_ALNUM, 32)],
    "grafana-token": [lambda: "eyJrIjoi" + r(ALNUM, 80) + "=="],
    "mailgun-key": [lambda: r(HEX, 32) + "-" + r(HEX, 8) + "-" + r(HEX, 8)],
}

# Where a token appears; prose first, as the issue found them missed there.
CONTEXTS = [
    "here is the key {t} -- rotate it tomorrow",
    "(the old one was {t})",
    "I pasted {t} by mistake",
    "export {NAME}={t}",
    '{{"{name}": "{t}"}}',
    "{name}: {t}",
    'client = Client("{t}")',
    "use `{t}` for staging",
]
NAMES = [("SERVICE_CRED", "service_cred"), ("CI_VALUE", "ci_value"), ("APP_AUTH", "app_auth"), ("X", "x")]


def token_positives() -> list[tuple[str, str, str]]:
    out = []
    for family, makers in TOKENS.items():
        for i, template in enumerate(RNG.sample(CONTEXTS, 4)):
            token = makers[i % len(makers)]()
            name, lower = RNG.choice(NAMES)
            out.append((family, template.format(t=token, NAME=name, name=lower), token))
    return out


def context_positives() -> list[tuple[str, str, str]]:
    """Families found by where they stand: bootstrap tokens, bare Azure keys,
    and assignments whose values hold dots, ``$`` or a subscript."""
    out = []

    def add(family: str, text: str, secret: str) -> None:
        assert secret in text, (family, text, secret)
        out.append((family, text, secret))

    def boot() -> str:
        return r(LOWER_ALNUM, 6) + "." + r(LOWER_ALNUM, 16)

    for template in ["kubeadm join 10.0.0.10:6443 --token {t} --discovery-token-ca-cert-hash sha256:" + r(HEX, 64),
                     "bootstrapTokens:\n- groups:\n  - system:bootstrappers:kubeadm:default-node-token\n  token: {t}\n",
                     'token: "{t}"', "KUBEADM_TOKEN={t}", "the join token is {t}",
                     "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n"
                     "    token: {t}\n", "bootstrap token {t} expires in 24h",
                     "kubeadm token create {t} --ttl 2h"]:
        t = boot()
        add("bootstrap-token", template.format(t=t), t)

    for template in ["the storage account key is {k}", "Azure storage key for acme-prod: {k}",
                     "AZURE_STORAGE_KEY={k}", "key1 of storageacct1 (azure): {k}",
                     '"storageAccountKey": "{k}"', "az storage blob upload --account-key {k} -f a.txt"]:
        k = r(B64, 86) + "=="
        add("azure-key", template.format(k=k), k)
    for template in ["AZURE_CLIENT_SECRET={s}", "client secret for the app registration: {s}"]:
        s = r(ALNUM, 3) + str(RNG.randint(0, 9)) + "Q~" + r(ALNUM + "_~.-", 34)
        add("azure-key", template.format(s=s), s)

    assignments = [
        ("ACCESS_TOKEN={v}", lambda: r(UPPER_ALNUM, 7) + "." + r(UPPER_ALNUM, 8) + "." + r(ALNUM, 8)),
        ("api_secret: {v}", lambda: r(LOWER_ALNUM, 6) + "." + r(LOWER_ALNUM, 18)),
        ('configuration.api_key["appKeyAuth"] = "{v}"', lambda: r(HEX, 32)),
        ("config.api_key['api_key'] = '{v}'", lambda: r(ALNUM, 32)),
        ('settings["SECRET_KEY"] = "{v}"', lambda: r(ALNUM + "!@#%^&*-_=+", 50)),
        ("SECRET={v}", lambda: r(ALNUM, 6) + "$" + r(ALNUM, 6) + "$" + r(ALNUM, 8)),
        ("client_secret = {v}", lambda: r(ALNUM, 10) + "." + r(ALNUM, 12) + "." + r(ALNUM, 10)),
        ("DD_API_KEY={v}", lambda: r(HEX, 32)), ("DD_APP_KEY={v}", lambda: r(HEX, 40)),
        ("datadog api key is {v}", lambda: r(HEX, 32)),
        ("CLOUDFLARE_API_TOKEN={v}", lambda: r(URLSAFE, 40)), ("cloudflare token: {v}", lambda: r(URLSAFE, 40)),
        ("OKTA_API_TOKEN={v}", lambda: "00" + r(URLSAFE, 40)), ("PINECONE_API_KEY={v}", lambda: guid()),
        ("WANDB_API_KEY={v}", lambda: r(HEX, 40)), ("ZENDESK_API_TOKEN={v}", lambda: r(ALNUM, 40)),
        ("TWITCH_CLIENT_SECRET={v}", lambda: r(LOWER_ALNUM, 30)), ("SNYK_TOKEN={v}", lambda: guid()),
        ("NETLIFY_AUTH_TOKEN={v}", lambda: r(URLSAFE, 43)), ("VERCEL_TOKEN={v}", lambda: r(ALNUM, 24)),
        ("LOB_API_KEY={v}", lambda: "live_" + r(HEX, 35)), ("asana_token: {v}", lambda: "1/" + r(DIGITS, 16) + ":"
                                                              + r(HEX, 32)),
        ("COINBASE_API_SECRET={v}", lambda: r(B64, 86) + "=="), ("twilio auth token: {v}", lambda: r(HEX, 32)),
        ("password: {v}", lambda: r(ALNUM, 6) + "." + r(ALNUM, 6) + "." + r(DIGITS, 4)),
    ]
    for template, make in assignments:
        v = make()
        add("credential-assignment", template.format(v=v), v)

    # A name and a value with only a space between them.
    for template, make in [("the cloudflare api token {v} expires in May", lambda: r(URLSAFE, 40)),
                           ("client secret {v} from the portal", lambda: r(ALNUM, 32)),
                           ("aws secret key {v}", lambda: r(B64, 40)), ("use access token {v} for the API", lambda: r(URLSAFE, 43)),
                           ("okta api token 00{v}", lambda: r(URLSAFE, 40))]:
        v = make()
        text = template.format(v=v)
        secret = "00" + v if "00{v}" in template else v
        add("credential-assignment", text, secret)
    for template in ["wandb login {v}", "run `wandb login {v}` once"]:
        v = r(HEX, 40)
        add("cli-credential", template.format(v=v), v)
    return out


def family_negatives() -> list[str]:
    """Look-alikes of the new families, documentation placeholders, references."""
    placeholders = ["PMAK-<your-api-key>", "PMAK-" + "x" * 24 + "-" + "x" * 34, "pnu_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                    "xkeysib-...", "EAA...", "access_token$production$<merchant_id>$<token>",
                    "0" * 32 + "-us6", "your-mailchimp-key-us6", "<api-key>-us21", "TFE_TOKEN=<token>.atlasv1.<rest>",
                    "NRAK-XXXXXXXXXXXXXXXXXXXXXXXXXXX", "dt0c01.<token-id>.<secret>", "sk.eyJ...",
                    "rzp_live_XXXXXXXXXXXXXX", "FLWSECK_TEST-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-X",
                    "ghp_example_token_do_not_use_0000000000", "AKIAIOSFODNN7EXAMPLE",
                    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                    "AWS_ACCESS_KEY_ID=AKIAI44QH8DHBEXAMPLE", "AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
                    "password = 'example-password-1'", "api_key: sample_api_key_123", "token: dummy-token-42",
                    "DB_PASSWORD=changeme", "DB_PASSWORD=postgres", "token: abcdef.xxxxxxxxxxxxxxxx",
                    "kubeadm join 10.0.0.10:6443 --token <token> --discovery-token-ca-cert-hash sha256:<hash>",
                    "kubeadm join 10.0.0.10:6443 --token ${KUBEADM_TOKEN} --discovery-token-unsafe-skip-ca-verification",
                    "AccountKey=<storage-account-key>", "AZURE_STORAGE_KEY=${{ secrets.AZURE_STORAGE_KEY }}",
                    "AZURE_CLIENT_SECRET=<client-secret>", "mapbox public token pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjazAwMDAwMDAifQ.abc"]
    look_alikes = [
        "lodash@4.17.21: integrity sha512-" + base64.b64encode(RNG.randbytes(64)).decode(),
        '"node_modules/@azure/storage-blob": {"version": "12.17.0", "integrity": "sha512-'
        + base64.b64encode(RNG.randbytes(64)).decode() + '"}',
        '<script src="https://cdn.example.com/a.js" integrity="sha384-' + base64.b64encode(RNG.randbytes(48)).decode()
        + '" crossorigin="anonymous"></script>',
        "signature: " + base64.b64encode(RNG.randbytes(64)).decode(),
        "ed25519 sig " + base64.b64encode(RNG.randbytes(64)).decode() + " verified",
        "payload=" + base64.b64encode(RNG.randbytes(64)).decode() + " (64 random bytes, base64)",
        "The storage account has a blob container named backups-2024 and a queue named jobs.",
        "go.sum: github.com/Azure/azure-sdk-for-go/sdk/storage/azblob v1.3.0 h1:" + base64.b64encode(RNG.randbytes(32)).decode(),
        "image: registry.example.com/app@sha256:" + r(HEX, 64), "commit " + r(HEX, 40) + " (HEAD -> main)",
        "request " + r(HEX, 32) + "-" + r(HEX, 8) + " done",
        "trace " + r(HEX, 32) + "-" + r(HEX, 8) + "-" + r(HEX, 4) + " ok",
        "etag " + r(HEX, 32) + "-12", "build " + r(HEX, 32) + "-us", "region=us-east-1 zone=us-east-1a",
        "version 1.28.4.atlasv1 is not a token", "see docs.example.com/atlasv1/intro",
        "access_token is returned in the response; refresh_token too", "pk_live_" + r(ALNUM, 24),
        "pk_" + r(DIGITS, 8) + "_short", "pat-na1 is the HubSpot region prefix", "pat.md and sat.md are notes",
        "sq_" + r(HEX, 40), "squid_" + r(HEX, 40), "xai-sdk-python", "csk-token-count", "pplx-api docs",
        "ico-favicon.png", "pul-request template", "tk-us-east settings", "figd_ prefix marks Figma tokens",
        "r8_ tokens belong to Replicate", "lsv2_pt_ and lsv2_sk_ are LangSmith prefixes", "EZAK and EZTK prefixes",
        "oy2 is the NuGet prefix", "LTAI prefixes Alibaba access keys", "AKID prefixes Tencent SecretIds",
        "sha256~ prefixes OpenShift tokens", "ops_ prefixes 1Password service tokens",
        "dG9rOg is the base64 of 'tok:'", "cmVmdGtu decodes to reftkn",
        "the file abc123.example.com is a host, not a token",
        "token: " + r(LOWER, 6) + "." + r(LOWER, 16), "version: 1.2." + r(DIGITS, 3),
        "hostname: node-" + r(LOWER_ALNUM, 5) + ".cluster.local",
        "uuid " + guid() + " and access-denied-" + guid(),
        "Access-Control-Allow-Origin: *", "access-sandbox mode is on for the demo",
    ]
    references = [
        "ACCESS_TOKEN=${ACCESS_TOKEN}", "ACCESS_TOKEN=$ACCESS_TOKEN", "API_KEY=$(vault kv get -field=key secret/ci)",
        "api_key = settings.API_KEY", "token: config.token.value", "password = self.db.password2",
        "secret_key = app.config.secret_key", "api_token: {{ .Values.apiToken }}",
        'password: "{{ .Values.db.password }}"', "SECRET=$SECRET_FROM_VAULT", "apiKey: process.env.API_KEY",
        'apiKey = os.environ["API_KEY"]', "token = get_token()", "key_file = /etc/ssl/private/key.pem",
        "api_token: <api-token>", "token: ${{ secrets.API_TOKEN }}", "client_secret = cfg.oauth.client_secret",
        'configuration.api_key["appKeyAuth"] = os.environ["DD_APP_KEY"]', 'config.api_key["api_key"] = API_KEY',
        "configuration.api_key_prefix['api_key'] = 'Bearer'", "api_key = settings.secrets.stripe.api_key_v2",
        "ACCESS_TOKEN=token.txt", "ACCESS_TOKEN=./secrets/access.token", "password: Schema$inbound",
        "secret: vault:secret/data/app#password", "token_url: auth.example.com", "token_host=api.example.co.uk",
        "API_TOKEN=v2.4.1", "TOKEN_VERSION=3.11.2", "secret_name: app.prod.db-credentials",
        "spring.datasource.password=${DB_PASSWORD:}", "password: !vault |", "token = request.headers.get('X-Token')",
        "apiKey: this.config.apiKey", "token: ctx.secrets.GITHUB_TOKEN", "secret = os.getenv('SECRET', default)",
        "$token = $request->bearerToken();", "api_key => env('MAILCHIMP_KEY')", "token: input.token",
    ]
    kube = [
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  template:\n"
        "    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-token\ntype: Opaque\nstringData:\n  token: ${APP_TOKEN}\n",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: ci\nautomountServiceAccountToken: false\n",
        "kubeadm token list\nTOKEN  TTL  EXPIRES  USAGES  DESCRIPTION  EXTRA GROUPS\n",
        "kubectl -n kube-system get secret bootstrap-token-abcdef -o yaml",
        "tokenRef:\n  name: bootstrap-token\n  key: token-secret",
        "kubeadm init --pod-network-cidr=10.244.0.0/16 --token-ttl 0",
        "serviceAccountName: builder\nvolumes:\n- name: token\n  projected:\n    sources:\n    - serviceAccountToken:\n"
        "        path: token\n        expirationSeconds: 3600\n",
    ]
    more = [
        # lockfiles and digests
        "yarn.lock: integrity sha1-" + base64.b64encode(RNG.randbytes(20)).decode(),
        '"integrity": "sha512-' + base64.b64encode(RNG.randbytes(64)).decode() + '",\n"dev": true',
        "pnpm-lock.yaml: resolution: {integrity: sha512-" + base64.b64encode(RNG.randbytes(64)).decode() + "}",
        "Cargo.lock: checksum = \"" + r(HEX, 64) + "\"", "poetry.lock: hash = \"sha256:" + r(HEX, 64) + "\"",
        "requirements.txt: requests==2.31.0 --hash=sha256:" + r(HEX, 64),
        "flake.lock: \"narHash\": \"sha256-" + base64.b64encode(RNG.randbytes(32)).decode() + "\"",
        "Gemfile.lock: BUNDLED WITH 2.5.3", "composer.lock: \"content-hash\": \"" + r(HEX, 32) + "\"",
        "SHA256 (qmem-1.0.tar.gz) = " + r(HEX, 64), "sha512sum: " + r(HEX, 128),
        "gpg: Signature made Mon 01 Jan 2024; using EDDSA key " + r(HEX, 40).upper(),
        # base64 data
        "data:application/octet-stream;base64," + base64.b64encode(RNG.randbytes(64)).decode(),
        "cert: " + base64.b64encode(RNG.randbytes(180)).decode(),
        "nonce=" + base64.b64encode(RNG.randbytes(16)).decode() + " iv=" + base64.b64encode(RNG.randbytes(12)).decode(),
        # dotted identifiers and shell variables
        "export PATH=$HOME/.local/bin:$PATH", 'echo "$API_TOKEN" | docker login --password-stdin',
        "TOKEN=${TOKEN:-}", "SECRET_KEY=${SECRET_KEY:?missing}", "password: ${DB_PASS:-postgres}",
        "api_key = self.settings.providers.openai.api_key", "token: $.data.attributes.token",
        "secret: spec.template.spec.containers[0].env[1].valueFrom.secretKeyRef.key",
        "auth_token = request.session.auth_token", "key = cache.key.for_user(user.id)",
        "password = form.cleaned_data.password1", "api_key: str = Field(default_factory=lambda: os.environ['K'])",
        # webhook docs
        "Set TEAMS_WEBHOOK_URL to the URL Teams shows after you add the Incoming Webhook connector.",
        "Power Automate: the trigger URL has a sig= parameter; treat the whole URL as a secret.",
        "Google Chat webhooks: POST JSON to https://chat.googleapis.com/v1/spaces/{space}/messages?key=…&token=…",
        "DingTalk robots take ?access_token=<token>; Feishu bots take /bot/v2/hook/<uuid>.",
        "zapier: catch hook created at hooks.zapier.com (URL in 1Password)",
        # manifests without tokens
        "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nkubernetesVersion: v1.29.0\n",
        "apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nbootstrapTokens:\n- token: \"<token>\"\n  ttl: 24h0m0s\n",
        "kubeadm token generate  # prints a new token; do not paste it here",
        "helm install app ./chart --set image.tag=" + r(HEX, 7) + " --set replicas=3",
        # mnemonic-like prose
        "mnemonic devices help: every good boy deserves fudge, my very educated mother just served us nachos",
        "the wallet asks for twelve words; write them down in order and check the last one",
        "BIP39 lists 2048 words from abandon to zoo; each phrase ends with a checksum word",
        # a name and a word after it
        "the token bucket holds 100 tokens per second", "sort key created_at_2024_05 orders the rows",
        "the secret sauce is the cache warmer", "login with your SSO account", "docker login registry.example.com",
        "idempotency key " + guid() + " was reused", "next page token CAoQAAAAAAAAAABBBBBB is opaque",
        "token count 1234567890 exceeds the limit", "public key " + base64.b64encode(RNG.randbytes(32)).decode(),
        "api key rotation is due on 2024-06-01", "the secret keeper role", "wandb login --relogin",
    ]
    return placeholders + look_alikes + references + kube + more


def positives() -> list[tuple[str, str, str]]:
    return seed_phrase_positives() + webhook_positives() + token_positives() + context_positives()


def negatives() -> list[str]:
    return seed_phrase_negatives() + webhook_negatives() + family_negatives()
