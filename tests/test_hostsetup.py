"""``install`` / ``uninstall`` and the Hermes config edit: real subprocesses, a temporary HOME."""

import json
import os
import unittest

from qmem.setup import hermesconfig

from .support import REPO, TempHomeTestCase

try:
    import yaml
except ImportError:  # optional: the edits are then checked against Hermes' own reader only
    yaml = None

PACKAGE = REPO / "qmem"


class InstallTests(TempHomeTestCase):
    def cli(self, *args, env=None):
        result = self.run_module("qmem.local", *args, env=env)
        self.assertNotIn("Traceback", result.stderr)
        return result

    def extensions(self, host):
        return {"pi": self.home / ".pi" / "agent" / "extensions", "prime": self.home / ".prime" / "agent" / "extensions",
                "hermes": self.home / ".hermes" / "plugins"}[host]

    def test_link_install_is_idempotent_and_uninstall_removes_only_the_link(self):
        for host in ("pi", "prime", "hermes"):
            with self.subTest(host=host):
                first = self.cli("install", host, "--json")
                self.assertEqual(first.code, 0, first.stderr)
                document = json.loads(first.stdout)
                self.assertEqual((document["action"], document["mode"]), ("installed", "link"))
                target = self.extensions(host) / "qmem"
                self.assertEqual(os.readlink(target), str(PACKAGE))
                again = self.cli("install", host)
                self.assertEqual(again.code, 0, again.stderr)
                self.assertIn("already installed", again.stdout)
                removed = self.cli("uninstall", host)
                self.assertEqual(removed.code, 0, removed.stderr)
                self.assertIn("your memories stay in the data directory", removed.stdout)
                self.assertFalse(os.path.lexists(target))
                self.assertTrue(PACKAGE.is_dir() and (PACKAGE / "index.js").is_file())  # the source is untouched
                self.assertEqual(self.cli("uninstall", host).code, 0)  # nothing left: still fine

    def test_copy_install_updates_an_older_copy_and_uninstall_removes_it(self):
        result = self.cli("install", "pi", "--copy")
        self.assertEqual(result.code, 0, result.stderr)
        copy = self.extensions("pi") / "qmem"
        self.assertFalse(copy.is_symlink())
        self.assertEqual((copy / "tools.json").read_bytes(), (PACKAGE / "tools.json").read_bytes())
        self.assertFalse((copy / "__pycache__").exists())
        self.assertIn("already installed", self.cli("install", "pi", "--copy").stdout)
        (copy / "index.js").write_text("// an older qmem\n")
        (copy / "retired_module.py").write_text("# a file an older qmem had\n")
        marker = json.loads((copy / ".qmem-install.json").read_text())
        marker["files"].append("retired_module.py")
        (copy / ".qmem-install.json").write_text(json.dumps(marker))
        updated = self.cli("install", "pi", "--copy", "--json")
        self.assertEqual(json.loads(updated.stdout)["action"], "updated")
        self.assertEqual((copy / "index.js").read_bytes(), (PACKAGE / "index.js").read_bytes())
        self.assertFalse((copy / "retired_module.py").exists())
        self.assertEqual(self.cli("uninstall", "pi").code, 0)
        self.assertFalse(copy.exists())
        # install made ~/.pi/agent/extensions, so uninstall removes it: only an empty one can be (no staging left)
        self.assertFalse((self.home / ".pi").exists())

    def test_what_is_not_qmem_is_never_replaced_or_removed(self):
        extensions = self.extensions("pi")
        extensions.mkdir(parents=True)
        other = extensions / "qmem"
        other.mkdir()
        (other / "notes.txt").write_text("mine")
        for args in (["install", "pi"], ["install", "pi", "--copy"], ["uninstall", "pi"]):
            with self.subTest(args=args):
                result = self.cli(*args)
                self.assertEqual(result.code, 1)
                self.assertIn("is not qmem (a folder holding notes.txt)", result.stderr)
                self.assertEqual((other / "notes.txt").read_text(), "mine")
        other.joinpath("notes.txt").unlink()
        other.rmdir()
        elsewhere = self.home / "something-else"
        elsewhere.mkdir()
        other.symlink_to(elsewhere)
        refused = self.cli("install", "pi")
        self.assertEqual(refused.code, 1)
        self.assertIn(f"{other} already exists and is not qmem", refused.stderr)
        self.assertEqual(self.cli("uninstall", "pi").code, 1)
        self.assertEqual(os.readlink(other), str(elsewhere))

    def test_a_copy_with_files_qmem_does_not_know_is_kept(self):
        self.cli("install", "prime", "--copy")
        copy = self.extensions("prime") / "qmem"
        (copy / "my-notes.md").write_text("keep me")
        result = self.cli("uninstall", "prime")
        self.assertEqual(result.code, 1)
        self.assertIn("files qmem does not know (my-notes.md)", result.stderr)
        self.assertEqual((copy / "my-notes.md").read_text(), "keep me")
        self.assertEqual(self.cli("install", "prime", "--copy").code, 0)  # identical qmem files: unchanged
        (copy / "index.js").write_text("// changed")
        self.assertIn("files qmem does not know", self.cli("install", "prime", "--copy").stderr)

    def test_link_and_copy_do_not_replace_each_other(self):
        self.cli("install", "pi")
        result = self.cli("install", "pi", "--copy")
        self.assertEqual(result.code, 1)
        self.assertIn("is a link to this qmem; run `python3 -m qmem.local uninstall pi` first", result.stderr)
        self.cli("uninstall", "pi")
        self.cli("install", "pi", "--copy")
        result = self.cli("install", "pi")
        self.assertEqual(result.code, 1)
        self.assertIn("install pi --copy` to update it", result.stderr)

    def test_environment_overrides_move_the_directories(self):
        env = dict(self.env, PI_CODING_AGENT_DIR=str(self.home / "pi-dir"),
                   PRIME_AGENT_CODING_AGENT_DIR=str(self.home / "prime-dir"), HERMES_HOME=str(self.home / "hh"))
        for host, where in (("pi", "pi-dir/extensions"), ("prime", "prime-dir/extensions"), ("hermes", "hh/plugins")):
            with self.subTest(host=host):
                document = json.loads(self.cli("install", host, "--json", env=env).stdout)
                self.assertEqual(document["path"], str(self.home / where / "qmem"))
        hermes = json.loads(self.cli("install", "hermes", "--json", env=env).stdout)["hermes"]
        self.assertEqual(hermes["config"], str(self.home / "hh" / "config.yaml"))

    def test_hermes_install_enables_the_plugin_and_uninstall_takes_it_out(self):
        result = self.cli("install", "hermes")
        self.assertEqual(result.code, 0, result.stderr)
        config = self.home / ".hermes" / "config.yaml"
        self.assertEqual(config.read_text(), "plugins:\n  enabled:\n    - qmem\n")
        self.assertEqual(oct(config.stat().st_mode & 0o777), "0o600")
        self.assertIn("created", result.stdout)
        removed = self.cli("uninstall", "hermes")
        self.assertIn(f"removed {config} (install created it and it held nothing else)", removed.stdout)
        self.assertFalse((self.home / ".hermes").exists())  # the config, the plugins directory, ~/.hermes: all install's
        # A config that holds something else since install made it is kept, with qmem taken out.
        self.cli("install", "hermes")
        config.write_text(config.read_text() + "model:\n  default: mine\n")
        self.cli("uninstall", "hermes")
        self.assertEqual(config.read_text(), "plugins:\n  enabled: []\nmodel:\n  default: mine\n")
        self.assertFalse((self.home / ".hermes" / "plugins").exists())
        self.assertEqual(sorted(os.listdir(self.home / "")), [".hermes", ".local"])  # .local: qmem's record

    def test_uninstall_removes_only_what_install_created(self):
        (self.home / ".pi" / "agent").mkdir(parents=True)  # pi has run here: its agent directory is the user's
        self.cli("install", "pi")
        self.cli("install", "prime")
        record = json.loads((self.home / ".local" / "share" / "qmem" / "installed.json").read_text())
        self.assertEqual(record["hosts"]["pi"]["directories"], [str(self.extensions("pi"))])
        self.assertEqual(record["hosts"]["prime"]["directories"],
                         [str(self.home / ".prime"), str(self.home / ".prime" / "agent"), str(self.extensions("prime"))])
        (self.home / ".prime" / "agent" / "settings.json").write_text("{}")  # Prime ran meanwhile
        self.cli("uninstall", "pi")
        removed = self.cli("uninstall", "prime")
        self.assertIn(f"removed {self.extensions('prime')} (install created it; it was empty)", removed.stdout)
        self.assertEqual(sorted(os.listdir(self.home / ".pi" / "agent")), [])  # kept: it was there before
        self.assertEqual(sorted(os.listdir(self.home / ".prime" / "agent")), ["settings.json"])
        self.assertFalse((self.home / ".local" / "share" / "qmem" / "installed.json").exists())  # nothing left to do
        # A directory that holds something else is never removed, and a record never reaches another location.
        self.cli("install", "pi", env=dict(self.env, PI_CODING_AGENT_DIR=str(self.home / "elsewhere")))
        (self.home / "elsewhere" / "extensions" / "mine.js").write_text("// the user's own extension\n")
        self.cli("uninstall", "pi")  # the default location: nothing of the record is there
        self.cli("uninstall", "pi", env=dict(self.env, PI_CODING_AGENT_DIR=str(self.home / "elsewhere")))
        self.assertEqual(os.listdir(self.home / "elsewhere" / "extensions"), ["mine.js"])

    def test_a_hermes_config_too_odd_to_edit_gets_the_command_instead(self):
        config = self.home / "hh" / "config.yaml"
        config.parent.mkdir()
        config.write_text("plugins: {enabled: [other]}\n")
        env = dict(self.env, HERMES_HOME=str(self.home / "hh"))
        result = self.cli("install", "hermes", env=env)
        self.assertEqual(result.code, 0, result.stderr)
        self.assertIn(f"HERMES_HOME={self.home / 'hh'} hermes plugins enable qmem --no-allow-tool-override",
                      result.stdout)
        self.assertEqual(config.read_text(), "plugins: {enabled: [other]}\n")


