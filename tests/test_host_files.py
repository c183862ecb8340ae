"""No host file can hang, exhaust or crash ``doctor``, ``install`` or ``uninstall``, and none is lost.

Real ``python3 -m qmem.local`` processes in a temporary HOME, each under a watchdog (a hang
fails the test instead of stalling it).  Every kind of bad file — a FIFO, a link to
``/dev/zero``, a dangling link, a loop of links, a directory, a file over 1 MiB, JSON nested
100,000 deep, a 10,000-digit integer, NaN, invalid UTF-8 — is put at every file the host
setup reads: pi's and Prime's ``settings.json``, a package's ``package.json``, an installed
copy's ``package.json``, ``__init__.py`` and install marker, Hermes' ``config.yaml`` and
qmem's ``installed.json``.  doctor names each unreadable one in one line (a problem where it
hides what is at ``…/qmem``, a warning otherwise); install and uninstall refuse in one line
naming it, exit 1 and change nothing.  A ``…/qmem/package.json`` that was read and is no JSON
tells what is there: not qmem, left alone as any other folder.  No output carries a file's content or a traceback.
"""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .support import REPO, Completed, clean_env

PACKAGE = REPO / "qmem"
WATCHDOG_S = 60  # seconds per process; a run takes a fraction of one, a hang forever
CONTENT = "CONTENT-9c2e-never-shown"  # in every bad document; no output may carry it

#: Bad files that are refused wherever they are; then those refused where JSON is read.
NOT_FILES = ("fifo", "dev-zero", "dangling-link", "link-loop", "directory")
FILE_KINDS = (*NOT_FILES, "too-large")
#: Documents that were read and are no JSON: at ``…/qmem/package.json`` they say "not qmem" (qmem's own is valid).
CONTENT_KINDS = ("deep-json", "nan", "not-utf8")
JSON_KINDS = (*FILE_KINDS, *CONTENT_KINDS)
KINDS = (*JSON_KINDS, "huge-int")  # a 10,000-digit integer is a value, not a refusal: it is ignored

#: kind -> the words its line must have.
WORDS = {"fifo": "is a named pipe (FIFO), not a regular file", "dev-zero": "is a character device",
         "dangling-link": "is a link to a file that does not exist", "link-loop": "is a loop of symbolic links",
         "directory": "is a directory", "too-large": "is larger than 1 MiB", "deep-json": "is nested too deeply",
         "nan": "holds NaN, which is not a JSON number", "not-utf8": "is not UTF-8 text"}

#: kind -> what a document of that kind adds to a normal one (JSON; as a YAML line for config.yaml).
ADDED = {"deep-json": b"[" * 100_000 + b"]" * 100_000, "huge-int": b"7" * 10_000, "nan": b"NaN",
         "not-utf8": b'"\xff\xfe"', "too-large": b'"' + b" " * (1 << 20) + b'"'}


def make_bad(kind: str, path: Path, normal: bytes) -> None:
    """Put a file of ``kind`` at ``path``; ``normal`` is what a good one holds (a JSON object, or YAML)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dangling-link":
        path.symlink_to(path.parent / "gone")
    elif kind == "link-loop":
        path.symlink_to(path)
    elif kind == "directory":
        path.mkdir()
    elif path.suffix == ".json":
        body = normal.rstrip()
        assert body.endswith(b"}"), path
        path.write_bytes(body[:-1] + b', "c": "' + CONTENT.encode() + b'", "x": ' + ADDED[kind] + b"}\n")
    else:
        path.write_bytes(normal + b"c: " + CONTENT.encode() + b"\nx: " + ADDED[kind] + b"\n")


def snapshot(root: Path) -> dict[str, tuple]:
    """What is under ``root``: each entry's type, a link's target, a regular file's digest (nothing else read)."""
    seen: dict[str, tuple] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                seen[path] = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                seen[path] = ("file", hashlib.sha256(Path(path).read_bytes()).hexdigest())
            else:
                seen[path] = (stat.S_IFMT(mode),)
    return seen


