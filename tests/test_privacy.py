"""Issue 11 items 2–6: every field scanned, no bypass, nothing echoed, no unasked egress, bad Unicode.

The scanner's own families and the fence have their own tests (test_secretscan, test_fence);
these check the paths around them: what is scanned where, what is refused, what is printed.
"""

import json
from qmem import config
from qmem.config import Config
from qmem.diagnostics import Warnings
from qmem.errors import ConfigError, InputError
from qmem.hosts.session import PluginSession
from qmem.records import NewRecord
from qmem.runtime import Runtime
from qmem.store import ToolError, qmem_correct, qmem_search, qmem_store
from qmem.sync import flush

from .fakes import Fault
from .sessionfiles import SessionFile
from .support import GatewayTestCase, TempHomeTestCase, write_config

# Synthetic values, assembled here so that no scanner flags this file.
GITHUB = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
AWS_ID = "AKIA" + "Q3ZK7TXW2M5PLR8N"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
BEARER_VALUE = "eyJ0eXAiOi" + "Jk9f8e7d6c5b4a3z2y1x0w"
ARGS = {"text": "Releases go out on Tuesdays", "project_id": "shop", "kind": "decision"}


class EveryFieldTests(GatewayTestCase):
    """Item 2: every field a user or a model supplies passes the scanner."""

    def test_a_credential_in_any_field_is_refused_before_any_io(self):
        rt = self.runtime()
        cases = [("project_id", GITHUB, "github-token"), ("scope", AWS_ID, "aws-access-key"),
                 ("agent_id", NPM, "npm-token"), ("source", f"pasted from {GITHUB}", "github-token"),
                 ("text", f"token {NPM}", "npm-token")]
        for field, value, family in cases:
            with self.subTest(field=field), self.assertRaises(ToolError) as caught:
                qmem_store(rt, {**ARGS, field: value})
            message = str(caught.exception)
            self.assertIn(family, message)
            self.assertNotIn(value, message)
            if field != "text":
                self.assertIn(f"in {field}", message)
        with self.assertRaises(ToolError):
            qmem_correct(rt, {**ARGS, "supersedes_id": "rec-1", "supersede_reason": f"key was {AWS_ID}"})
        self.assertEqual(self.gateway.requests, [])
        self.assertEqual(rt.index.status().records, 0)

    def test_cli_store_refuses_too(self):
        result = self.run_module("qmem.local", "store", "--queue-only", "--project", GITHUB, "--text", "note")
        self.assertEqual(result.code, 1)
        self.assertIn("github-token", result.stderr)
        self.assertNotIn(GITHUB, result.stderr + result.stdout)

    def test_a_search_query_carrying_a_credential_is_not_sent(self):
        with self.assertRaises(InputError) as caught:
            qmem_search(self.runtime(), {"query": f"who owns {GITHUB}"})
        self.assertNotIn(GITHUB, str(caught.exception))
        self.assertEqual(self.gateway.requests, [])


class NoBypassTests(GatewayTestCase):
    """Item 3: restored and old queued writes are scanned again; a hit fails, never sends."""

    def test_a_queued_store_restored_from_a_session_is_scanned(self):
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        local_id = "local-" + "d" * 32
        session.call("qmem_store", {**ARGS, "text": f"deploy token {GITHUB}"},
                     details={"qmem": 1, "queued": True, "record": {"id": local_id}})
        report = json.loads(self.run_module("qmem.local", "import", "--json").stdout)
        self.assertEqual((report["queued_restored"], report["queued_refused"]), (1, 1))
        record = self.runtime().index.get(local_id)
        self.assertEqual(record.state, "failed")
        self.assertIn("github-token", record.reason)
        self.assertNotIn(GITHUB, record.reason)
        flush(self.runtime())
        self.assertEqual(self.gateway.requests_to("/v1/memories", "POST"), [])
        queue = self.run_module("qmem.local", "queue")
        self.assertIn("github-token", queue.stdout)
        self.assertNotIn(GITHUB, queue.stdout + queue.stderr)

    def test_flush_scans_what_an_older_qmem_queued(self):
        rt = self.runtime()
        clean = rt.outbox.enqueue(NewRecord(**ARGS))
        dirty = rt.outbox.enqueue(NewRecord(**{**ARGS, "text": "legacy row"}))
        with rt.index.transaction() as tx:  # as an older qmem, which did not scan scope, left it
            tx.execute("UPDATE records SET scope = ? WHERE local_id = ?", (AWS_ID, dirty.local_id))
        report = flush(rt)
        self.assertEqual((report.synced, report.failed), (1, 1))
        bodies = [r.json for r in self.gateway.requests_to("/v1/memories", "POST")]
        self.assertEqual([b["text"] for b in bodies], [clean.text])
        failed = rt.index.get(dirty.id)
        self.assertEqual(failed.state, "failed")
        self.assertIn("aws-access-key in scope", failed.reason)


