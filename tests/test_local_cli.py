"""``python -m qmem.local`` as a user runs it: real subprocesses, a temporary HOME."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

from qmem.localindex import SCHEMA_VERSION

from .sessionfiles import SessionFile
from .support import REPO, TempHomeTestCase


class QuickstartTests(TempHomeTestCase):
    def test_readme_quickstart_commands_work_as_written(self):
        readme = (REPO / "README.md").read_text()
        quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
        commands = re.findall(r"```sh\n(.*?)\n```", quickstart, re.S)
        self.assertEqual(len(commands), 2, "the quickstart is exactly two commands")
        self.assertEqual(commands[1], "python -m unittest")
        # Run the first one through a shell, exactly as printed, from a copy of the repo.
        clone = self.home / "clone"
        shutil.copytree(REPO / "qmem", clone / "qmem")
        env = dict(self.env)
        env.pop("PYTHONPATH")
        env["PATH"] = f"{os.path.dirname(sys.executable)}:{env.get('PATH', '')}"
        proc = subprocess.run(["sh", "-c", commands[0].replace("python ", f"{sys.executable} ")], cwd=clone,
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

    def test_store_reads_stdin(self):
        self.cli("store", "--queue-only", "--project", "p", "--text", "-", input="from standard input\n")
        self.assertIn("from standard input", self.cli("find", "standard", "input").stdout)

    def test_usage_errors_exit_2_and_user_errors_exit_1(self):
        for args in (["nope"], [], ["store", "--text", "x"], ["find"], ["find", "x", "--limit", "many"]):
            with self.subTest(args=args):
                result = self.cli(*args)
                self.assertEqual(result.code, 2, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1)
                self.assertNoTraceback(result)
        for args in (["store", "--queue-only", "--project", "p", "--text", "   "],
                     ["store", "--queue-only", "--project", "has space", "--text", "x"],
                     ["store", "--queue-only", "--project", "p", "--text", "x", "--expires-at", "tomorrow"],
                     ["find", '"*"'], ["find", "x", "--limit", "0"]):
            with self.subTest(args=args):
                result = self.cli(*args)
                self.assertEqual(result.code, 1, result.stderr)
                self.assertTrue(result.stderr.startswith("qmem-local: "))
                self.assertEqual(len(result.stderr.strip().splitlines()), 1)
                self.assertNoTraceback(result)

    def test_hostile_and_huge_find_input(self):
        self.store("needle in the haystack")
        for query in ['NEAR(needle', '"needle', "needle*", "col:needle", "needle)", "AND OR NOT", "\x01\x02"]:
            with self.subTest(query=query):
                result = self.cli("find", query)
                self.assertIn(result.code, (0, 1))
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
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                self.skipTest("running as root and setpriv is unavailable to drop privileges")
            directory = self.home / "ro"
            directory.mkdir()
            env = dict(self.env, QMEM_SQLITE=str(directory / "qmem.sqlite"))
            self.assertEqual(self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text",
                                             "x", env=env).code, 0)
            for path in (self.home, directory):
                os.chmod(path, 0o755)
            for path in directory.iterdir():
                os.chmod(path, 0o644)
            runner = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            probe = subprocess.run([*runner, sys.executable, "-c", "pass"], capture_output=True, timeout=60)
            if probe.returncode != 0:
                self.skipTest("this Python cannot run as an unprivileged user here (its files are private to root)")
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

        from qmem.cli import Progress

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
