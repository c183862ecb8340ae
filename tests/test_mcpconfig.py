"""``mcp-config``: what each printed entry names (credentials by name, QMEM_HOST) and its entry form.

Launching every flavour from a project directory is ``tests/test_shadowing.py``; this checks the text.
"""

import json
import sys
import tomllib

from .support import REPO, TempHomeTestCase, write_config

RECALL = {"qdrantUrl": "http://127.0.0.1:9", "embeddingsUrl": "http://127.0.0.1:9/v1"}
SECRETS = {"QMEM_GATEWAY_API_KEY": "gw-secret-value", "QMEM_QDRANT_API_KEY": "qd-secret-value"}


class McpConfigTests(TempHomeTestCase):
    def printed(self, client, env=None):
        result = self.run_module("qmem.local", "mcp-config", client, env=env or dict(self.env, **SECRETS))
        self.assertEqual(result.code, 0, result.stderr)
        for value in SECRETS.values():
            self.assertNotIn(value, result.stdout)
        return result.stdout

    def test_without_recall_only_the_gateway_key(self):
        entry = json.loads(self.printed("json"))["mcpServers"]["qmem"]
        self.assertEqual(entry["env"], {"PYTHONPATH": str(REPO), "QMEM_GATEWAY_API_KEY": "<your QMEM_GATEWAY_API_KEY>"})
        self.assertEqual(entry["command"], sys.executable)
        self.assertEqual(entry["args"], ["-P", "-m", "qmem.mcp"] if sys.version_info >= (3, 11) else
                         ["-c", "import sys; sys.path[:] = [p for p in sys.path if p]; from qmem.mcp import main; "
                                "sys.exit(main())"])
        self.assertNotIn("QMEM_HOST", self.printed("claude") + self.printed("codex") + self.printed("hermes"))

    def test_with_recall_every_credential_by_name_and_the_host(self):
        write_config(self.env, {"recall": RECALL})
        entry = json.loads(self.printed("json"))["mcpServers"]["qmem"]
        self.assertEqual(entry["env"], {
            "PYTHONPATH": str(REPO), "QMEM_HOST": "pi", "QMEM_GATEWAY_API_KEY": "<your QMEM_GATEWAY_API_KEY>",
            "QMEM_QDRANT_API_KEY": "<your QMEM_QDRANT_API_KEY>", "QMEM_EMBEDDING_API_KEY": "<your QMEM_EMBEDDING_API_KEY>"})
        claude = self.printed("claude")
        for name in ("QMEM_GATEWAY_API_KEY", "QMEM_QDRANT_API_KEY", "QMEM_EMBEDDING_API_KEY"):
            self.assertIn(f'-e {name}="${name}"', claude)
        self.assertIn("-e QMEM_HOST=pi", claude)
        self.assertIn("# QMEM_HOST=pi (the config names no recall.host)", claude)
        codex = tomllib.loads(self.printed("codex"))["mcp_servers"]["qmem"]
        self.assertEqual(codex["env_vars"], ["QMEM_GATEWAY_API_KEY", "QMEM_QDRANT_API_KEY", "QMEM_EMBEDDING_API_KEY"])
        self.assertEqual(codex["env"], {"PYTHONPATH": str(REPO), "QMEM_HOST": "pi"})
        hermes = self.printed("hermes")
        self.assertIn('QMEM_EMBEDDING_API_KEY: "${QMEM_EMBEDDING_API_KEY}"', hermes)
        self.assertIn('QMEM_HOST: "pi"', hermes)

    def test_the_configured_lane_and_prime(self):
        write_config(self.env, {"recall": {**RECALL, "host": "prime"}})
        self.assertIn('"QMEM_HOST": "prime"', self.printed("json"))
        self.assertIn("as recall.host in your config says", self.printed("claude"))
        write_config(self.env, {"recall": RECALL})
        prime = self.printed("prime")  # the gateway and Qdrant keys are set here, the embeddings key is not
        line = prime.splitlines()[-1]
        self.assertTrue(line.startswith("prime-agent mcp add qmem --env QMEM_GATEWAY_API_KEY=QMEM_GATEWAY_API_KEY "
                                        "--env QMEM_QDRANT_API_KEY=QMEM_QDRANT_API_KEY -- "), line)
        self.assertIn("os.environ.setdefault(\"QMEM_HOST\", \"prime\")", line)  # Prime's own lane
        self.assertIn(f'sys.path.insert(0, "{REPO}")', line)
        self.assertIn("# QMEM_EMBEDDING_API_KEY is not set here: export it and add --env "
                      "QMEM_EMBEDDING_API_KEY=QMEM_EMBEDDING_API_KEY", prime)