HERMES_SHAPES = {
    "empty file": ("", ["qmem"], []),
    "comments only": ("# hermes\n", ["qmem"], []),
    "no plugins key": ("model:\n  default: x  # keep me\nagent:\n  max_turns: 5\n", ["qmem"], []),
    "no trailing newline": ("model: x", ["qmem"], []),
    "plugins null": ("plugins:\nmodel: x\n", ["qmem"], []),
    "plugins {}": ("plugins: {}\nmodel: x\n", ["qmem"], []),
    "enabled flow": ("plugins:\n  enabled: [a, 'b']\n  disabled: []\n", ["a", "b", "qmem"], []),
    "enabled block": ("plugins:\n    enabled:\n      - a\n      - \"b\"  # note\n    other: 1\n", ["a", "b", "qmem"],
                      []),
    "indentless list": ("plugins:\n  enabled:\n  - a\n  entries:\n    a: {x: 1}\n", ["a", "qmem"], []),
    "enabled null": ("plugins:\n  enabled:\n  disabled: [qmem, c]\n", ["qmem"], ["c"]),
    "disabled block": ("plugins:\n  disabled:\n    - qmem\n  enabled: [z]\n", ["z", "qmem"], []),
    "hermes writes": ("_config_version: 33\nplugins:\n  enabled:\n    - other\n  disabled: []\n  entries:\n"
                      "    other:\n      allow_tool_override: false\n\n# ── Security ──\n# security:\n", ["other", "qmem"],
                      []),
    "crlf": ("model: x\r\nplugins:\r\n  enabled: [a]\r\n", ["a", "qmem"], []),
}
UNSURE_SHAPES = {
    "flow mapping": "plugins: {enabled: [a]}\n",
    "document marker": "---\nplugins:\n  enabled: [a]\n",
    "anchor": "plugins: &p\n  enabled: [a]\n",
    "multi-line flow list": "plugins:\n  enabled: [a,\n    b]\n",
    "tabs": "plugins:\n\tenabled: [a]\n",
    "odd entries": "plugins:\n  enabled:\n    - {name: a}\n",
    "twice": "plugins:\n  enabled: [a]\nplugins:\n  enabled: [b]\n",
    "top-level list": "- a\n- b\n",
    "enabled is a string": "plugins:\n  enabled: qmem\n",
}


