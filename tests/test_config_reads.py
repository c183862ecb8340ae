"""A config file can neither hang, exhaust nor crash qmem, and an unreadable one loses nothing.

In process: every kind of bad file (``/dev/zero``, a FIFO, a 50 MB file, a 5,000-digit number,
a directory, a dangling link, a link loop, a socket) and every bad value (NaN, Infinity, a key
written twice, a decimal where a whole number goes, 1e400) at both places a config is read
from (``$QMEM_CONFIG`` and the default path), each under a watchdog thread: one line naming
the file by its name only.  Then every entry point (``qmem.local`` status, store and doctor,
``qmem.admin status``, the MCP server, the pi/Prime bridge and the Hermes plugin) as a real
process against each bad file: it answers within its watchdog with that line (MCP: an
``isError`` result, after an answered ``initialize``), and the record queued before the file
went bad is still queued after.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from qmem import config
from qmem.errors import ConfigError
from qmem.files.configfile import MAX_CONFIG_BYTES

from .support import TempHomeTestCase, write_config
from .test_bridge import BridgeProcess

WATCHDOG_S = 60  # seconds; a healthy read takes milliseconds, a hang takes forever

#: kind -> the words its one-line error must have.
BAD_FILES = {
    "dev-zero": "character device",
    "fifo": "named pipe",
    "50-mb": "larger than 1 MiB",
    "5000-digits": "'timeoutMs' must be a whole number from 1 to 3600000 (it has 5000 digits)",
    "directory": "is a directory",
    "dangling-link": "link to a file that does not exist",
}


def make_bad_file(kind: str, where: Path) -> Path:
    """Create the bad config of ``kind`` at ``where`` (a link to /dev/zero for that one) and return it."""
    where.parent.mkdir(parents=True, exist_ok=True)
    if kind == "dev-zero":
        where.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(where)
    elif kind == "50-mb":
        with open(where, "wb") as handle:
            handle.truncate(50 * 1024 * 1024)  # sparse: cheap to make, 50 MB to whoever reads it
    elif kind == "5000-digits":
        where.write_text('{"timeoutMs": ' + "7" * 5000 + "}")
    elif kind == "directory":
        where.mkdir()
    elif kind == "dangling-link":
        where.symlink_to(where.parent / "gone.json")
    else:
        raise ValueError(kind)
    return where


class Watchdog:
    """Run ``function`` on a daemon thread; fail if it has not finished within WATCHDOG_S."""

    def __init__(self, case, function):
        self.result = self.error = None
        thread = threading.Thread(target=self._run, args=(function,), daemon=True)
        thread.start()
        thread.join(WATCHDOG_S)
        case.assertFalse(thread.is_alive(), "still running after the watchdog: it hangs")

    def _run(self, function):
        try:
            self.result = function()
        except BaseException as exc:  # noqa: BLE001 - handed to the test as is
            self.error = exc


class ConfigFileTests(TempHomeTestCase):
    def load(self, env):
        return Watchdog(self, lambda: config.load_config(env))

    def assertRefused(self, env, *words):
        outcome = self.load(env)
        self.assertIsInstance(outcome.error, ConfigError, outcome.error or outcome.result)
        message = outcome.error.message
        for word in words:
            self.assertIn(word, message)
        self.assertNotIn("\n", message)
        self.assertNotIn(str(self.home), message)  # the file by its name, never its directory
        return message

    def test_bad_files_at_both_places_a_config_is_read_from(self):
        for kind, words in BAD_FILES.items():
            for via in ("QMEM_CONFIG", "default"):
                with self.subTest(kind=kind, via=via):
                    home = self.home / f"{kind}-{via}"
                    env = dict(self.env, HOME=str(home))
                    if via == "QMEM_CONFIG":
                        env["QMEM_CONFIG"] = str(make_bad_file(kind, home / "elsewhere" / "qmem.json"))
                    else:
                        make_bad_file(kind, home / ".config" / "qmem" / "config.json")
                    self.assertRefused(env, words)

    def test_sockets_and_link_loops(self):
        path = config.config_path(self.env)
        path.parent.mkdir(parents=True)
        server = socket.socket(socket.AF_UNIX)
        self.addCleanup(server.close)
        server.bind(str(path))
        self.assertRefused(self.env, "socket")
        path.unlink()
        path.symlink_to(path.parent / "loop")
        (path.parent / "loop").symlink_to(path)
        self.assertRefused(self.env, "loop of symbolic links")

    def test_bad_values(self):
        cases = {
            '{"timeoutMs": NaN}': ("NaN", "not a JSON number"),
            '{"timeoutMs": Infinity}': ("Infinity",),
            '{"recall": {"limit": -Infinity}}': ("-Infinity",),
            '{"url": "https://a.example", "url": "https://b.example"}': ("'url' twice",),
            '{"recall": {"limit": 3, "limit": 4}}': ("'limit' twice",),
            '{"timeoutMs": 3000.0}': ("'timeoutMs' must be a whole number", "decimal point"),
            '{"timeoutMs": 3000.5}': ("'timeoutMs' must be a whole number",),
            '{"timeoutMs": 1e400}': ("'timeoutMs' must be a whole number",),
            '{"breakerTripAfter": -' + "9" * 5000 + "}": ("'breakerTripAfter'", "5000 digits"),
            '{"recall": {"collection": ' + "1" * 5000 + "}}": ("'recall.collection' must be a string",),
            '{"timeoutMs": 0}': ("'timeoutMs' must be at least 1",),
            '{"timeoutMs": 3600001}': ("'timeoutMs' must be at most 3600000",),
            '{"localFallback": "yes"}': ("'localFallback' must be true or false",),
            '[' * 100_000 + ']' * 100_000: ("nested too deeply",),
            '{"localDbPath": "a\\u0000b"}': ("'localDbPath' must not contain control characters",),
            '{"localDbPath": "x\\ud800"}': ("'localDbPath' must not contain control characters or invalid Unicode",),
            '{"localDbPath": "/' + "a" * 5000 + '"}': ("'localDbPath' must be at most 4096 characters",),
        }
        path = config.config_path(self.env)
        path.parent.mkdir(parents=True)
        for text, words in cases.items():
            with self.subTest(text=text[:60]):
                path.write_text(text)
                message = self.assertRefused(self.env, *words)
                self.assertLess(len(message), 300)

    def test_the_size_limit_is_exact_and_a_bom_is_fine(self):
        path = config.config_path(self.env)
        path.parent.mkdir(parents=True)
        body = b'{"timeoutMs": 1234}'
        path.write_bytes(body + b" " * (MAX_CONFIG_BYTES - len(body)))
        self.assertEqual(self.load(self.env).result.timeout_ms, 1234)
        path.write_bytes(body + b" " * (MAX_CONFIG_BYTES - len(body) + 1))
        self.assertRefused(self.env, "larger than 1 MiB")
        path.write_bytes(b"\xef\xbb\xbf" + body)
        self.assertEqual(self.load(self.env).result.timeout_ms, 1234)

    def test_a_link_to_a_good_file_is_followed(self):
        target = self.home / "dotfiles" / "qmem.json"
        target.parent.mkdir()
        target.write_text('{"timeoutMs": 4321}')
        path = config.config_path(self.env)
        path.parent.mkdir(parents=True)
        path.symlink_to(target)
        self.assertEqual(self.load(self.env).result.timeout_ms, 4321)

    def test_update_config_reads_the_same_way(self):
        make_bad_file("fifo", config.config_path(self.env))
        outcome = Watchdog(self, lambda: config.update_config({"timeoutMs": 1000}, self.env))
        self.assertIsInstance(outcome.error, ConfigError)
        self.assertTrue(config.config_path(self.env).is_fifo())  # left as it was


HERMES = textwrap.dedent("""
    import json
    from qmem.hermes import adapter as hermes

    class Context:
        def __init__(self):
            self.tools, self.commands = {}, {}
        def register_tool(self, name, toolset, schema, handler, **_):
            self.tools[name] = handler
        def register_command(self, name, handler, **_):
            self.commands[name] = handler

    context = Context()
    hermes.register(context)
    print(context.tools["qmem_store"]({"text": "from hermes", "project_id": "shop"}))
    print(json.dumps(context.commands["qmem:local"]("status")))
