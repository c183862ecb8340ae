import json
import os
import stat
import unittest
from pathlib import Path

from qmem import config
from qmem.errors import ConfigError

from .support import TempHomeTestCase


class ConfigPathTests(TempHomeTestCase):
    def test_default_locations_under_home(self):
        paths = config.resolve_paths(env=self.env)
        self.assertEqual(paths.config_file, self.home / ".config" / "qmem" / "config.json")
        self.assertEqual(paths.database, self.home / ".local" / "share" / "qmem" / "qmem.sqlite")
        self.assertEqual(paths.breaker_file, self.home / ".local" / "share" / "qmem" / "breaker.json")

    def test_xdg_and_explicit_overrides(self):
        env = dict(self.env, XDG_CONFIG_HOME=str(self.home / "cfg"), XDG_DATA_HOME=str(self.home / "data"))
        paths = config.resolve_paths(env=env)
        self.assertEqual(paths.config_file, self.home / "cfg" / "qmem" / "config.json")
        self.assertEqual(paths.database, self.home / "data" / "qmem" / "qmem.sqlite")
        env.update(QMEM_CONFIG=str(self.home / "c.json"), QMEM_SQLITE="~/x.sqlite",
                   QMEM_BREAKER_FILE=str(self.home / "b.json"))
        paths = config.resolve_paths(env=env)
        self.assertEqual(paths.config_file, self.home / "c.json")
        self.assertEqual(paths.database, self.home / "x.sqlite")
        self.assertEqual(paths.breaker_file, self.home / "b.json")

    def test_relative_xdg_is_ignored(self):
        # The XDG spec says relative values are invalid and must be ignored.
        env = dict(self.env, XDG_DATA_HOME="relative/dir")
        self.assertEqual(config.resolve_paths(env=env).data_dir, self.home / ".local" / "share" / "qmem")

    def test_env_database_wins_over_local_db_path(self):
        cfg = config.parse_config({"localDbPath": "~/from-config.sqlite"})
        self.assertEqual(config.resolve_paths(cfg, self.env).database, self.home / "from-config.sqlite")
        env = dict(self.env, QMEM_SQLITE=str(self.home / "env.sqlite"))
        self.assertEqual(config.resolve_paths(cfg, env).database, self.home / "env.sqlite")