class HermesConfigEditTests(TempHomeTestCase):
    def write(self, text):
        path = self.home / "config.yaml"
        path.write_bytes(text.encode())
        return path

    def test_shapes_it_edits_read_back_as_intended_and_keep_everything_else(self):
        for name, (text, enabled, disabled) in HERMES_SHAPES.items():
            with self.subTest(shape=name):
                path = self.write(text)
                edit = hermesconfig.enable(path)
                self.assertEqual(edit.state, "added", edit.reason)
                after = path.read_bytes().decode()
                self.assertTrue(hermesconfig.is_enabled(path))
                self.assertEqual(hermesconfig.enable(path).state, "unchanged")
                if yaml is not None:
                    before_doc = yaml.safe_load(text) or {}
                    after_doc = yaml.safe_load(after)
                    plugins = after_doc.pop("plugins")
                    before_doc.pop("plugins", None)
                    self.assertEqual(after_doc, before_doc)  # nothing else changed
                    self.assertEqual(plugins.get("enabled"), enabled)
                    self.assertEqual(plugins.get("disabled") or [], disabled)
                for line in text.splitlines():
                    if not any(word in line for word in ("enabled", "disabled", "qmem")) and \
                            not line.startswith("plugins"):
                        self.assertIn(line, after)  # other lines byte for byte
                self.assertEqual(hermesconfig.disable(path).state, "removed")
                self.assertFalse(hermesconfig.is_enabled(path))
                if yaml is not None:
                    self.assertNotIn("qmem", yaml.safe_load(path.read_text())["plugins"].get("enabled") or [])

    def test_shapes_it_does_not_edit_are_left_alone(self):
        for name, text in UNSURE_SHAPES.items():
            with self.subTest(shape=name):
                path = self.write(text)
                edit = hermesconfig.enable(path)
                self.assertEqual(edit.state, "manual")
                self.assertTrue(edit.reason)
                self.assertEqual(path.read_bytes(), text.encode())
                self.assertIsNone(hermesconfig.is_enabled(path))

    def test_a_missing_file_is_created_private(self):
        path = self.home / "new" / "config.yaml"
        self.assertEqual(hermesconfig.enable(path).state, "created")
        self.assertEqual(oct(path.stat().st_mode & 0o777), "0o600")
        self.assertEqual(hermesconfig.disable(self.home / "absent.yaml").state, "unchanged")
        self.assertFalse((self.home / "absent.yaml").exists())


if __name__ == "__main__":
    unittest.main()