def qmem_local(home: Path, *args: str) -> Completed:
    proc = subprocess.run([sys.executable, "-m", "qmem.local", *args], cwd=home, env=clean_env(home), input="",
                          capture_output=True, text=True, timeout=WATCHDOG_S)
    return Completed(proc.returncode, proc.stdout, proc.stderr)


@dataclass
class SetupRuns:
    """An install then an uninstall in one HOME, with what was there before and after each."""

    path: Path  # the bad file
    before: dict
    install: Completed
    after_install: dict
    uninstall: Completed
    after: dict


def install_then_uninstall(home: Path, bad: Path, host: str, *install_options: str) -> SetupRuns:
    before = snapshot(home)
    install = qmem_local(home, "install", host, *install_options)
    after_install = snapshot(home)
    return SetupRuns(bad, before, install, after_install, qmem_local(home, "uninstall", host), snapshot(home))


def copy_of_qmem(folder: Path) -> None:
    shutil.copytree(PACKAGE, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


class HostFilesTestCase(unittest.TestCase):
    def setUp(self):
        self.root = Path(tempfile.mkdtemp(prefix="qmem-hostfiles-"))
        self.addCleanup(shutil.rmtree, self.root, True)

    def each_kind(self, scenario, kinds=KINDS):
        """``scenario(kind, home)`` for every kind, in parallel, each in a HOME of its own: {kind: its result}."""
        homes = {kind: self.root / kind for kind in kinds}
        for home in homes.values():
            home.mkdir()
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = {kind: pool.submit(scenario, kind, homes[kind]) for kind in kinds}
            return {kind: future.result() for kind, future in futures.items()}

    def assertClean(self, result: Completed):
        for stream in (result.stdout, result.stderr):
            self.assertNotIn("Traceback", stream)
            self.assertNotIn(CONTENT, stream)

    def assertRefused(self, result: Completed, path: Path, kind: str, verb: str):
        """One line on stderr naming ``path`` and why, exit 1, nothing on stdout."""
        self.assertClean(result)
        self.assertEqual(result.code, 1, result.stdout + result.stderr)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(f"{path} {WORDS[kind]}", lines[0])
        self.assertRegex(lines[0], rf"^qmem-local: cannot {verb} qmem for \w+: .*; nothing was changed$")

    def assertBothRefused(self, runs: SetupRuns, kind: str, install_verb: str = "install"):
        self.assertRefused(runs.install, runs.path, kind, install_verb)
        self.assertRefused(runs.uninstall, runs.path, kind, "uninstall")
        self.assertEqual(runs.after_install, runs.before)  # nothing deleted, overwritten or added
        self.assertEqual(runs.after, runs.before)

    def assertBothRan(self, runs: SetupRuns):
        for run in (runs.install, runs.uninstall):
            self.assertClean(run)
            self.assertEqual(run.code, 0, run.stdout + run.stderr)


class DoctorTests(HostFilesTestCase):
    def test_doctor_names_each_unreadable_host_file_in_one_line(self):
        def scenario(kind, home):
            files = {
                "pi settings": (home / ".pi" / "agent" / "settings.json", b'{"packages": []}', JSON_KINDS),
                "pi __init__": (home / ".pi" / "agent" / "extensions" / "qmem" / "__init__.py", None, NOT_FILES),
                "prime manifest": (home / ".prime" / "agent" / "extensions" / "qmem" / "package.json",
                                   (PACKAGE / "package.json").read_bytes(), FILE_KINDS),
                "package manifest": (home / "pkg" / "package.json", (REPO / "package.json").read_bytes(), JSON_KINDS),
                "hermes config": (home / ".hermes" / "config.yaml", b"plugins:\n  enabled:\n    - qmem\n", FILE_KINDS),
                "install record": (home / ".local" / "share" / "qmem" / "installed.json",
                                   b'{"version": 1, "hosts": {}}', JSON_KINDS),
            }
            copy_of_qmem(home / ".pi" / "agent" / "extensions" / "qmem")
            copy_of_qmem(home / ".prime" / "agent" / "extensions" / "qmem")
            (home / ".prime" / "agent" / "settings.json").write_text(json.dumps({"packages": ["../../pkg"]}))
            (home / ".hermes" / "plugins").mkdir(parents=True)
            (home / ".hermes" / "plugins" / "qmem").symlink_to(PACKAGE)
            for path, normal, kinds in files.values():
                if kind in kinds or normal is not None:  # __init__.py stays the real one for a document kind
                    make_bad(kind, path, normal)
            before = snapshot(home)
            text, document = qmem_local(home, "doctor"), qmem_local(home, "doctor", "--json")
            return files, before, text, document, snapshot(home)

        for kind, (files, before, text, document, after) in self.each_kind(scenario).items():
            with self.subTest(kind=kind):
                self.assertClean(text)
                self.assertClean(document)
                self.assertEqual(after, before)  # doctor reads only
                refused = kind in FILE_KINDS  # what is at Prime's …/qmem cannot be told
                # A config.yaml that is not UTF-8 leaves unknown whether Hermes loads qmem: a problem too.
                unsure = kind == "not-utf8"
                failed = int(refused or unsure)
                self.assertEqual((text.code, document.code), (failed, failed), text.stdout + text.stderr)
                report = json.loads(document.stdout)
                said = report["problems"] + report["warnings"]
                for what, (path, _, kinds) in files.items():
                    lines = [line for line in text.stdout.splitlines() if str(path) in line]
                    entries = [entry for entry in said if str(path) in entry]
                    if kind in kinds:
                        self.assertEqual(len(lines), 1, f"{what}: {text.stdout}")
                        self.assertIn(f"{path} {WORDS[kind]}", lines[0])
                        self.assertEqual(len(entries), 1, f"{what}: {said}")
                    elif unsure and what == "hermes config":
                        self.assertEqual(len(lines), 1, f"{what}: {text.stdout}")
                        self.assertIn(f"qmem does not read {path} with certainty (it is not UTF-8 text", lines[0])
                        self.assertIn("whether Hermes loads qmem is not known", lines[0])
                        self.assertEqual(len(entries), 1, f"{what}: {said}")
                    else:
                        self.assertEqual((lines, entries), ([], []), what)
                hidden = [entry for entry in report["problems"] if "cannot tell what is at" in entry]
                self.assertEqual(len(hidden), (kind in NOT_FILES) + refused)  # pi's __init__.py, Prime's package.json
                prime = report["hosts"]["prime"]
                self.assertEqual(prime["kind"], "unreadable" if refused else "other" if kind in CONTENT_KINDS
                                 else "copy")
                if kind in CONTENT_KINDS:
                    self.assertIn(f"prime: {prime['path']} is not qmem", report["warnings"])

    def test_package_sources_no_host_could_clone_or_find_are_passed_over(self):
        home = self.root / "home"
        agent = home / ".pi" / "agent"
        agent.mkdir(parents=True)
        (agent / "settings.json").write_text(json.dumps({"packages": [
            "https://[not-a-host/owner/repo", "git:[::1/owner/repo", "../pkg\u0000/x", {"source": 7}, None]}))
        result = qmem_local(home, "doctor", "--json")
        self.assertClean(result)
        self.assertEqual(result.code, 0, result.stdout + result.stderr)
        self.assertEqual(json.loads(result.stdout)["hosts"]["pi"]["packages"], [])


class InstallTests(HostFilesTestCase):
    def test_an_unreadable_package_json_in_the_installed_copy_stops_install_and_uninstall(self):
        def scenario(kind, home):
            copy = home / ".prime" / "agent" / "extensions" / "qmem"
            copy_of_qmem(copy)
            make_bad(kind, copy / "package.json", (PACKAGE / "package.json").read_bytes())
            return install_then_uninstall(home, copy / "package.json", "prime", "--copy")

        for kind, runs in self.each_kind(scenario).items():
            with self.subTest(kind=kind):
                if kind in FILE_KINDS:
                    self.assertBothRefused(runs, kind)
                elif kind in CONTENT_KINDS:  # read, and not qmem's manifest: someone else's folder, left alone
                    for run, words in ((runs.install, "already exists and is not qmem"),
                                       (runs.uninstall, "is not qmem")):
                        self.assertClean(run)
                        self.assertEqual(run.code, 1, run.stdout + run.stderr)
                        self.assertEqual(len(run.stderr.splitlines()), 1, run.stderr)
                        self.assertIn(f"{runs.path.parent} {words}", run.stderr)
                    self.assertEqual((runs.after_install, runs.after), (runs.before, runs.before))
                else:  # readable: an older copy, updated then removed
                    self.assertBothRan(runs)
                    self.assertIn("qmem updated for Prime", runs.install.stdout)
                    self.assertFalse(runs.path.parent.exists())

    def test_an_unreadable_install_marker_stops_updating_or_removing_the_copy(self):
        def scenario(kind, home):
            copy = home / ".pi" / "agent" / "extensions" / "qmem"
            copy_of_qmem(copy)
            files = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
            (copy / "index.js").write_text("// an older qmem\n")
            make_bad(kind, copy / ".qmem-install.json", json.dumps({"qmem": "0.0.1", "files": files}).encode())
            return install_then_uninstall(home, copy / ".qmem-install.json", "pi", "--copy")

        for kind, runs in self.each_kind(scenario).items():
            with self.subTest(kind=kind):
                if kind in JSON_KINDS:
                    self.assertBothRefused(runs, kind, "update")
                else:
                    self.assertBothRan(runs)
                    self.assertFalse(runs.path.parent.exists())

    def test_an_unreadable_install_record_stops_install_and_uninstall(self):
        def scenario(kind, home):
            extensions = home / ".pi" / "agent" / "extensions"
            extensions.mkdir(parents=True)
            (extensions / "qmem").symlink_to(PACKAGE)
            record = home / ".local" / "share" / "qmem" / "installed.json"
            make_bad(kind, record, json.dumps({"version": 1, "hosts": {"pi": {
                "directories": [str(home / ".pi"), str(extensions.parent), str(extensions)], "files": {}}}}).encode())
            return install_then_uninstall(home, record, "pi")

        for kind, runs in self.each_kind(scenario).items():
            with self.subTest(kind=kind):
                if kind in JSON_KINDS:
                    self.assertBothRefused(runs, kind)
                    self.assertIn("the install record ", runs.install.stderr)
                else:  # readable: the link goes, and the directories the record lists with it
                    self.assertBothRan(runs)
                    self.assertIn("already installed", runs.install.stdout)
                    self.assertFalse((self.root / kind / ".pi").exists())

    def test_an_unreadable_hermes_config_stops_install_and_uninstall_and_settings_json_is_never_read(self):
        def scenario(kind, home):
            plugins = home / ".hermes" / "plugins"
            plugins.mkdir(parents=True)
            (plugins / "qmem").symlink_to(PACKAGE)
            make_bad(kind, home / ".hermes" / "config.yaml", b"plugins:\n  enabled:\n    - qmem\n")
            make_bad(kind, home / ".pi" / "agent" / "settings.json", b'{"packages": []}')
            hermes = install_then_uninstall(home, home / ".hermes" / "config.yaml", "hermes")
            return hermes, install_then_uninstall(home, home / ".pi" / "agent" / "settings.json", "pi")

        for kind, (hermes, pi) in self.each_kind(scenario).items():
            with self.subTest(kind=kind):
                config = str(hermes.path)
                if kind in FILE_KINDS:
                    self.assertBothRefused(hermes, kind)
                else:  # a regular YAML file: edited where certain, left alone (and the command given) where not
                    self.assertBothRan(hermes)
                    self.assertEqual(hermes.after[config][0], "file")
                    if kind == "not-utf8":
                        self.assertEqual(hermes.after[config], hermes.before[config])
                        self.assertIn("hermes plugins disable qmem", hermes.uninstall.stdout)
                # pi's settings.json is the host's: install and uninstall neither read nor touch it
                self.assertBothRan(pi)
                self.assertEqual(pi.after_install[str(pi.path)], pi.before[str(pi.path)])
                self.assertEqual(pi.after[str(pi.path)], pi.before[str(pi.path)])
                self.assertFalse((pi.path.parent / "extensions").exists())

if __name__ == "__main__":
    unittest.main()
