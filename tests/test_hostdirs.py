"""One rule for where a host keeps its files (qmem.hostdirs), and every reader following it:
install, session import and host identity see the same directory, and refuse the same values."""

import unittest
from pathlib import Path

from qmem.hostdirs import agent_directory, session_directory
from qmem.hosts.identity import HostEvidence, identify_host
from qmem.localdb.sessionimport import session_roots
from qmem.setup.install import SetupError, location


class AgentDirectoryTests(unittest.TestCase):
    HOME = "/home/someone"

    def test_defaults_under_home(self):
        env = {"HOME": self.HOME}
        self.assertEqual(agent_directory("pi", env).path, Path(self.HOME, ".pi", "agent"))
        self.assertEqual(agent_directory("prime", env).path, Path(self.HOME, ".prime", "agent"))
        self.assertEqual(agent_directory("hermes", env).path, Path(self.HOME, ".hermes"))
        self.assertFalse(agent_directory("pi", env).moved)

    def test_a_variable_moves_it_and_a_leading_tilde_is_this_home(self):
        env = {"HOME": self.HOME, "PI_CODING_AGENT_DIR": "~/elsewhere/pi", "HERMES_HOME": " /srv/hermes "}
        self.assertEqual(agent_directory("pi", env).path, Path(self.HOME, "elsewhere", "pi"))
        self.assertEqual(agent_directory("hermes", env).path, Path("/srv/hermes"))
        self.assertTrue(agent_directory("pi", env).moved)
        self.assertEqual(agent_directory("pi", {"HOME": self.HOME, "PI_CODING_AGENT_DIR": "  "}).path,
                         Path(self.HOME, ".pi", "agent"))  # blank is unset

    def test_every_reader_refuses_a_relative_directory_the_same_way(self):
        env = {"HOME": self.HOME, "PI_CODING_AGENT_DIR": "relative/pi", "PI_CODING_AGENT_SESSION_DIR": "sessions"}
        directory = agent_directory("pi", env)
        self.assertIsNone(directory.path)
        self.assertIn("PI_CODING_AGENT_DIR is a relative path", directory.problem)
        with self.assertRaises(SetupError) as caught:  # install: refused, naming the variable
            location("pi", env)
        self.assertIn("PI_CODING_AGENT_DIR", caught.exception.message)
        self.assertEqual(location("prime", env).directory, Path(self.HOME, ".prime", "agent", "extensions"))
        # import: pi's directories name no root; Prime's is unaffected
        self.assertEqual([root.label for root in session_roots(env)], ["prime"])
        self.assertEqual(session_directory(env), (None, session_directory(env)[1]))
        # identity: the relative value is never resolved against qmem's working directory
        loaded = HostEvidence(paths=(str(Path.cwd() / "relative" / "pi" / "extensions" / "qmem" / "index.js"),))
        self.assertIsNone(identify_host(loaded, env))
        by_default = HostEvidence(paths=(f"{self.HOME}/.pi/agent/extensions/qmem/index.js",))
        self.assertEqual(identify_host(by_default, env), "pi")

    def test_install_import_and_identity_agree_on_a_moved_directory(self):
        env = {"HOME": self.HOME, "PRIME_AGENT_CODING_AGENT_DIR": "/opt/prime-agent"}
        self.assertEqual(location("prime", env).directory, Path("/opt/prime-agent/extensions"))
        self.assertIn(Path("/opt/prime-agent"), [root.root for root in session_roots(env) if root.host == "prime"])
        evidence = HostEvidence(paths=("/opt/prime-agent/extensions/qmem/index.js",))
        self.assertEqual(identify_host(evidence, env), "prime")


if __name__ == "__main__":
    unittest.main()