class ParseTests(unittest.TestCase):
    def test_defaults_are_seed_001(self):
        cfg = config.parse_config({})
        self.assertEqual((cfg.connect_timeout_ms, cfg.timeout_ms), (15000, 30000))
        self.assertEqual((cfg.breaker_base_ms, cfg.breaker_max_ms, cfg.breaker_trip_after), (120000, 600000, 3))
        self.assertTrue(cfg.local_fallback and cfg.offline_queue)
        self.assertIsNone(cfg.url)
        self.assertEqual(cfg.recall.collection, "qmem_memories")
        self.assertEqual(cfg.recall.dimension, 1024)

    def test_full_design_document_parses(self):
        doc = {"url": "https://gateway.example", "localDbPath": "/tmp/x.sqlite", "localFallback": False,
               "offlineQueue": True, "connectTimeoutMs": 2000, "timeoutMs": 5000, "breakerBaseMs": 1000,
               "breakerMaxMs": 8000, "breakerTripAfter": 2,
               "recall": {"enabled": True, "qdrantUrl": "http://127.0.0.1:6333", "collection": "qmem_memories",
                          "searchEndpoint": "query", "vectorName": None, "embeddingsUrl": "http://127.0.0.1:11434/v1",
                          "embeddingModel": "bge-m3", "dimension": 1024, "distance": "Cosine", "limit": 6,
                          "maxChars": 8000, "timeoutMs": 3000, "project": None}}
        cfg = config.parse_config(doc)
        self.assertEqual(cfg.url, "https://gateway.example")
        self.assertFalse(cfg.local_fallback)
        self.assertEqual(cfg.recall.search_endpoint, "query")
        self.assertEqual(config.to_document(cfg)["recall"]["searchEndpoint"], "query")

    def assertConfigError(self, doc, *fragments):
        with self.assertRaises(ConfigError) as caught:
            config.parse_config(doc)
        for fragment in fragments:
            self.assertIn(fragment, str(caught.exception))
        self.assertEqual(caught.exception.category, "configuration")
        return str(caught.exception)

    def test_unknown_key_is_an_error(self):
        self.assertConfigError({"urll": "https://x"}, "unknown config key 'urll'")
        self.assertConfigError({"recall": {"colection": "x"}}, "recall.colection")

    def test_wrong_types(self):
        self.assertConfigError({"timeoutMs": "30000"}, "timeoutMs", "whole number")
        self.assertConfigError({"timeoutMs": True}, "timeoutMs")  # bool is not a number here
        self.assertConfigError({"localFallback": 1}, "localFallback", "true or false")
        self.assertConfigError({"recall": []}, "recall")
        self.assertConfigError({"recall": {"distance": "cosine"}}, "recall.distance")
        self.assertConfigError([], "JSON object")

    def test_negative_and_out_of_range(self):
        self.assertConfigError({"connectTimeoutMs": -1}, "connectTimeoutMs", "at least")
        self.assertConfigError({"timeoutMs": 0}, "timeoutMs")
        self.assertConfigError({"breakerTripAfter": 0}, "breakerTripAfter")
        self.assertConfigError({"breakerBaseMs": 5000, "breakerMaxMs": 1000}, "breakerMaxMs")

    def test_urls_with_secrets_are_refused_without_echoing_them(self):
        for url, fragment in [
            ("https://user:hunter2@gw.example", "user name or password"),
            ("https://gw.example/?token=hunter2", "query"),
            ("https://gw.example/#hunter2", "fragment"),
            ("ftp://gw.example", "http"),
            ("https://", "host"),
            ("https://gw.example/ hunter2", "spaces"),
            ("https://gw.example:99999", "port"),
        ]:
            with self.subTest(url=url):
                message = self.assertConfigError({"url": url}, fragment)
                self.assertNotIn("hunter2", message)
        self.assertEqual(config.parse_config({"url": "https://gw.example/base/"}).url, "https://gw.example/base")

    def test_secret_like_keys_are_refused_naming_the_variable(self):
        self.assertConfigError({"apiKey": "x"}, "'apiKey'", "QMEM_GATEWAY_API_KEY")
        self.assertConfigError({"recall": {"qdrantApiKey": "x"}}, "recall.qdrantApiKey", "QMEM_QDRANT_API_KEY")
        self.assertConfigError({"recall": {"embedding_api_key": "x"}}, "QMEM_EMBEDDING_API_KEY")
        # Recursive: even inside an unknown section or a list, and before the unknown-key error.
        self.assertConfigError({"extra": {"deep": [{"password": "x"}]}}, "extra.deep.[0].password")
        for key in ("token", "Authorization", "client_secret", "credentials", "Bearer", "private-key"):
            with self.subTest(key=key):
                self.assertConfigError({key: "x"}, "environment")


class CredentialTests(unittest.TestCase):
    def test_preferred_name_then_seed_alias_and_blank_is_absent(self):
        self.assertIsNone(config.credential("qdrant", {}))
        self.assertEqual(config.credential("qdrant", {"PI_QDRANT_MEMORY_QDRANT_API_KEY": "alias"}), "alias")
        self.assertEqual(config.credential("qdrant", {"QMEM_QDRANT_API_KEY": "main",
                                                      "PI_QDRANT_MEMORY_QDRANT_API_KEY": "alias"}), "main")
        self.assertEqual(config.credential("qdrant", {"QMEM_QDRANT_API_KEY": "  ",
                                                      "PI_QDRANT_MEMORY_QDRANT_API_KEY": "alias"}), "alias")
        self.assertIsNone(config.credential("gateway", {"QMEM_GATEWAY_API_KEY": " \t\n"}))
        for role in ("embedding", "admin_qdrant", "source_qdrant"):
            alias = config.CREDENTIAL_VARIABLES[role][1]
            self.assertTrue(alias.startswith("PI_QDRANT_MEMORY_"))
            self.assertEqual(config.credential(role, {alias: "k"}), "k")