class NothingEchoedTests(GatewayTestCase):
    """Item 4: server-supplied text is redacted before it is shown or stored."""

    def inject_echo(self, times=1):
        detail = [{"loc": ["body", "text"], "msg": f"rejected; request had Authorization: Bearer {BEARER_VALUE}"}]
        self.gateway.inject(Fault.status(422, body={"error": "validation_error", "detail": detail},
                                         path="/v1/memories", times=times))

    def test_tool_error_cli_json_and_outbox_reason(self):
        self.inject_echo()
        with self.assertRaises(ToolError) as caught:
            qmem_store(self.runtime(), ARGS)
        self.assertIn("[redacted: bearer-token]", str(caught.exception))
        self.assertNotIn(BEARER_VALUE, str(caught.exception))
        self.inject_echo(times=2)
        for args in (["store", "--project", "shop", "--text", "cli note"],
                     ["store", "--project", "shop", "--text", "cli note 2", "--json"]):
            result = self.run_module("qmem.local", *args)
            self.assertEqual(result.code, 1)
            self.assertNotIn(BEARER_VALUE, result.stdout + result.stderr)
            self.assertIn("redacted", result.stdout + result.stderr)
        rt = self.runtime()
        queued = rt.outbox.enqueue(NewRecord(**ARGS))
        self.inject_echo()
        flush(rt)
        reason = rt.index.get(queued.id).reason
        self.assertIn("[redacted: bearer-token]", reason)
        self.assertNotIn(BEARER_VALUE, reason)

    def test_an_unknown_config_key_that_looks_like_a_token_is_not_echoed(self):
        for key in (GITHUB, AWS_ID, "k" + "9f8e7d6c5b4a3z2y1x0w9v8u7t6s5r4q"):
            with self.subTest(key=key[:6]), self.assertRaises(ConfigError) as caught:
                config.parse_config({key: 1})
            self.assertNotIn(key, str(caught.exception))
            self.assertIn("not shown", str(caught.exception))
        with self.assertRaises(ConfigError) as caught:
            config.parse_config({"recall": {"colection": "x"}})
        self.assertIn("recall.colection", str(caught.exception))  # a plain typo is still named


class NoUnaskedEgressTests(TempHomeTestCase):
    """Item 5: recall is off until both URLs are in the config — nothing sent, nothing said."""

    def test_defaults_have_no_service_urls(self):
        recall = Config().recall
        self.assertIsNone(recall.qdrant_url)
        self.assertIsNone(recall.embeddings_url)
        self.assertFalse(recall.active)
        half = config.parse_config({"recall": {"qdrantUrl": "http://127.0.0.1:6333"}}).recall
        self.assertFalse(half.active)
        both = config.parse_config({"recall": {"qdrantUrl": "http://127.0.0.1:6333",
                                               "embeddingsUrl": "http://127.0.0.1:1/v1"}}).recall
        self.assertTrue(both.active)

    def test_a_prompt_with_no_config_goes_nowhere_and_nothing_is_printed(self):
        said = []
        session = PluginSession(host="pi", cwd=self.home, env=dict(self.env), warnings=Warnings(said.append))
        self.addCleanup(session.close)
        messages = [{"role": "user", "content": "how do we deploy?"}]
        self.assertEqual(session.context(messages), messages)
        self.assertIsNone(session.recall._embeddings)  # no client was ever built
        self.assertIsNone(session.recall._qdrant)
        self.assertEqual(said, [])

    def test_a_prompt_carrying_a_credential_is_not_embedded(self):
        from .fakes import FakeEmbeddings, FakeQdrant

        qdrant = FakeQdrant().start()
        embeddings = FakeEmbeddings(models={"bge-m3": 8}).start()
        for fake in (qdrant, embeddings):
            self.addCleanup(fake.stop)
        qdrant.create_collection("qmem_memories", size=8)
        write_config(self.env, {"recall": {"qdrantUrl": qdrant.url, "embeddingsUrl": embeddings.url + "/v1",
                                           "dimension": 8}})
        session = PluginSession(host="pi", cwd=self.home, env=dict(self.env))
        self.addCleanup(session.close)
        session.context([{"role": "user", "content": f"use {GITHUB} to push"}])
        self.assertEqual(embeddings.requests, [])
        session.context([{"role": "user", "content": "how do we push?"}])
        self.assertEqual(len(embeddings.requests), 1)


