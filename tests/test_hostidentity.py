"""Which host loaded the shim: the votes of paths (as given and resolved), process title and header."""

import os
import tempfile
import unittest
from pathlib import Path

from qmem.hosts.identity import HostEvidence, host_votes, identify_host, installed_evidence

HOME = {"HOME": "/home/u"}


def evidence(*paths, process=None, rlm=False):
    return HostEvidence(paths=tuple(paths), process=process, has_rlm_depth=rlm)


class IdentifyHostTests(unittest.TestCase):
    def test_table(self):
        pi_link = "/home/u/.pi/agent/extensions/qmem/index.js"
        prime_link = "/home/u/.prime/agent/extensions/qmem/index.js"
        cases = [
            # install pi|prime (link or copy): the path the host loaded, its agent dir, the process, the header
            ("pi, auto-discovered", evidence(pi_link, "/home/u/.pi/agent", "/src/qmem", process="pi"), HOME, "pi"),
            ("prime, auto-discovered", evidence(prime_link, "/home/u/.prime/agent", "/src/qmem",
                                                process="prime-agent", rlm=True), HOME, "prime"),
            # pi install <clone>, prime-agent package install <clone>: no path votes, the process decides
            ("pi install <clone>", evidence("/src/qmem/index.js", "/src", "/src/qmem", process="pi"), HOME, "pi"),
            ("prime package install", evidence("/src/qmem/index.js", "/src", "/src/qmem", process="prime-agent",
                                               rlm=True), HOME, "prime"),
            ("pi install git:", evidence("/home/u/.pi/agent/git/github.com/o/qmem/qmem/index.js",
                                         "/home/u/.pi/agent/git/github.com/o/qmem", "/home/u/.pi/agent/git/github.com"
                                         "/o/qmem/qmem", process="pi"), HOME, "pi"),
            # agent directories moved by the environment
            ("prime dir from env", evidence("/x/custom/extensions/qmem/index.js", "/x/custom", "/src/qmem"),
             {"PRIME_AGENT_CODING_AGENT_DIR": "/x/custom"}, "prime"),
            ("pi dir from env", evidence("/y/agentdir/extensions/qmem"), {"PI_CODING_AGENT_DIR": "/y/agentdir"}, "pi"),
            # an older host without sourceInfo: only this folder (resolved) and the process
            ("old pi, linked", evidence("/src/qmem", process="pi"), HOME, "pi"),
            ("old pi, copied", evidence("/home/u/.pi/agent/extensions/qmem"), HOME, "pi"),
            # PI_CODING_AGENT=true is set by both hosts: no vote
            ("PI_CODING_AGENT only", evidence("/src/qmem"), {"PI_CODING_AGENT": "true", **HOME}, None),
            ("nothing", evidence("/src/qmem", process="node"), HOME, None),
            # contradictions are off
            ("pi runs Prime's folder", evidence(prime_link, "/home/u/.prime/agent", process="pi"), HOME, None),
            ("pi with a Prime header", evidence(pi_link, process="pi", rlm=True), HOME, None),
            ("Prime runs pi's folder", evidence(pi_link, "/home/u/.pi/agent", process="prime-agent", rlm=True), HOME,
             None),
            ("both directories", evidence(pi_link, prime_link), HOME, None),
            ("pi dir inside Prime's", evidence("/home/u/.prime/agent/pi/extensions/qmem/index.js", process="pi"),
             {"PI_CODING_AGENT_DIR": "/home/u/.prime/agent/pi", **HOME}, None),
            # relative paths and look-alike names are no evidence
            ("relative", evidence(".pi/agent/extensions/qmem"), HOME, None),
            ("look-alike", evidence("/home/u/.pi/agentx/extensions/qmem", "/home/u/x.prime/agent"), HOME, None),
        ]
        for name, facts, env, expected in cases:
            with self.subTest(name):
                self.assertEqual(identify_host(facts, env), expected, host_votes(facts, env))

    def test_the_strongest_evidence_decides_a_clone_in_the_other_hosts_directory(self):
        """`pi install git:…` cloned qmem under ~/.pi/agent/git; `install prime` linked it into Prime (and the
        other way round): the host's own facts and its loaded path as given outweigh the resolved folder."""
        pi_clone = "/home/u/.pi/agent/git/github.com/o/qmem/qmem"
        prime_clone = "/home/u/.prime/agent/git/github.com/o/qmem/qmem"
        prime_loaded = ("/home/u/.prime/agent/extensions/qmem/index.js", "/home/u/.prime/agent")
        pi_loaded = ("/home/u/.pi/agent/extensions/qmem/index.js", "/home/u/.pi/agent")
        cases = [
            ("Prime, linked from pi's git clone", HostEvidence((*prime_loaded, pi_clone), "prime-agent", True,
                                                               prime_loaded), "prime"),
            ("pi, linked from Prime's git clone", HostEvidence((*pi_loaded, prime_clone), "pi", False, pi_loaded),
             "pi"),
            # the strongest facts disagree: still off
            ("pi's process, Prime's loaded path", HostEvidence((*prime_loaded, pi_clone), "pi", False, prime_loaded),
             None),
            ("Prime's header, pi's process", HostEvidence((*pi_loaded, pi_clone), "pi", True, pi_loaded), None),
            ("no loaded path given", HostEvidence((pi_clone, prime_loaded[0]), "prime-agent", True), None),
        ]
        for name, facts, expected in cases:
            with self.subTest(name):
                self.assertEqual(identify_host(facts, HOME), expected, host_votes(facts, HOME))

    def test_a_true_conflict_is_settled_by_the_named_host_only_among_the_votes(self):
        conflict = evidence("/home/u/.prime/agent/extensions/qmem/index.js", "/home/u/.prime/agent", process="pi")
        self.assertIsNone(identify_host(conflict, HOME))
        self.assertEqual(identify_host(conflict, HOME, "pi"), "pi")
        self.assertEqual(identify_host(conflict, HOME, "prime"), "prime")
        self.assertIsNone(identify_host(conflict, HOME, "hermes"))
        only_pi = evidence("/home/u/.pi/agent/extensions/qmem/index.js", process="pi")
        self.assertEqual(identify_host(only_pi, HOME, "prime"), "pi")  # no conflict: the name changes nothing
        self.assertEqual(identify_host(evidence("/src/qmem", process="node"), HOME, "prime"), "prime")  # no votes

    def test_a_link_counts_as_given_and_resolved(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            clone = root / "src" / "qmem"
            clone.mkdir(parents=True)
            (clone / "index.js").write_text("")
            extensions = root / ".prime" / "agent" / "extensions"
            extensions.mkdir(parents=True)
            (extensions / "qmem").symlink_to(clone)
            env = {"HOME": str(root)}
            # The shim's own folder is the resolved one (Node resolves links): alone it says nothing.
            self.assertIsNone(identify_host(evidence(str(clone)), env))
            loaded = str(extensions / "qmem" / "index.js")
            self.assertEqual(identify_host(evidence(loaded, str(clone), process="prime-agent", rlm=True), env), "prime")
            # A moved agent directory that is itself a link: the host gives the link, the resolved path matches too.
            real_agent = root / "data" / "prime-agent"
            real_agent.mkdir(parents=True)
            (root / "linked-agent").symlink_to(real_agent)
            env = {"HOME": str(root), "PRIME_AGENT_CODING_AGENT_DIR": str(root / "linked-agent")}
            self.assertEqual(identify_host(evidence(str(real_agent / "extensions" / "qmem" / "index.js")), env),
                             "prime")

    def test_session_start_parameters(self):
        params = {"cwd": "/w", "extensionDir": "/src/qmem", "hostProcess": "prime-agent",
                  "loaded": {"path": "/home/u/.prime/agent/extensions/qmem/index.js", "baseDir": "/home/u/.prime/agent",
                             "source": "auto"},
                  "header": {"rlmDepth": 0, "hasRlmDepth": True}}
        facts = HostEvidence.from_session_start(params)
        self.assertEqual(facts.paths, ("/home/u/.prime/agent/extensions/qmem/index.js", "/home/u/.prime/agent",
                                       "/src/qmem"))
        self.assertEqual(facts.loaded, facts.paths[:2])
        self.assertEqual((facts.process, facts.has_rlm_depth), ("prime-agent", True))
        for junk in ({}, {"loaded": "x", "header": [1], "hostProcess": 3, "extensionDir": None},
                     {"loaded": {"path": 7}, "header": {"hasRlmDepth": "yes"}}):
            with self.subTest(junk=junk):
                self.assertEqual(HostEvidence.from_session_start(junk), HostEvidence())

    def test_what_doctor_asks_for_an_installed_host(self):
        env = {"HOME": "/home/u"}
        for host in ("pi", "prime"):
            agent = Path(f"/home/u/.{host}/agent")
            facts = installed_evidence(host, agent / "extensions" / "qmem" / "index.js", agent)
            self.assertEqual(identify_host(facts, env), host)
        self.assertEqual(installed_evidence("pi", Path("/a/qmem/index.js"), Path("/a")).paths[2],
                         os.path.realpath("/a/qmem"))


if __name__ == "__main__":
    unittest.main()
