"""``python -m qmem.local doctor``: real subprocesses, a temporary HOME, loopback fakes."""

import hashlib
import json
import os
import shutil
import sqlite3
import sys

from .fakes import FakeEmbeddings, FakeQdrant, Fault, refused_url
from .support import REPO, GatewayTestCase, TempHomeTestCase, write_config
from .test_invariants import ADMIN_MODULES

DIM = 8
QDRANT_KEY = "doctor-qdrant-read-key-7f3a"
EMBEDDING_KEY = "doctor-embedding-key-91bc"


class DoctorTestCase(GatewayTestCase):
    def doctor(self, *args, env=None, code=None):
        result = self.run_module("qmem.local", "doctor", *args, env=env)
        self.assertNotIn("Traceback", result.stderr)
        if code is not None:
            self.assertEqual(result.code, code, result.stdout + result.stderr)
        return result

    def report(self, env=None, code=None) -> dict:
        result = self.doctor("--json", env=env, code=code)
        return json.loads(result.stdout)  # one document, also when problems are found


class FreshHomeTests(TempHomeTestCase):
    def test_a_fresh_home_is_ok_and_doctor_creates_nothing(self):
        result = self.run_module("qmem.local", "doctor")
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertIn("overall     ok", result.stdout)
        self.assertIn("recall      off (not configured", result.stdout)
        self.assertIn("index       not created yet", result.stdout)
        document = json.loads(self.run_module("qmem.local", "doctor", "--json").stdout)
        self.assertEqual(document["index"], {"exists": False})
        self.assertTrue(document["python"]["fts5"])
        self.assertEqual(document["config"]["settings"]["url"], {"value": None, "source": "default"})
        self.assertEqual(sorted(os.listdir(self.home)), [])  # no config, no data directory, no index

    def test_a_missing_qmem_config_is_the_problem_reported_not_a_crash(self):
        env = dict(self.env, QMEM_CONFIG=str(self.home / "nope.json"))
        result = self.run_module("qmem.local", "doctor", env=env)
        self.assertEqual(result.code, 1)
        self.assertIn("QMEM_CONFIG names a config file that does not exist", result.stdout)
        self.assertIn("(chosen by QMEM_CONFIG;", result.stdout)
        self.assertRegex(result.stderr, r"^qmem-local: doctor found 1 problem: config: QMEM_CONFIG")
        self.assertIn("hosts       ", result.stdout)  # the rest of the report is still there
        document = json.loads(self.run_module("qmem.local", "doctor", "--json", env=env).stdout)
        self.assertFalse(document["ok"])
        self.assertEqual(document["error"]["category"], "doctor")

    def test_where_each_setting_comes_from(self):
        write_config(self.env, {"timeoutMs": 1234, "recall": {"limit": 3}})
        env = dict(self.env, QMEM_SQLITE=str(self.home / "elsewhere.sqlite"))
        settings = json.loads(self.run_module("qmem.local", "doctor", "--json", env=env).stdout)["config"]["settings"]
        self.assertEqual(settings["timeoutMs"], {"value": 1234, "source": "file"})
        self.assertEqual(settings["recall.limit"], {"value": 3, "source": "file"})
        self.assertEqual(settings["connectTimeoutMs"]["source"], "default")
        self.assertEqual(settings["localDbPath"]["source"], "environment (QMEM_SQLITE)")
        text = self.run_module("qmem.local", "doctor", env=env).stdout
        self.assertIn("timeoutMs = 1234  [file]", text)
        self.assertNotIn("connectTimeoutMs =", text)  # defaults are left out of the text

    def test_the_index_is_checked_when_it_exists(self):
        self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "counted")
        index = json.loads(self.run_module("qmem.local", "doctor", "--json").stdout)["index"]
        self.assertEqual((index["records"], index["queue"]["pending"], index["integrity"]), (1, 1, "ok"))
        broken = self.home / "broken.sqlite"
        broken.write_bytes(b"\x00not sqlite" * 100)
        before = hashlib.sha256(broken.read_bytes()).hexdigest()
        result = self.run_module("qmem.local", "doctor", env=dict(self.env, QMEM_SQLITE=str(broken)))
        self.assertEqual(result.code, 1)
        self.assertIn("problem     index:", result.stdout)
        self.assertEqual(hashlib.sha256(broken.read_bytes()).hexdigest(), before)

    def test_a_failing_integrity_check_is_a_problem(self):
        self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "to be damaged")
        path = self.home / ".local" / "share" / "qmem" / "qmem.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA writable_schema = ON")  # an index whose entries no longer match its table
        [(index_name, table)] = conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND "
                                             "sql IS NOT NULL LIMIT 1").fetchall()
        page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index_name,)).fetchone()[0]
        conn.close()
        data = bytearray(path.read_bytes())
        page_size = int.from_bytes(data[16:18], "big")
        start = (page - 1) * page_size
        data[start + 8:start + 60] = os.urandom(52)  # scramble the index page's cells
        path.write_bytes(bytes(data))
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        index = json.loads(self.run_module("qmem.local", "doctor", "--json").stdout)["index"]
        self.assertTrue(index.get("error") or index.get("integrity") != "ok", (table, index))