class FileTests(TempHomeTestCase):
    def test_missing_file_means_defaults(self):
        self.assertEqual(config.load_config(self.env), config.Config())

    def test_malformed_json_reports_line_and_column(self):
        path = config.config_path(self.env)
        path.parent.mkdir(parents=True)
        path.write_text('{\n  "url": "https://x",\n  "timeoutMs": 5\n  "offlineQueue": true\n}\n')
        with self.assertRaises(ConfigError) as caught:
            config.load_config(self.env)
        message = str(caught.exception)
        self.assertIn("line 4 column 3", message)
        self.assertNotIn(str(self.home), message)  # no absolute paths in diagnostics

    def test_save_is_atomic_0600_and_validated(self):
        config.save_config({"url": "https://gw.example"}, self.env)
        path = config.config_path(self.env)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        self.assertEqual(json.loads(path.read_text())["url"], "https://gw.example")
        with self.assertRaises(ConfigError):
            config.update_config({"apiKey": "secret"}, self.env)
        # The refused update left the file as it was, and no temp file behind.
        self.assertEqual(json.loads(path.read_text()), {"url": "https://gw.example"})
        self.assertEqual(sorted(p.name for p in path.parent.iterdir()), ["config.json"])
        config.update_config({"timeoutMs": 1000}, self.env)
        self.assertEqual(config.load_config(self.env).timeout_ms, 1000)
        config.update_config({"url": None}, self.env)
        self.assertIsNone(config.load_config(self.env).url)

    def test_save_writes_through_links_and_refuses_a_loop(self):
        path = config.config_path(self.env)
        path.parent.mkdir(parents=True)
        elsewhere = self.home / "dotfiles"
        elsewhere.mkdir()
        # A chain of two links ending at a file that does not exist yet: created there.
        (elsewhere / "second").symlink_to("qmem.json")
        path.symlink_to(elsewhere / "second")
        config.save_config({"url": "https://gw.example"}, self.env)
        self.assertTrue(path.is_symlink() and (elsewhere / "second").is_symlink())
        self.assertEqual(json.loads((elsewhere / "qmem.json").read_text()), {"url": "https://gw.example"})
        self.assertEqual(stat.S_IMODE(os.stat(elsewhere / "qmem.json").st_mode), 0o600)
        config.update_config({"timeoutMs": 1000}, self.env)
        self.assertEqual(json.loads((elsewhere / "qmem.json").read_text()),
                         {"url": "https://gw.example", "timeoutMs": 1000})
        self.assertEqual(sorted(p.name for p in elsewhere.iterdir()), ["qmem.json", "second"])
        # A loop is an error naming the file; nothing is written and the links stay.
        (elsewhere / "second").unlink()
        (elsewhere / "second").symlink_to(path)
        with self.assertRaises(ConfigError) as caught:
            config.save_config({"url": "https://other.example"}, self.env)
        self.assertIn("config.json", str(caught.exception))
        self.assertTrue(path.is_symlink() and (elsewhere / "second").is_symlink())
        self.assertEqual(sorted(p.name for p in path.parent.iterdir()), ["config.json"])

    def test_config_that_is_a_directory_or_unreadable(self):
        path = config.config_path(self.env)
        path.mkdir(parents=True)
        with self.assertRaises(ConfigError):
            config.load_config(self.env)

    def test_cli_refuses_api_key_in_config(self):
        path = config.config_path(self.env)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"url": "https://gw.example", "apiKey": "sk-live-hunter2"}))
        result = self.run_module("qmem.local", "status")
        self.assertEqual(result.code, 1)
        self.assertIn("QMEM_GATEWAY_API_KEY", result.stderr)
        self.assertNotIn("hunter2", result.stderr + result.stdout)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)
        self.assertNoTraceback(result)


if __name__ == "__main__":
    unittest.main()