class BadUnicodeTests(GatewayTestCase):
    """Item 6: bad Unicode is input, not a crash; a URL a resolver would reject never loads."""

    def test_lone_surrogates_are_input_errors(self):
        rt = self.runtime()
        for field in ("text", "source", "supersede_reason"):
            args = {**ARGS, field: "bad \ud800 text"}
            if field == "supersede_reason":
                args["supersedes_id"] = "rec-1"
            with self.subTest(field=field), self.assertRaises(InputError) as caught:
                qmem_store(rt, args)
            self.assertIn("lone surrogate", str(caught.exception))
        for field in ("project_id", "scope", "agent_id"):
            with self.subTest(field=field), self.assertRaises(InputError):
                qmem_store(rt, {**ARGS, field: "p\udc80"})
        with self.assertRaises(InputError):
            qmem_search(rt, {"query": "deploy \udcff"})
        self.assertEqual(self.gateway.requests, [])

    def test_urls_with_invisible_or_separator_characters_or_bad_hosts_are_refused(self):
        for url in ("https://gw.example\u0085/", "https://gw\u2028.example", "https://gw\u200b.example",
                    "https://gw.example/\u202e", "https://gw.exa\u00a0mple", "https://a..b.example",
                    "https://" + "a" * 64 + ".example", "https://.example", "https://gw_\ufeff.example",
                    "https://gw.example\udc80"):
            with self.subTest(url=ascii(url)), self.assertRaises(ConfigError) as caught:
                config.validate_url(url, name="url")
            self.assertEqual(len(str(caught.exception).splitlines()), 1)
        for url in ("https://gw.example", "http://127.0.0.1:8080/v1", "http://[::1]:6333",
                    "https://bücher.example", "http://my_host.internal:8000"):
            with self.subTest(url=url):
                self.assertEqual(config.validate_url(url, name="url"), url)

    def test_a_host_the_resolver_rejects_queues_the_store_never_loses_it(self):
        rt = Runtime(self.env, config=Config(url="http://a..b.example"))
        self.addCleanup(rt.close)
        result = qmem_store(rt, ARGS)
        self.assertTrue(result.details["queued"])
        self.assertEqual(result.details["gateway"]["reason"], "dns")
        self.assertEqual(rt.outbox.pending_count(), 1)

    def test_a_credential_with_a_stray_character_queues_and_leaves_the_breaker_alone(self):
        self.env["QMEM_GATEWAY_API_KEY"] = "key-with-\u2603-snowman"
        rt = self.runtime()
        result = qmem_store(rt, ARGS)
        self.assertTrue(result.details["queued"])
        self.assertIn("could not be encoded", result.text)
        self.assertEqual(rt.breaker_for(self.gateway.url).snapshot()["state"], "closed")
        self.assertEqual(self.gateway.requests, [])

    def test_a_config_nested_thousands_deep_is_one_line(self):
        path = config.config_path(self.env)
        path.write_text('{"recall": ' * 5000 + "{}" + "}" * 5000)
        result = self.run_module("qmem.local", "status")
        self.assertEqual(result.code, 1)
        self.assertNoTraceback(result)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)
        self.assertIn("nested", result.stderr)
        deep: object = 1
        for _ in range(20):
            deep = [deep]
        path.write_text(json.dumps({"recall": {"x": deep}}))
        with self.assertRaises(ConfigError):
            config.load_config(self.env)

    def test_qmem_config_naming_a_missing_file_is_an_error(self):
        self.env["QMEM_CONFIG"] = str(self.home / "nowhere.json")
        with self.assertRaises(ConfigError) as caught:
            config.load_config(self.env)
        self.assertIn("QMEM_CONFIG", str(caught.exception))
        self.assertNotIn(str(self.home), str(caught.exception))
        result = self.run_module("qmem.local", "status")
        self.assertEqual(result.code, 1)
        self.assertIn("QMEM_CONFIG", result.stderr)