class GatewayDoctorTests(DoctorTestCase):
    def test_a_working_gateway(self):
        document = self.report(code=0)
        gateway = document["gateway"]
        self.assertEqual((gateway["reachable"], gateway["version"], gateway["key"]), (True, "2.12.0", "accepted"))
        self.assertEqual(gateway["breaker"]["state"], "closed")
        self.assertEqual(document["credentials"]["gateway"], {"variable": "QMEM_GATEWAY_API_KEY", "set": True,
                                                              "via": "QMEM_GATEWAY_API_KEY"})
        text = self.doctor(code=0).stdout
        self.assertIn(f"gateway     {self.gateway.url}  ✓ Memory Gateway 2.12.0, API key accepted; breaker closed",
                      text)
        self.assertNotIn(self.API_KEY, text)

    def test_a_refused_key_and_a_missing_key(self):
        wrong = self.report(env=dict(self.env, QMEM_GATEWAY_API_KEY="not-the-key"), code=1)
        self.assertEqual((wrong["gateway"]["reachable"], wrong["gateway"]["key"]), (True, "refused"))
        self.assertIn("gateway: the Memory Gateway refused the API key", " ".join(wrong["problems"]))
        env = dict(self.env)
        del env["QMEM_GATEWAY_API_KEY"]
        missing = self.report(env=env, code=1)
        self.assertEqual(missing["gateway"]["key"], "missing")
        self.assertIn("url is set but QMEM_GATEWAY_API_KEY is not", " ".join(missing["warnings"]))

    def test_an_unreachable_gateway_is_a_problem_and_no_breaker_is_touched(self):
        self.configure(refused_url())
        breaker_file = self.home / ".local" / "share" / "qmem" / "breaker.json"
        result = self.doctor(code=1)
        self.assertIn("✗ unreachable", result.stdout)
        self.assertFalse(breaker_file.exists())  # the probe neither read nor wrote the shared breaker
        self.assertIn("refused the connection", json.loads(self.doctor("--json").stdout)["gateway"]["error"])

    def test_an_open_breaker_does_not_stop_the_probe_and_stays_open(self):
        rt = self.runtime()
        rt.breaker_for(self.gateway.url).definitive_failure()  # as a failed call of any qmem process would
        breaker_file = self.home / ".local" / "share" / "qmem" / "breaker.json"
        before = breaker_file.read_bytes()
        document = self.report(code=0)
        self.assertTrue(document["gateway"]["reachable"])  # asked although the breaker is open
        self.assertEqual(document["gateway"]["breaker"]["state"], "open")
        self.assertGreater(document["gateway"]["breaker"]["retry_in_ms"], 0)
        self.assertIn("breaker reset", " ".join(document["warnings"]))
        self.assertEqual(breaker_file.read_bytes(), before)  # and it is still open, untouched
        self.assertRegex(self.doctor().stdout, r"breaker open \(\d+ s left\)")

    def test_a_hanging_gateway_is_bounded_by_its_timeout(self):
        self.configure(connectTimeoutMs=500, timeoutMs=500)
        self.gateway.inject(Fault.hang(path="/v1/status", times=None))
        document = self.report(code=1)
        self.assertFalse(document["gateway"]["reachable"])
        self.assertEqual(document["gateway"]["reason"], "header_timeout")


