"""``doctor`` and ``admin status`` never print a credential-like value, and warn about how keys are held.

A GitHub token pasted as ``recall.collection`` is valid config (the name pattern allows it):
both reports name the field and the family instead of the value, warn more loudly when others
can read the file, and still exit 0 — warnings are not problems.  The seed's "Do not reuse the
admin key for runtime" (and its mirror, the source key equal to the admin key) is a warning
naming the variables in effect, aliases included, never their value.
"""

import json
import os

from qmem.secretscan.audit import FlaggedValue, audit, flagged_values, hide_flagged, reused_keys

from .support import TempHomeTestCase, write_config
from .test_admin import ADMIN_KEY, RUNTIME_KEY, AdminTestCase

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


class AuditTests(TempHomeTestCase):
    def test_flagged_values_name_the_field_and_family_at_any_depth(self):
        document = {"url": "https://gw.example", "recall": {"collection": TOKEN, "project": "shop"},
                    "extra": [{"note": f"key {TOKEN}"}], TOKEN: 1}
        found = flagged_values(document)
        self.assertEqual([item.family for item in found], ["github-token"] * 3)
        self.assertEqual({item.field for item in found} - {"<a 40-character name, not shown>"},
                         {"extra.[0].note", "recall.collection"})
        self.assertNotIn(TOKEN, repr(found))
        self.assertEqual(flagged_values({"recall": {"collection": "qmem_memories"}}), [])
        self.assertEqual(FlaggedValue("a", "b").field, "a")

    def test_permission_warning_only_for_a_file_holding_such_a_value(self):
        path = write_config(self.env, {"recall": {"collection": TOKEN}})
        for mode, expected in ((0o600, None), (0o640, "its group (mode 0640)"), (0o604, "others (mode 0604)")):
            with self.subTest(mode=oct(mode)):
                os.chmod(path, mode)
                warnings = audit(self.env)
                self.assertIn("config key 'recall.collection' looks like a credential (github-token)", warnings[0])
                readable = [w for w in warnings if "can be read by" in w]
                self.assertEqual(bool(readable), expected is not None)
                if expected:
                    self.assertIn(expected, readable[0])
                self.assertNotIn(TOKEN, " ".join(warnings))
        write_config(self.env, {"recall": {"collection": "qmem_memories"}})
        os.chmod(path, 0o666)
        self.assertEqual(audit(self.env), [])

    def test_reused_keys_name_the_variables_never_the_value(self):
        same = "one-key-for-everything-123"
        cases = [
            ({"QMEM_ADMIN_QDRANT_API_KEY": same, "QMEM_QDRANT_API_KEY": same},
             ["QMEM_ADMIN_QDRANT_API_KEY has the same value as QMEM_QDRANT_API_KEY"]),
            ({"PI_QDRANT_MEMORY_ADMIN_QDRANT_API_KEY": same, "PI_QDRANT_MEMORY_QDRANT_API_KEY": f" {same} "},
             ["PI_QDRANT_MEMORY_ADMIN_QDRANT_API_KEY has the same value as PI_QDRANT_MEMORY_QDRANT_API_KEY"]),
            ({"QMEM_SOURCE_QDRANT_API_KEY": same, "QMEM_ADMIN_QDRANT_API_KEY": same},
             ["QMEM_SOURCE_QDRANT_API_KEY has the same value as QMEM_ADMIN_QDRANT_API_KEY"]),
            ({"QMEM_ADMIN_QDRANT_API_KEY": same, "QMEM_QDRANT_API_KEY": "other", "QMEM_SOURCE_QDRANT_API_KEY": "x"}, []),
            ({"QMEM_QDRANT_API_KEY": same, "QMEM_SOURCE_QDRANT_API_KEY": same}, []),  # the admin key is not involved
            ({"QMEM_ADMIN_QDRANT_API_KEY": " ", "QMEM_QDRANT_API_KEY": " "}, []),  # blank is absent
        ]
        for env, expected in cases:
            with self.subTest(env=sorted(env)):
                warnings = reused_keys(env)
                self.assertEqual([w.split(":")[0] for w in warnings], expected)
                self.assertNotIn(same, " ".join(warnings))
        self.assertIn("do not reuse the admin key for runtime", reused_keys(cases[0][0])[0])

    def test_hide_flagged_keeps_the_rest(self):
        self.assertEqual(hide_flagged({"a": [f"x {TOKEN} y", 3, None], "b": "plain"}),
                         {"a": ["x [redacted: github-token] y", 3, None], "b": "plain"})


class DoctorTests(TempHomeTestCase):
    def test_doctor_names_field_and_family_warns_and_exits_zero(self):
        path = write_config(self.env, {"recall": {"collection": TOKEN, "project": "shop"}})
        os.chmod(path, 0o644)
        self.env.update(QMEM_ADMIN_QDRANT_API_KEY=RUNTIME_KEY, QMEM_QDRANT_API_KEY=RUNTIME_KEY)
        text = self.run_module("qmem.local", "doctor")
        self.assertEqual(text.code, 0, text.stderr)  # warnings only: no problem
        document = json.loads(self.run_module("qmem.local", "doctor", "--json").stdout)
        for output in (text.stdout + text.stderr, json.dumps(document)):
            self.assertNotIn(TOKEN, output)
            self.assertNotIn(TOKEN[4:16], output)
            self.assertNotIn(RUNTIME_KEY, output)
        self.assertIn("recall.collection = [redacted: github-token]", text.stdout)
        self.assertEqual(document["config"]["settings"]["recall.collection"]["value"], "[redacted: github-token]")
        warnings = document["warnings"]
        self.assertTrue(any("'recall.collection' looks like a credential (github-token)" in w for w in warnings))
        self.assertTrue(any("mode 0644" in w and "chmod 600" in w for w in warnings))
        self.assertTrue(any(w.startswith("QMEM_ADMIN_QDRANT_API_KEY has the same value as QMEM_QDRANT_API_KEY")
                            for w in warnings))
        self.assertIn("warning     QMEM_ADMIN_QDRANT_API_KEY has the same value", text.stdout)
        self.assertTrue(document["ok"])


class AdminStatusTests(AdminTestCase):
    RECALL = {"collection": TOKEN}

    def test_admin_status_hides_the_collection_and_warns(self):
        self.init_destination()
        os.chmod(self.home / ".config" / "qmem" / "config.json", 0o644)
        self.env["QMEM_QDRANT_API_KEY"] = ADMIN_KEY
        text = self.admin("status")
        self.assertEqual(text.code, 0, text.error)  # healthy: the warnings do not fail it
        document = self.admin_json("status")
        for output in (text.stdout, json.dumps(document)):
            self.assertNotIn(TOKEN, output)
            self.assertNotIn(ADMIN_KEY, output)
        self.assertIn("[redacted: github-token]", text.stdout)
        self.assertEqual(document["destination"]["collection"], "[redacted: github-token]")
        self.assertIn("warning      QMEM_ADMIN_QDRANT_API_KEY has the same value as QMEM_QDRANT_API_KEY: do not reuse "
                      "the admin key for runtime", text.stdout)
        self.assertTrue(any("'recall.collection' looks like a credential (github-token)" in w
                            for w in document["warnings"]))
        self.assertTrue(any("mode 0644" in w for w in document["warnings"]))
        self.assertTrue(document["ok"])
