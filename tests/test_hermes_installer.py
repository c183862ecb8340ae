"""Hermes' own installer: ``hermes plugins install "file://<clone>#qmem" --enable`` takes the ``qmem/`` subfolder.

The real Hermes 0.19.0 clones a local git work tree (``file://``, offline), installs the subfolder the
fragment names as ``$HERMES_HOME/plugins/qmem`` and enables it; ``doctor`` then sees a loadable,
enabled copy, and ``uninstall hermes`` takes it out again.  Lazy installs are off: Hermes would
otherwise pip-install into its own venv.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import qmem

from .fakes import unused_port
from .hostbench import make_clone
from .hosts import hermes_python
from .support import REPO, clean_env


class HermesInstallerTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.python, reason = hermes_python()
        if cls.python is None:
            raise unittest.SkipTest(reason)

    def setUp(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="qmem-hermes-install-"))
        self.addCleanup(shutil.rmtree, self.home, True)
        self.hermes_home = self.home / ".hermes"
        proxy = f"http://127.0.0.1:{unused_port()}"  # nobody listens: nothing leaves the machine
        self.env = clean_env(self.home, HERMES_HOME=str(self.hermes_home), HERMES_DISABLE_LAZY_INSTALLS="1",
                             NO_COLOR="1", HTTP_PROXY=proxy, HTTPS_PROXY=proxy, ALL_PROXY=proxy, http_proxy=proxy,
                             https_proxy=proxy, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")
        del self.env["PYTHONPATH"]

    def hermes(self, *args: str) -> subprocess.CompletedProcess:
        launcher = "import sys; from hermes_cli.main import main; sys.argv[0] = 'hermes'; sys.exit(main())"
        proc = subprocess.run([str(self.python), "-c", launcher, *args], cwd=self.home, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        self.assertNotIn("Traceback", proc.stderr + proc.stdout)
        return proc

    def qmem_local(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "qmem.local", *args], cwd=REPO, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    def test_hermes_installs_the_subfolder_of_a_clone(self):
        clone = make_clone(self.home / "src" / "qmem", commit=True)
        proc = self.hermes("plugins", "install", f"file://{clone}#qmem", "--enable")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        plugin = self.hermes_home / "plugins" / "qmem"
        self.assertTrue((plugin / "plugin.yaml").is_file())
        self.assertFalse(plugin.is_symlink())
        self.assertIn("qmem", (self.hermes_home / "config.yaml").read_text())
        listed = self.hermes("plugins", "list", "--plain", "--no-bundled")
        self.assertRegex(listed.stdout, rf"(?m)^enabled\s+user\s+{re.escape(qmem.__version__)}\s+qmem$")
        doctor = json.loads(self.qmem_local("doctor", "--json").stdout)
        hermes = doctor["hosts"]["hermes"]
        self.assertEqual((hermes["kind"], hermes["enabled"], hermes["unloadable"]), ("copy", True, None))
        self.assertEqual([p for p in doctor["problems"] if p.startswith("hermes")], [])
        removed = self.qmem_local("uninstall", "hermes")
        self.assertEqual(removed.returncode, 0, removed.stderr)
        self.assertFalse(plugin.exists())


if __name__ == "__main__":
    unittest.main()