class RecallDoctorTests(DoctorTestCase):
    def setUp(self):
        super().setUp()
        self.qdrant = FakeQdrant(keys={QDRANT_KEY: "r"}).start()
        self.embeddings = FakeEmbeddings(api_key=EMBEDDING_KEY, models={"bge-m3": DIM}).start()
        for fake in (self.qdrant, self.embeddings):
            self.addCleanup(fake.stop)
        self.qdrant.create_collection("qmem_memories", size=DIM)
        self.env.update(QMEM_QDRANT_API_KEY=QDRANT_KEY, PI_QDRANT_MEMORY_EMBEDDING_API_KEY=EMBEDDING_KEY)

    def configure_recall(self, **recall):
        self.configure(recall={"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                               "dimension": DIM, **recall})

    def test_a_working_recall_lane(self):
        self.configure_recall()
        result = self.doctor(code=0)
        for secret in (QDRANT_KEY, EMBEDDING_KEY, self.API_KEY):
            self.assertNotIn(secret, result.stdout)
        self.assertIn(f"collection qmem_memories readable, {DIM} Cosine", result.stdout)
        recall = self.report(code=0)["recall"]
        self.assertEqual((recall["qdrant"]["healthy"], recall["qdrant"]["readable"], recall["qdrant"]["matches"]),
                         (True, True, True))
        self.assertEqual((recall["embeddings"]["dimension"], recall["embeddings"]["matches"]), (DIM, True))
        self.assertEqual(self.embeddings.inputs[-1], "qmem doctor: a probe of the embeddings service")
        credentials = self.report()["credentials"]
        self.assertEqual(credentials["embedding"]["via"], "PI_QDRANT_MEMORY_EMBEDDING_API_KEY")

    def test_the_last_recall_outcome_per_lane(self):
        from qmem.recalllog import RecallLog, entry

        self.configure_recall()
        self.assertIn("last recall none recorded yet", self.doctor(code=0).stdout)
        log = RecallLog.in_directory(self.home / ".local" / "share" / "qmem")
        log.append(entry(host="pi", outcome="delivered", category=None, hits=[("7", "project", 0.8)],
                         searched={"project": 1, "host": 0}, chars=300, wait_ms=120, total_ms=120, now=0))
        log.append(entry(host="pi", outcome="failed", category="timeout", hits=[], searched=None, chars=0,
                         wait_ms=800, total_ms=3000, now=60))
        self.assertEqual(self.report(code=0)["recall"]["last"],
                         {lane: {"outcome": "failed", "category": "timeout", "time": "1970-01-01T00:01:00Z"}
                          for lane in ("project", "host")})
        self.assertIn("last recall 1970-01-01T00:01:00Z: project failed (timeout), host failed (timeout)",
                      self.doctor(code=0).stdout)

    def test_mismatches_and_refusals_are_problems(self):
        self.configure_recall(dimension=DIM * 2)
        problems = " ".join(self.report(code=1)["problems"])
        self.assertIn(f"the collection has dimension {DIM}, the config says {DIM * 2}", problems)
        self.assertIn(f"the embeddings have dimension {DIM}, the config says {DIM * 2}", problems)
        self.configure_recall(distance="Dot")
        self.assertIn("distance Cosine, the config says Dot", " ".join(self.report(code=1)["problems"]))
        self.configure_recall(collection="missing_collection")
        self.assertIn("does not exist", " ".join(self.report(code=1)["problems"]))
        self.configure_recall()
        env = dict(self.env, QMEM_QDRANT_API_KEY="wrong", PI_QDRANT_MEMORY_EMBEDDING_API_KEY="wrong")
        problems = " ".join(self.report(env=env, code=1)["problems"])
        self.assertIn("Qdrant refused the API key", problems)
        self.assertIn("the embeddings service refused the key", problems)

    def test_an_installed_host_that_would_not_be_identified_is_a_problem_with_recall(self):
        """pi's agent directory inside Prime's: both hosts' paths claim the folder, so recall would be off."""
        env = dict(self.env, PI_CODING_AGENT_DIR=str(self.home / ".prime" / "agent" / "pi"))
        self.assertEqual(self.run_module("qmem.local", "install", "pi", env=env).code, 0)
        self.configure()
        document = self.report(env=env, code=0)  # recall not configured: nothing would be lost
        self.assertIsNone(document["hosts"]["pi"]["identified_as"])
        self.configure_recall()
        problems = self.report(env=env, code=1)["problems"]
        self.assertEqual(problems, [f"pi: qmem from {self.home / '.prime/agent/pi/extensions/qmem'} would run with "
                                    "recall configured but could not tell which host loads it (the paths point at both "
                                    "pi's and Prime's agent directories): automatic recall and memory_search would "
                                    "be off; `export QMEM_HOST=pi` where pi starts (or \"host\": \"pi\" under "
                                    f"recall in {self.home / '.config/qmem/config.json'}) settles it"])
        self.assertIn("runs as ✗ unknown host", self.doctor(env=env, code=1).stdout)
        # The fix it names works, the way the bridge settles a true conflict.
        settled = self.report(env=dict(env, QMEM_HOST="pi"), code=0)
        self.assertEqual(settled["hosts"]["pi"]["identified_as"], "pi")
        self.assertEqual(self.report(code=0)["hosts"]["pi"]["kind"], "absent")  # the default pi directory: fine

    def test_recall_switched_off_is_a_warning_and_nothing_is_sent(self):
        self.configure_recall(enabled=False)
        document = self.report(code=0)
        self.assertIn("switched off", " ".join(document["warnings"]))
        self.assertEqual(self.embeddings.inputs, [])
        self.assertEqual(self.qdrant.requests, [])


class HostDoctorTests(DoctorTestCase):
    def test_installed_hosts_and_their_versions(self):
        self.assertEqual(self.run_module("qmem.local", "install", "pi").code, 0)
        hermes_home = self.home / "hermes-home"
        env = dict(self.env, HERMES_HOME=str(hermes_home))
        self.assertEqual(self.run_module("qmem.local", "install", "hermes", "--copy", env=env).code, 0)
        old = hermes_home / "plugins" / "qmem" / "__init__.py"
        old.write_text(old.read_text().replace('__version__ = "', '__version__ = "0.0.9+'))
        document = self.report(env=env, code=0)
        pi, prime, hermes = (document["hosts"][name] for name in ("pi", "prime", "hermes"))
        self.assertEqual((pi["kind"], pi["this_qmem"], pi["target"]), ("link", True, str(REPO / "qmem")))
        self.assertEqual(prime["kind"], "absent")
        self.assertEqual((hermes["kind"], hermes["enabled"]), ("copy", True))
        self.assertTrue(hermes["version"].startswith("0.0.9+"))
        self.assertIn("hermes has qmem 0.0.9+", " ".join(document["warnings"]))

    def test_each_installed_host_says_as_whom_qmem_would_run(self):
        for host in ("pi", "prime"):
            self.assertEqual(self.run_module("qmem.local", "install", host).code, 0)
        document = self.report(code=0)
        self.assertEqual((document["hosts"]["pi"]["identified_as"], document["hosts"]["prime"]["identified_as"]),
                         ("pi", "prime"))
        text = self.doctor(code=0).stdout
        self.assertIn(f"pi: link → {REPO / 'qmem'} (qmem ", text)
        self.assertIn(", this one), runs as pi · prime: link", text)
        self.assertIn("runs as prime · hermes: not installed", text)

    def test_a_link_to_a_clone_in_the_other_hosts_directory_is_a_warning(self):
        clone = self.home / ".pi" / "agent" / "git" / "github.com" / "example" / "qmem"
        shutil.copytree(REPO / "qmem", clone / "qmem", ignore=shutil.ignore_patterns("__pycache__"))
        import subprocess

        env = {key: value for key, value in self.env.items() if key != "PYTHONPATH"}  # this clone's qmem
        installed = subprocess.run([sys.executable, "-m", "qmem.local", "install", "prime"], cwd=clone, env=env,
                                   capture_output=True, text=True, timeout=60)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        self.assertIn(f"warning: this clone ({clone / 'qmem'}) lies in pi's directory", installed.stdout)
        document = self.report(code=0)  # it works: Prime's own facts decide
        self.assertEqual(document["hosts"]["prime"]["identified_as"], "prime")
        [warning] = [w for w in document["warnings"] if w.startswith("prime:")]
        self.assertIn("`python3 -m qmem.local uninstall prime && python3 -m qmem.local install prime --copy`", warning)

    def test_packages_of_the_hosts_own_installers(self):
        clone = self.home / "src" / "qmem-clone"
        shutil.copytree(REPO / "qmem", clone / "qmem", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(REPO / "package.json", clone / "package.json")
        agent = self.home / ".pi" / "agent"
        agent.mkdir(parents=True)
        git = agent / "git" / "github.com" / "example" / "qmem"
        shutil.copytree(clone, git)
        (agent / "settings.json").write_text(json.dumps({"packages": [
            "../../src/qmem-clone", {"source": "git:github.com/example/qmem@v1"}, "npm:other", "../../nothing-here"]}))
        pi = self.report(code=0)["hosts"]["pi"]
        self.assertEqual(pi["kind"], "absent")
        self.assertEqual([(p["source"], p["path"], p["identified_as"]) for p in pi["packages"]],
                         [("../../src/qmem-clone", str(clone), "pi"), ("git:github.com/example/qmem@v1", str(git), "pi")])
        text = self.doctor(code=0).stdout
        self.assertIn(f"pi: no link or copy; the package {clone} (by `pi install`, qmem ", text)  # absolute
        self.assertNotIn("../", text)
        (clone / "qmem" / "bridge.py").unlink()
        problems = self.report(code=1)["problems"]
        self.assertEqual(problems, [f"pi: pi cannot load the package {clone}: bridge.py missing or unreadable"])

    def test_what_stops_an_installed_host_is_a_problem(self):
        self.assertEqual(self.run_module("qmem.local", "install", "pi", "--copy").code, 0)
        copy = self.home / ".pi" / "agent" / "extensions" / "qmem"
        (copy / "tools.json").unlink()
        self.assertIn(f"pi: pi cannot load {copy}: tools.json missing or unreadable", self.report(code=1)["problems"])
        self.assertEqual(self.run_module("qmem.local", "uninstall", "pi").code, 0)
        self.assertEqual(self.run_module("qmem.local", "install", "pi").code, 0)
        env = dict(self.env, QMEM_PYTHON=str(self.home / "no-python"))
        self.assertIn(f"pi: QMEM_PYTHON={self.home / 'no-python'} is not an executable: the bridge cannot start: "
                      f"pi would offer qmem's tools with nothing behind them; `export QMEM_PYTHON={sys.executable}` "
                      f"(a Python ≥ 3.10) where pi starts", self.report(env=env, code=1)["problems"])
        hermes_home = self.home / "hh"
        env = dict(self.env, HERMES_HOME=str(hermes_home))
        self.assertEqual(self.run_module("qmem.local", "install", "hermes", env=env).code, 0)
        (hermes_home / "config.yaml").write_text("plugins:\n  enabled: []\n  disabled: [qmem]\n")
        self.assertIn("hermes: qmem is installed but not in plugins.enabled, so Hermes does not load it: "
                      "`python3 -m qmem.local install hermes` enables it", self.report(env=env, code=1)["problems"])
        self.assertIn("hermes: link → ", self.doctor(env=env, code=1).stdout)

    def test_a_broken_link_is_a_problem(self):
        extensions = self.home / ".pi" / "agent" / "extensions"
        extensions.mkdir(parents=True)
        (extensions / "qmem").symlink_to(self.home / "gone" / "qmem")
        self.assertIn("is a link to", " ".join(self.report(code=1)["problems"]))

    def test_the_session_directories_are_shown(self):
        (self.home / ".prime" / "agent" / "sessions").mkdir(parents=True)
        roots = {root["label"]: root for root in self.report()["paths"]["sessions"]}
        self.assertEqual((roots["pi"]["exists"], roots["prime"]["exists"]), (False, True))
        self.assertEqual(roots["prime"]["directory"], str(self.home / ".prime" / "agent"))
        shutil.rmtree(self.home / ".prime")


class BridgeEnvironmentTests(TempHomeTestCase):
    def test_the_interpreter_probe_gets_the_environment_the_shim_gives_the_bridge(self):
        import re

        from qmem.setup.hostcheck import BRIDGE_ENV_NAMES

        shim = (REPO / "qmem" / "index.js").read_text()
        listed = shim.split("const BRIDGE_ENV = new RegExp(", 1)[1].split("].join", 1)[0]
        self.assertEqual(tuple(re.findall(r'"([^"]+)"', listed))[1:], BRIDGE_ENV_NAMES)  # [0] is the "^(" prefix


SETUP_PATHS = """
import json, sys
from qmem import local
env = {"HOME": sys.argv[1], "PATH": ""}
for argv in (["doctor"], ["install", "pi"], ["uninstall", "pi"], ["mcp-config", "json"], ["import"]):
    assert local.run(argv, env=env).code == 0, argv
print(json.dumps(sorted(m for m in sys.modules if m.startswith("qmem"))))
"""


class SetupIsolationTests(TempHomeTestCase):
    def test_the_setup_commands_never_load_the_admin_modules(self):
        import subprocess
        import sys

        proc = subprocess.run([sys.executable, "-c", SETUP_PATHS, str(self.home)], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
        self.assertTrue({"qmem.setup.doctor", "qmem.setup.install", "qmem.setup.mcpconfig"} <= loaded)
        self.assertFalse({f"qmem.{name}" for name in ADMIN_MODULES} & loaded, loaded)
