"""``python3 -m qmem.local`` as a user runs it: real subprocesses, a temporary HOME."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

from qmem.localdb.schema import SCHEMA_VERSION

from .fakes import FakeGateway, refused_url
from .sessionfiles import SessionFile
from .support import REPO, GatewayTestCase, TempHomeTestCase, unprivileged_runner


class QuickstartTests(TempHomeTestCase):
    def test_readme_quickstart_commands_work_as_written(self):
        readme = (REPO / "README.md").read_text()
        quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
        commands = re.findall(r"```sh\n(.*?)\n```", quickstart, re.S)
        self.assertEqual(len(commands), 2, "the quickstart is exactly two commands")
        self.assertIn(commands[1], ("python -m unittest", "python3 -m unittest"))
        # Run the first one through a shell, exactly as printed, from a copy of the repo.
        clone = self.home / "clone"
        shutil.copytree(REPO / "qmem", clone / "qmem")
        env = dict(self.env)
        env.pop("PYTHONPATH")
        env["PATH"] = f"{os.path.dirname(sys.executable)}:{env.get('PATH', '')}"
        command = re.sub(r"(?<![\w/.-])python3? ", f"{sys.executable} ", commands[0])
        proc = subprocess.run(["sh", "-c", command], cwd=clone,
                              env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("⏳", proc.stdout)
        self.assertIn("Deploys use blue-green switching", proc.stdout)
        self.assertTrue((self.home / ".local" / "share" / "qmem" / "qmem.sqlite").exists())


class CliTests(TempHomeTestCase):
    def cli(self, *args, **kw):
        return self.run_module("qmem.local", *args, **kw)

    def store(self, text, *extra):
        result = self.cli("store", "--queue-only", "--project", "p1", "--text", text, *extra)
        self.assertEqual(result.code, 0, result.stderr)
        return result

    def test_every_subcommand_speaks_json(self):
        self.store("json everywhere")
        for args in (["status"], ["import"], ["find", "json"], ["queue"],
                     ["store", "--queue-only", "--project", "p", "--text", "t"]):
            with self.subTest(args=args):
                result = self.cli(*args, "--json")
                self.assertEqual(result.code, 0, result.stderr)
                json.loads(result.stdout)  # exactly one document
                self.assertEqual(result.stderr, "")
        for args in (["flush"], ["enrich"], ["pull"], ["breaker"]):
            with self.subTest(args=args):
                result = self.cli(*args, "--json")
                self.assertIn(result.code, (0, 1))
                json.loads(result.stdout)

    def test_store_then_find_and_queue(self):
        self.store("Il gateway usa la porta 8443 in città", "--kind", "decision", "--scope", "team")
        found = json.loads(self.cli("find", "citta", "--json").stdout)
        [record] = found["results"]
        self.assertEqual((record["state"], record["kind"], record["scope"]), ("pending", "decision", "team"))
        self.assertEqual(found["fallback"], "local_sqlite")
        queue = self.cli("queue")
        self.assertIn("pending 1", queue.stdout)
        self.assertIn("⏳", queue.stdout)

    def test_store_reads_stdin_without_its_final_newline(self):
        for given, kept in (("from standard input\n", "from standard input"),
                            ("two lines\nof text\r\n", "two lines\nof text"),
                            ("kept blank line\n\n", "kept blank line\n"), ("no newline", "no newline")):
            with self.subTest(given=given):
                result = self.cli("store", "--queue-only", "--project", "p", "--text", "-", "--json", input=given)
                self.assertEqual(json.loads(result.stdout)["record"]["text"], kept)
        self.assertIn("from standard input", self.cli("find", "standard", "input").stdout)

    def test_find_says_when_more_records_match_than_the_limit(self):
        for n in range(3):
            self.store(f"limit probe number {n}")
        capped = self.cli("find", "limit", "probe", "--limit", "2")
        self.assertIn("more records match: only the first 2 are shown (raise --limit)", capped.stdout)
        self.assertTrue(json.loads(self.cli("find", "limit", "probe", "--limit", "2", "--json").stdout)["more"])
        everything = self.cli("find", "limit", "probe", "--limit", "3")
        self.assertNotIn("more records match", everything.stdout)

    def test_find_superseded_shows_the_lineage(self):
        old = json.loads(self.cli("store", "--queue-only", "--project", "p", "--text", "The database is Postgres 16",
                                  "--json").stdout)["record"]["id"]
        new = json.loads(self.cli("store", "--queue-only", "--project", "p", "--text", "The database is Postgres 17",
                                  "--supersedes", old, "--reason", "upgraded", "--json").stdout)["record"]["id"]
        lines = {line.split()[1]: line for line in self.cli("find", "database", "postgres", "--superseded")
                 .stdout.splitlines() if line.startswith(("⏳", "·"))}
        self.assertIn(f"supersedes {old}", lines[new])
        self.assertIn(f"superseded by {new}", lines[old])
        default = self.cli("find", "database", "postgres").stdout
        self.assertEqual([line.split()[1] for line in default.splitlines() if line.startswith(("⏳", "·"))], [new])

    def test_import_says_where_it_looked_without_paths(self):
        nothing = self.cli("import")
        self.assertIn("looked in: pi sessions (no directory), Prime sessions (no directory)", nothing.stdout)
        SessionFile(self.home / ".pi" / "agent" / "sessions" / "--w--" / "s.jsonl").user("hello")
        found = self.cli("import")
        self.assertIn("pi sessions (found), Prime sessions (no directory)", found.stdout)
        self.assertNotIn(str(self.home), found.stdout)
        looked = json.loads(self.cli("import", "--json").stdout)["looked_in"]
        self.assertEqual([(r["host"], r["found"]) for r in looked], [("pi", True), ("prime", False)])

    USAGE_ERRORS = (["nope"], [], ["store", "--text", "x"], ["find"], ["find", "x", "--limit", "many"],
                    ["find", '"*"'], ["find", "--", "--", "!!"], ["find", "x", "--limit", "0"],
                    ["find", "x", "--limit", "1001"], ["breaker", "open"], ["install", "vim"],
                    ["mcp-config", "emacs"], ["status", "--frobnicate"])

    def test_usage_errors_exit_2_and_user_errors_exit_1(self):
        for args in self.USAGE_ERRORS:
            with self.subTest(args=args):
                result = self.cli(*args)
                self.assertEqual(result.code, 2, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1)
                self.assertTrue(result.stderr.startswith("qmem-local: "))
                self.assertEqual(result.stdout, "")
                self.assertNoTraceback(result)
        for args in (["store", "--queue-only", "--project", "p", "--text", "   "],
                     ["store", "--queue-only", "--project", "has space", "--text", "x"],
                     ["store", "--queue-only", "--project", "p", "--text", "x", "--expires-at", "tomorrow"],
                     ["flush"]):  # no gateway configured: an error, not a usage error
            with self.subTest(args=args):
                result = self.cli(*args)
                self.assertEqual(result.code, 1, result.stderr)
                self.assertTrue(result.stderr.startswith("qmem-local: "))
                self.assertEqual(len(result.stderr.strip().splitlines()), 1)
                self.assertNoTraceback(result)

    def test_usage_errors_under_json_print_one_error_document(self):
        for args in [a for a in self.USAGE_ERRORS if a and a != ["find"]]:
            with self.subTest(args=args):
                result = self.cli(*args[:1], "--json", *args[1:])
                self.assertEqual(result.code, 2, result.stderr)
                document = json.loads(result.stdout)
                self.assertEqual(document["error"]["category"], "usage")
                self.assertEqual(document["error"]["message"] + "\n", result.stderr[len("qmem-local: "):])

    def test_undecodable_arguments_are_input_errors(self):
        for args in ([b"find", b"\xff"], [b"store", b"--queue-only", b"--project", b"p", b"--text", b"caf\xe9"],
                     [b"find", b"ok", b"--project", b"\xc3"]):
            for json_flag in ([], [b"--json"]):
                with self.subTest(args=args, json=json_flag):
                    proc = subprocess.run([sys.executable, "-m", "qmem.local", *args, *json_flag], cwd=self.home,
                                          env=self.env, capture_output=True, timeout=60)
                    self.assertEqual(proc.returncode, 1, proc.stderr)
                    stderr = proc.stderr.decode()
                    self.assertRegex(stderr, r"^qmem-local: argument \d+ is not valid text")
                    self.assertNotIn("Traceback", stderr)
                    if json_flag:
                        self.assertEqual(json.loads(proc.stdout)["error"]["category"], "input")
                    else:
                        self.assertEqual(proc.stdout, b"")

    def test_json_stays_one_document_whatever_the_text_holds(self):
        odd = "line\u2028sep \u202eRTL \U0001F600 \x85 nul\u200b end"
        self.store(odd)
        for encoding in ("utf-8", "ascii"):
            with self.subTest(encoding=encoding):
                env = dict(self.env, PYTHONIOENCODING=encoding)
                found = self.run_module("qmem.local", "find", "line", "--json", env=env)
                self.assertEqual(found.code, 0, found.stderr)
                self.assertEqual(json.loads(found.stdout)["results"][0]["text"], odd)
                text = self.run_module("qmem.local", "find", "line", env=env)
                self.assertEqual(text.code, 0, text.stderr)
                self.assertNoTraceback(text)

    def test_every_option_has_help_and_every_command_a_description_and_an_example(self):
        from qmem.local import build_parser

        parser = build_parser()
        [sub] = [action for action in parser._actions if action.choices and hasattr(action, "_name_parser_map")]
        self.assertEqual(set(sub.choices), {"status", "import", "find", "queue", "store", "forget", "flush", "enrich",
                                            "pull", "breaker", "doctor", "recall-log", "install", "uninstall",
                                            "mcp-config"})
        for name, command in sub.choices.items():
            with self.subTest(command=name):
                self.assertTrue(command.description and len(command.description) > 40, name)
                self.assertIn(f"python3 -m qmem.local {name}", command.epilog or "")
                for action in command._actions:
                    if action.help != "==SUPPRESS==":
                        self.assertTrue(action.help, f"{name}: {action.dest} has no help")
        help_text = self.cli("find", "--help").stdout
        self.assertIn("examples:", help_text)
        self.assertIn("\n  python3 -m qmem.local find", help_text)  # examples keep their lines
        store_help = " ".join(self.cli("store", "--help").stdout.split())
        self.assertIn("does not make the record private", store_help)  # --scope vs private records

    def test_version(self):
        from qmem import __version__

        for module, prog in (("qmem.local", "qmem-local"), ("qmem.admin", "qmem-admin"), ("qmem.mcp", "qmem-mcp")):
            with self.subTest(module=module):
                result = self.run_module(module, "--version")
                self.assertEqual((result.code, result.stdout, result.stderr), (0, f"{prog} {__version__}\n", ""))

    def test_hostile_and_huge_find_input(self):
        self.store("needle in the haystack")
        for query in ['NEAR(needle', '"needle', "needle*", "col:needle", "needle)", "AND OR NOT", "\x01\x02"]:
            with self.subTest(query=query):
                result = self.cli("find", query)
                self.assertIn(result.code, (0, 2))  # 2: no word left to search for
                self.assertNoTraceback(result)
        # 1 MiB of query; Linux caps one argv string at 128 KiB, so as sixteen 64 KiB words.
        words = ["needle"] + [chr(ord("a") + i) * (1 << 16) for i in range(16)]
        result = self.cli("find", "--json", "--", *words)
        self.assertEqual(result.code, 0, result.stderr[:200])
        self.assertTrue(json.loads(result.stdout)["partial"])

    def test_import_from_pi_sessions(self):
        s = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        s.call("qmem_get", {"id": "g-1"}, details={"qmem": 1, "record": {"id": "g-1", "text": "imported memory"}})
        result = self.cli("import", "--json")
        self.assertEqual(json.loads(result.stdout)["records_added"], 1)
        self.assertIn("imported memory", self.cli("find", "imported").stdout)
        status = json.loads(self.cli("status", "--json").stdout)
        self.assertEqual((status["records"], status["session_files"], status["schema_version"]),
                         (1, 1, SCHEMA_VERSION))
        self.assertNotIn(str(self.home), self.cli("status").stdout + self.cli("import").stdout)

    def test_corrupt_index_is_reported_and_left_untouched(self):
        path = self.home / "broken.sqlite"
        path.write_bytes(b"\x00garbage" * 1000)
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        env = dict(self.env, QMEM_SQLITE=str(path))
        for args in (["status"], ["find", "x"], ["store", "--queue-only", "--project", "p", "--text", "x"]):
            result = self.run_module("qmem.local", *args, env=env)
            self.assertEqual(result.code, 1)
            self.assertIn("not an SQLite database", result.stderr)
            self.assertNotIn(str(self.home), result.stderr)
            self.assertNoTraceback(result)
        self.assertEqual(hashlib.sha256(path.read_bytes()).hexdigest(), before)

    def test_read_only_index_is_a_clear_error(self):
        if os.geteuid() != 0:
            directory = self.home / "ro"
            directory.mkdir()
            env = dict(self.env, QMEM_SQLITE=str(directory / "qmem.sqlite"))
            self.assertEqual(self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text",
                                             "x", env=env).code, 0)
            os.chmod(directory / "qmem.sqlite", 0o400)
            os.chmod(directory, 0o500)
            self.addCleanup(os.chmod, directory, 0o700)
            runner = []
        else:
            # root ignores permissions: run the CLI as an unprivileged user against root's files.
            directory = self.home / "ro"
            directory.mkdir()
            env = dict(self.env, QMEM_SQLITE=str(directory / "qmem.sqlite"))
            self.assertEqual(self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text",
                                             "x", env=env).code, 0)
            for path in (self.home, directory):
                os.chmod(path, 0o755)
            for path in directory.iterdir():
                os.chmod(path, 0o644)
            runner, why_not = unprivileged_runner(env)
            if why_not:
                self.skipTest(why_not)
        before = hashlib.sha256((directory / "qmem.sqlite").read_bytes()).hexdigest()
        proc = subprocess.run([*runner, sys.executable, "-m", "qmem.local", "store", "--queue-only", "--project",
                               "p", "--text", "y"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertRegex(proc.stderr, r"^qmem-local: .*(read-only|cannot open|writable)")
        self.assertNotIn("Traceback", proc.stderr)
        self.assertEqual(hashlib.sha256((directory / "qmem.sqlite").read_bytes()).hexdigest(), before)


class ProgressTests(TempHomeTestCase):
    def test_only_on_a_terminal_and_only_when_long(self):
        import io

        from qmem.cli.frontend import Progress

        class Terminal(io.StringIO):
            def isatty(self):
                return True

        shown = Terminal()
        progress = Progress("importing", stream=shown, after_s=0)
        progress(3, 3)
        progress.finish()
        self.assertEqual(shown.getvalue(), "\rimporting: 3/3\n")
        quick = Terminal()
        progress = Progress("importing", stream=quick, after_s=3600)
        progress(1, 1)
        progress.finish()
        self.assertEqual(quick.getvalue(), "")  # short work prints nothing
        piped = io.StringIO()
        progress = Progress("importing", stream=piped, after_s=0)
        progress(1, 1)
        progress.finish()
        self.assertEqual(piped.getvalue(), "")  # not a terminal


class SlowGateway(FakeGateway):
    """A gateway that takes a while for each create of a backlog record (a slow server, not a sync point)."""

    def _store(self, req):
        if b"backlog" in (req.body or b""):
            time.sleep(0.25)
        return super()._store(req)


class GatewayCliTests(GatewayTestCase):
    def cli(self, *args, **kw):
        return self.run_module("qmem.local", *args, **kw)

    def queue(self, *texts):
        for text in texts:
            result = self.cli("store", "--queue-only", "--project", "p", "--text", text)
            self.assertEqual(result.code, 0, result.stderr)

    def test_flush_exits_1_while_records_are_left_and_0_when_done(self):
        self.queue("first queued", "second queued")
        self.configure(refused_url())
        stopped = self.cli("flush")
        self.assertEqual(stopped.code, 1, stopped.stderr)
        self.assertIn("still pending 2", stopped.stdout)  # the report is still printed
        self.assertRegex(stopped.stderr, r"^qmem-local: flush stopped with 2 records still queued: ")
        document = json.loads(self.cli("flush", "--json").stdout)
        self.assertEqual((document["complete"], document["remaining"], document["sent"]), (False, 2, 0))
        self.assertIn("error", document)
        self.configure()
        self.cli("breaker", "reset")
        done = self.cli("flush", "--json")
        self.assertEqual(done.code, 0, done.stderr)
        self.assertEqual((json.loads(done.stdout)["complete"], json.loads(done.stdout)["remaining"]), (True, 0))
        self.assertEqual(self.gateway.count_by_text(), {"first queued": 1, "second queued": 1})

    def test_a_refused_key_stops_flush_with_exit_1(self):
        self.queue("kept while the key is wrong")
        env = dict(self.env, QMEM_GATEWAY_API_KEY="wrong-key")
        result = self.run_module("qmem.local", "flush", env=env)
        self.assertEqual(result.code, 1)
        self.assertIn("API key", result.stderr)
        self.assertIn("still pending 1", result.stdout)

    def test_pull_and_enrich_exit_1_when_they_stop_before_the_end(self):
        self.gateway.add_record("pulled once", project_id="p")
        self.assertEqual(self.cli("pull").code, 0)
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--w--" / "s.jsonl")
        session.call("qmem_search", {"query": "excerpt"}, details={"qmem": 1, "results": [
            {"id": "g-excerpt", "text": "an excerpt only", "score": 0.7, "kind": "fact", "project_id": "p"}]})
        self.assertEqual(self.cli("import").code, 0)
        self.configure(refused_url())
        for command in ("pull", "enrich"):
            with self.subTest(command=command):
                result = self.cli(command)
                self.assertEqual(result.code, 1, result.stderr)
                self.assertIn("stopped:", result.stdout)
                self.assertRegex(result.stderr, rf"^qmem-local: {command} stopped before the end: ")
                self.assertFalse(json.loads(self.cli(command, "--json").stdout)["complete"])

    def test_store_sends_only_what_fits_in_its_budget_and_says_what_is_left(self):
        gateway = SlowGateway(api_key=self.API_KEY).start()
        self.addCleanup(gateway.stop)
        self.queue(*(f"backlog record {n}" for n in range(20)))
        self.configure(gateway.url)
        result = self.cli("store", "--project", "p", "--text", "fresh and shared", "--json")
        self.assertEqual(result.code, 0, result.stderr)
        document = json.loads(result.stdout)
        self.assertTrue(document["shared"])
        backlog = document["backlog"]
        self.assertGreater(backlog["still_queued"], 0)  # the rest is flush's job
        self.assertEqual(backlog["still_queued"], 20 - len([t for t in gateway.count_by_text() if "backlog" in t]))
        text = self.cli("store", "--project", "p", "--text", "another fresh one")
        self.assertRegex(text.stdout, r"\n\d+ older queued records? (is|are) still waiting: `python3 -m qmem.local "
                                      r"flush` sends")

    def test_breaker_reset_is_one_form_and_the_old_one_still_works(self):
        self.configure(refused_url())
        self.queue("opens the breaker")
        self.cli("flush")
        self.assertIn("open:", self.cli("breaker").stdout)
        self.assertTrue(self.cli("breaker", "reset").stdout.startswith("reset — closed"))
        self.cli("flush")
        self.assertTrue(self.cli("breaker", "--reset").stdout.startswith("reset — closed"))
        help_text = self.cli("breaker", "--help").stdout
        self.assertIn("{reset}", help_text)
        self.assertNotIn("--reset", help_text)