""")


class EntryPointTests(TempHomeTestCase):
    QUEUED = "queued while the config was good"

    def setUp(self):
        super().setUp()
        self.config_file = write_config(self.env, {"localFallback": True})  # no gateway: stores are queued
        self.good = self.config_file.read_text()
        proc = self.run_module("qmem.local", "store", "--project", "shop", "--text", self.QUEUED)
        self.assertEqual(proc.code, 0, proc.stderr)

    def queued(self):
        self.config_file.unlink()
        self.config_file.write_text(self.good)
        proc = self.run_module("qmem.local", "queue", "--json")
        self.assertEqual(proc.code, 0, proc.stderr)
        return sorted(record["text"] for record in json.loads(proc.stdout)["records"] if record["state"] == "pending")

    def process(self, args, env, stdin=""):
        proc = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
                              cwd=self.home, timeout=WATCHDOG_S)
        self.assertNotIn("Traceback", proc.stderr + proc.stdout, args)
        return proc

    def cli(self, env, words, *args):
        proc = self.process(args, env)
        self.assertEqual(proc.returncode, 1, args)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, (args, proc.stderr))
        self.assertIn(words, proc.stderr, args)

    def mcp(self, env, words):
        messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                        "name": "qmem_store", "arguments": {"text": "from mcp", "project_id": "shop"}}},
                    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                        "name": "qmem_search", "arguments": {"query": "queued"}}}]
        proc = self.process(["-m", "qmem.mcp"], env, "".join(json.dumps(m) + "\n" for m in messages))
        answers = {answer["id"]: answer for answer in map(json.loads, proc.stdout.splitlines())}
        self.assertEqual(answers[0]["result"]["serverInfo"]["name"], "qmem")
        self.assertTrue(answers[1]["result"]["tools"])
        for number in (2, 3):
            result = answers[number]["result"]  # a tool result, never a -32603 protocol error
            self.assertTrue(result["isError"])
            self.assertIn(words, result["content"][0]["text"])

    def bridge(self, env, words):
        bridge = BridgeProcess(env, str(self.home))
        bridge.other = []
        try:
            self.assertEqual(bridge.next(WATCHDOG_S)["event"], "ready")
            bridge.send({"id": 1, "method": "session_start", "params": {"cwd": str(self.home)}})
            self.assertIn("result", bridge.answer(1, WATCHDOG_S))
            bridge.send({"id": 2, "method": "tool", "params": {"name": "qmem_store",
                                                              "args": {"text": "from pi", "project_id": "shop"}}})
            error = bridge.answer(2, WATCHDOG_S)["error"]
            self.assertEqual(error["category"], "configuration")
            self.assertIn(words, error["message"])
            bridge.send({"id": 3, "method": "before_agent_start", "params": {}})
            self.assertIn("qmem rules", bridge.answer(3, WATCHDOG_S)["result"]["append"])
            bridge.send({"id": 4, "method": "context", "params": {"messages": [{"role": "user", "content": "hi"}]}})
            self.assertEqual(bridge.answer(4, WATCHDOG_S)["result"], {"drop": [], "append": None})
        finally:
            bridge.close()

    def hermes(self, env, words):
        proc = self.process(["-c", HERMES], env)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        tool, command = proc.stdout.strip().splitlines()
        answer = json.loads(tool)
        self.assertEqual((answer["ok"], answer["category"]), (False, "configuration"))
        self.assertIn(words, answer["error"])
        self.assertIn(words, json.loads(command))

    def test_every_entry_point_answers_one_line_and_nothing_queued_is_lost(self):
        # Each bad file is tried through every entry point, half of them at the default path and
        # half through QMEM_CONFIG (both places read alike: ConfigFileTests covers each kind at each).
        jobs = []
        for number, (kind, words) in enumerate(BAD_FILES.items()):
            env = dict(self.env)
            if number % 2:
                env["QMEM_CONFIG"] = str(make_bad_file(kind, self.home / "bad" / f"{kind}.json"))
            else:
                self.config_file.rename(self.config_file.with_name(f"good-{kind}.json"))
                make_bad_file(kind, self.config_file)
            label = f"{kind} via {'QMEM_CONFIG' if number % 2 else 'the default path'}"
            jobs += [(label, "local status", lambda e=env, w=words: self.cli(e, w, "-m", "qmem.local", "status")),
                     (label, "local store", lambda e=env, w=words: self.cli(
                         e, w, "-m", "qmem.local", "store", "--project", "shop", "--text", "refused")),
                     (label, "local find", lambda e=env, w=words: self.cli(e, w, "-m", "qmem.local", "find", "x")),
                     (label, "admin status", lambda e=env, w=words: self.cli(e, w, "-m", "qmem.admin", "status")),
                     (label, "doctor", lambda e=env, w=words: self.cli(e, w, "-m", "qmem.local", "doctor")),
                     (label, "mcp", lambda e=env, w=words: self.mcp(e, w)),
                     (label, "bridge", lambda e=env, w=words: self.bridge(e, w)),
                     (label, "hermes", lambda e=env, w=words: self.hermes(e, w))]
            if not number % 2:
                # The default path must be bad for this kind's jobs only: run them now.
                self.run_jobs(jobs)
                jobs = []
                target = self.config_file
                if target.is_dir() and not target.is_symlink():
                    target.rmdir()
                else:
                    target.unlink()
                self.config_file.with_name(f"good-{kind}.json").rename(self.config_file)
        self.run_jobs(jobs)
        self.assertEqual(self.queued(), [self.QUEUED])

    def run_jobs(self, jobs):
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [(label, entry, pool.submit(job)) for label, entry, job in jobs]
        for label, entry, future in futures:
            with self.subTest(config=label, entry_point=entry):
                future.result()
