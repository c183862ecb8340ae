"""``python3 -m qmem.admin`` against a fake source and a fake destination Qdrant on 127.0.0.1.

The source fake knows only a read-only key, the destination an admin (read-write) and a
runtime (read-only) key; both record every request, which is how these tests show that the
source never received a mutation and that a dry-run wrote nothing.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import urllib.request

from qmem.admin import run
from qmem.curation.create import INDEXED_FIELDS
from qmem.curation.importrun import PointSpool
from qmem.breaker import Breaker, BreakerPolicy
from qmem.curation.hermespoint import Accepted, normalize_point
from qmem.curation.plan import PlanInputs
from qmem.curation.qdrant import AdminQdrant, AdminQdrantError, SourceProjection
from qmem.localindex import LocalIndex
from qmem.recall import is_eligible

from .fakes import FakeQdrant, Fault, refused_url
from .support import REPO, TempHomeTestCase, write_config
from .test_hermesimport import GITHUB_TOKEN, IDENTITY_ID, inputs, mem0_payload, point, qdrant_memory_payload
from .test_invariants import ADMIN_MODULES

SOURCE_KEY, ADMIN_KEY, RUNTIME_KEY = "source-read-key", "admin-write-key", "runtime-read-key"
DIM = 4
HEX64 = re.compile(r"[0-9a-f]{64}")


def unit(seed: int) -> list[float]:
    raw = [1.0 + seed, 0.5, -0.25 * seed, 0.125]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


class AdminTestCase(TempHomeTestCase):
    RECALL: dict = {}

    def setUp(self) -> None:
        super().setUp()
        self.source = FakeQdrant(keys={SOURCE_KEY: "r"}).start()
        self.addCleanup(self.source.stop)
        self.destination = FakeQdrant(keys={ADMIN_KEY: "rw", RUNTIME_KEY: "r"}).start()
        self.addCleanup(self.destination.stop)
        self.env.update(QMEM_ADMIN_QDRANT_API_KEY=ADMIN_KEY, QMEM_SOURCE_QDRANT_API_KEY=SOURCE_KEY,
                        QMEM_QDRANT_API_KEY=RUNTIME_KEY)
        self.configure()
        self.progress: list[str] = []

    def configure(self, **recall: object) -> None:
        write_config(self.env, {"connectTimeoutMs": 2000, "timeoutMs": 2000, "recall": {
            "qdrantUrl": self.destination.url, "embeddingsUrl": refused_url("/v1"), "dimension": DIM,
            "timeoutMs": 2000, **self.RECALL, **recall}})

    def admin(self, *args: str, progress=None):
        return run(list(args), env=self.env, progress=progress or self.progress.append)

    def admin_json(self, *args: str, code: int = 0, progress=None) -> dict:
        outcome = self.admin(*args, "--json", progress=progress)
        self.assertEqual(outcome.code, code, outcome.error)
        return json.loads(outcome.stdout)

    def init_destination(self) -> None:
        self.assertEqual(self.admin("init").code, 0)
        self.destination.clear()

    def import_args(self, mode: str, *extra: str, collection: str = "hermes_memories") -> list[str]:
        flags = ["--dry-run"] if mode == "dry-run" else ["--approve", mode]
        return ["import-hermes", "--source-url", self.source.url, "--source-collection", collection,
                "--target-host", "pi", "--source-model", "bge-m3", *extra, *flags]

    def destination_vectors(self) -> dict:
        """The destination collection's vector configuration, as Qdrant's collection info states it."""
        request = urllib.request.Request(f"{self.destination.url}/collections/qmem_memories",
                                         headers={"api-key": ADMIN_KEY})
        with urllib.request.urlopen(request, timeout=5) as answer:
            return json.load(answer)["result"]["config"]["params"]["vectors"]

    def assertSourceUntouched(self) -> None:
        self.assertEqual(self.source.mutations(), [])


def seed_edge_cases(qdrant: FakeQdrant, collection: str = "hermes_memories") -> dict[str, int]:
    """A qdrant-memory v1 collection with every edge case; returns the expected counts by reason."""
    qdrant.create_collection(collection, size=DIM, vector_name="dense")
    no_created = qdrant_memory_payload("created only as updated")
    del no_created["created_at"]
    points = [
        (IDENTITY_ID, unit(0), {"_qdrant_memory_schema": 1, "embedding_fingerprint": "sha256:pipeline"}),
        (1, unit(1), qdrant_memory_payload("Deploys use blue-green switching")),
        ("9b2f3a4c-1d2e-4f50-8a6b-7c8d9e0f1a2b", unit(2), qdrant_memory_payload("UUID ids work too")),
        (3, unit(3), no_created),
        (4, unit(4), qdrant_memory_payload("No agent here", agent_id=None)),
        (5, unit(5), qdrant_memory_payload("Il gateway usa la porta 8443 in città")),
        (10, unit(10), qdrant_memory_payload(12345)),
        (11, unit(11), qdrant_memory_payload("OVERSIZE" + "x" * 20_000)),
        (12, unit(12), qdrant_memory_payload(f"the token is {GITHUB_TOKEN}")),
        (13, unit(13), qdrant_memory_payload("meta", metadata={"db_password": "hunter22!"})),
        (14, unit(14), qdrant_memory_payload("provenance", session_id="AKIA" + "Q3ZK7TXW2M5PLR8N")),
        (15, [float("nan"), 0.1, 0.2, 0.3], qdrant_memory_payload("NaN vector")),
        (16, [float("inf"), 0.1, 0.2, 0.3], qdrant_memory_payload("infinite vector")),
        (17, unit(17), qdrant_memory_payload("nothing dated", created_at=None, updated_at=None)),
        (18, unit(18), qdrant_memory_payload("future schema", schema_version=2)),
    ]
    qdrant.add_points(collection, [(pid, {"dense": vec}, payload) for pid, vec, payload in points])
    return {"read": len(points), "accepted": 5, "identity": 1,
            "by_reason": {"bad_text": 1, "text_too_long": 1, "secret:github-token": 1,
                          "secret:credential-assignment": 1, "secret:aws-access-key": 1, "bad_vector": 2,
                          "bad_timestamp": 1, "bad_payload": 1}}


class InitTests(AdminTestCase):
    def test_init_creates_the_collection_and_five_keyword_indexes_then_changes_nothing(self):
        created = self.admin_json("init")
        self.assertEqual(created["action"], "created")
        self.assertEqual(self.destination_vectors(), {"size": DIM, "distance": "Cosine"})
        self.assertEqual(self.destination.payload_schema("qmem_memories"), dict.fromkeys(INDEXED_FIELDS, "keyword"))
        writes = self.destination.mutations()
        self.assertEqual(len(writes), 1 + len(INDEXED_FIELDS))
        self.assertTrue(all(r.query == {"wait": "true"} for r in writes[1:]))

        self.destination.clear()
        again = self.admin("init")
        self.assertEqual(again.code, 0)
        self.assertIn("nothing changed", again.stdout)
        self.assertEqual(self.destination.mutations(), [])

    def test_a_configured_vector_name_creates_a_named_vector(self):
        self.configure(vectorName="dense", distance="Dot")
        self.assertEqual(self.admin_json("init")["action"], "created")
        self.assertEqual(self.destination_vectors(), {"dense": {"size": DIM, "distance": "Dot"}})

    def test_a_mismatched_collection_is_reported_and_left_untouched(self):
        def partial_indexes():
            self.destination.create_collection("qmem_memories", size=DIM)
            client = AdminQdrant(self.destination.url, "qmem_memories", api_key=ADMIN_KEY, connect_timeout=2,
                                 body_timeout=2)
            for field_name in INDEXED_FIELDS[:-1]:
                client.create_keyword_index(field_name)
            client.close()

        cases = {
            "dimension": (lambda: self.destination.create_collection("qmem_memories", size=8), "dimension is 8"),
            "distance": (lambda: self.destination.create_collection("qmem_memories", size=DIM, distance="Dot"),
                         "distance is Dot"),
            "vector name": (lambda: self.destination.create_collection("qmem_memories", size=DIM,
                                                                       vector_name="dense"), "named vectors"),
            "missing index": (partial_indexes, "index on 'source_type' is missing"),
        }
        for name, (make, problem) in cases.items():
            with self.subTest(name):
                self.destination.drop_collection("qmem_memories")
                make()
                self.destination.clear()
                outcome = self.admin("init")
                self.assertEqual(outcome.code, 1)
                self.assertIn(problem, outcome.error)
                self.assertIn("left untouched", outcome.error)
                self.assertEqual(self.destination.mutations(), [])
                document = self.admin_json("init", code=1)
                self.assertEqual(document["action"], "mismatch")
                self.assertTrue(any(problem in p for p in document["problems"]))

    def test_an_index_failing_during_creation_says_how_to_finish(self):
        self.destination.inject(Fault.status(500, method="PUT", path="/collections/qmem_memories/index"))
        outcome = self.admin("init")
        self.assertEqual(outcome.code, 1)
        self.assertIn("keyword index on 'host' failed", outcome.error)
        self.assertIn("create the remaining indexes", outcome.error)

    def test_a_read_only_key_cannot_init(self):
        self.env["QMEM_ADMIN_QDRANT_API_KEY"] = RUNTIME_KEY
        outcome = self.admin("init")
        self.assertEqual(outcome.code, 1)
        self.assertIn("403", outcome.error)
        self.assertIn("QMEM_ADMIN_QDRANT_API_KEY", outcome.error)
        self.assertEqual(self.destination.collection_names(), [])


class StatusTests(AdminTestCase):
    def test_status_reports_every_part_without_endpoints_paths_or_credentials(self):
        self.init_destination()
        seed_edge_cases(self.source)
        with LocalIndex(self.home / ".local" / "share" / "qmem" / "qmem.sqlite"):
            pass
        Breaker(self.home / ".local" / "share" / "qmem" / "breaker.json", self.destination.url,
                BreakerPolicy()).definitive_failure()  # the runtime's Qdrant breaker, opened

        outcome = self.admin("status", "--json", "--source-url", self.source.url,
                             "--source-collection", "hermes_memories")
        self.assertEqual(outcome.code, 0, outcome.error)
        document = json.loads(outcome.stdout)
        destination = document["destination"]
        self.assertEqual((destination["exists"], destination["dimension"], destination["distance"],
                          destination["points"], destination["key"]), (True, DIM, "Cosine", 0, "present"))
        self.assertEqual(destination["indexes"], dict.fromkeys(sorted(INDEXED_FIELDS), "keyword"))
        source = document["source"]
        self.assertEqual((source["exists"], source["vector_name"], source["points"], source["importable_as"]),
                         (True, "dense", 15, ["qdrant-memory"]))
        self.assertEqual(document["runtime"], {"recall_enabled": True, "key": "present", "healthz": True,
                                               "collection_readable": True})
        self.assertEqual(document["breakers"]["qdrant"]["state"], "open")
        self.assertEqual(document["breakers"]["embeddings"]["state"], "closed")
        self.assertIsNone(document["breakers"]["gateway"])
        self.assertEqual((document["local_index"]["exists"], document["local_index"]["records"]), (True, 0))
        self.assertTrue(document["ok"])
        for secret in (ADMIN_KEY, SOURCE_KEY, RUNTIME_KEY, "127.0.0.1", str(self.source.port),
                       str(self.destination.port), str(self.home), "Deploys"):
            self.assertNotIn(secret, outcome.stdout)
        self.assertEqual(self.destination.mutations(), [])
        self.assertSourceUntouched()

    def test_status_never_creates_the_index_and_fails_on_a_missing_destination(self):
        outcome = self.admin("status", "--json")
        self.assertEqual(outcome.code, 1)
        self.assertIn("destination missing", outcome.error)
        self.assertIn("runtime recall unhealthy", outcome.error)
        document = json.loads(outcome.stdout)
        self.assertEqual(document["destination"]["exists"], False)
        self.assertEqual(document["runtime"]["collection_readable"], False)
        self.assertEqual(document["source"], {"checked": False})
        self.assertEqual(document["local_index"], {"exists": False})
        self.assertFalse(document["ok"])
        self.assertFalse((self.home / ".local" / "share" / "qmem" / "qmem.sqlite").exists())
        self.assertEqual(self.destination.mutations(), [])

    def test_status_of_unreachable_services(self):
        self.configure(qdrantUrl=refused_url())
        document = self.admin_json("status", "--source-url", refused_url(), "--source-collection", "h", code=1)
        self.assertFalse(document["destination"]["reachable"])
        self.assertFalse(document["source"]["reachable"])
        self.assertFalse(document["runtime"]["healthz"])
        self.assertIn("refused the connection", document["destination"]["error"])
        outcome = self.admin("status")
        self.assertEqual(outcome.code, 1)
        self.assertIn("unreachable", outcome.stdout)  # the text report is printed too
        self.assertEqual(self.admin("status", "--source-url", self.source.url).code, 2)


class ImportTests(AdminTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.init_destination()
        self.expected = seed_edge_cases(self.source)

    def dry_run(self, *extra: str) -> dict:
        return self.admin_json(*self.import_args("dry-run", *extra))

    def test_a_dry_run_counts_by_reason_prints_the_plan_id_and_writes_nothing(self):
        outcome = self.admin(*self.import_args("dry-run"))
        self.assertEqual(outcome.code, 0, outcome.error)
        document = self.dry_run()
        counts = document["counts"]
        self.assertEqual((counts["read"], counts["accepted"], counts["skipped"]),
                         (self.expected["read"], self.expected["accepted"], {"identity": 1}))
        self.assertEqual(counts["rejected"]["by_reason"], self.expected["by_reason"])
        self.assertRegex(document["plan_id"], HEX64)
        self.assertEqual(document["written"], 0)
        self.assertIn(f"plan id: {document['plan_id']}", outcome.stdout)
        for leaked in (GITHUB_TOKEN, "hunter22", "AKIA" + "Q3ZK7TXW2M5PLR8N", "OVERSIZE", "Deploys", self.source.url):
            self.assertNotIn(leaked, outcome.stdout)
            self.assertNotIn(leaked, json.dumps(document))
        self.assertEqual(self.destination.mutations(), [])
        self.assertSourceUntouched()
        scroll = self.source.requests_to("/collections/hermes_memories/points/scroll")[0].json
        self.assertEqual(scroll["with_vector"], ["dense"])
        self.assertNotIn("cloud_origin", scroll["with_payload"])  # the allowlist is applied at the source too

    def test_the_same_source_plans_the_same_id(self):
        self.assertEqual(self.dry_run()["plan_id"], self.dry_run()["plan_id"])
        self.assertNotEqual(self.dry_run()["plan_id"], self.dry_run("--project", "shop")["plan_id"])

    def test_approve_writes_exactly_the_accepted_points_each_eligible_and_a_rerun_overwrites(self):
        plan_id = self.dry_run("--project", "shop")["plan_id"]
        document = self.admin_json(*self.import_args(plan_id, "--project", "shop", "--batch-size", "2"))
        self.assertEqual((document["mode"], document["written"], document["batches"]),
                         ("apply", 5, {"size": 2, "total": 3, "committed": 3}))
        self.assertEqual(self.progress[-1], "batch 3/3 committed (5/5 points)")
        stored = self.destination.points("qmem_memories")
        self.assertEqual(len(stored), 5)
        for stored_point in stored:
            payload = stored_point["payload"]
            self.assertEqual(payload["import_run_id"], plan_id)
            self.assertTrue(is_eligible(payload, host="pi", project="shop", lane="project"), payload)
        self.assertEqual({p["payload"]["text"] for p in stored},
                         {"Deploys use blue-green switching", "UUID ids work too", "created only as updated",
                          "No agent here", "Il gateway usa la porta 8443 in città"})
        self.assertTrue(all(r.query == {"wait": "true"} for r in self.destination.mutations()))
        # What was sent is the source's vectors, bit for bit.
        sent = {p["payload"]["source_id"]: p["vector"] for r in self.destination.mutations() for p in r.json["points"]}
        self.assertEqual(sent["1"], unit(1))
        self.assertEqual(sent["9b2f3a4c-1d2e-4f50-8a6b-7c8d9e0f1a2b"], unit(2))

        again = self.admin(*self.import_args(plan_id, "--project", "shop"))
        self.assertEqual(again.code, 0, again.error)
        self.assertEqual(len(self.destination.points("qmem_memories")), 5)
        self.assertSourceUntouched()

    def test_a_changed_source_is_refused_and_nothing_is_written(self):
        plan_id = self.dry_run()["plan_id"]
        original = self.source.point("hermes_memories", 1)
        nudged = list(original["vector"]["dense"])
        nudged[0] = nudged[0] + 2**-50
        changes = {
            "a text": lambda: self.source.add_point("hermes_memories", 1, original["vector"],
                                                    {**original["payload"], "text": "edited"}),
            "one vector bit": lambda: self.source.add_point("hermes_memories", 1, {"dense": nudged},
                                                            original["payload"]),
            "a new point": lambda: self.source.add_point("hermes_memories", 99, {"dense": unit(9)},
                                                         qdrant_memory_payload("new")),
        }
        for name, change in changes.items():
            with self.subTest(name):
                change()
                self.destination.clear()
                outcome = self.admin(*self.import_args(plan_id))
                self.assertEqual(outcome.code, 1)
                self.assertEqual(outcome.error, "source changed — run --dry-run again (nothing was written)")
                self.assertEqual(self.destination.mutations(), [])
                self.source.add_point("hermes_memories", 1, original["vector"], original["payload"])
                self.source.drop_collection("other")
        # Another project or host than the dry-run's is another plan, too.
        self.source.drop_collection("hermes_memories")
        seed_edge_cases(self.source)
        self.assertEqual(self.admin(*self.import_args(plan_id, "--project", "shop")).code, 1)
        self.assertSourceUntouched()

    def test_approve_writes_the_hashed_snapshot_not_a_later_read(self):
        plan_id = self.dry_run()["plan_id"]
        self.source.clear()

        def change_source_after_hashing(line: str) -> None:
            if "matches" in line:
                self.source.add_point("hermes_memories", 1, {"dense": unit(1)}, qdrant_memory_payload("changed"))

        outcome = self.admin(*self.import_args(plan_id), progress=change_source_after_hashing)
        self.assertEqual(outcome.code, 0, outcome.error)
        texts = {p["payload"]["text"] for p in self.destination.points("qmem_memories")}
        self.assertIn("Deploys use blue-green switching", texts)
        self.assertNotIn("changed", texts)
        # One read of the source: its info and one scroll page, nothing after hashing.
        self.assertEqual([r.method for r in self.source.requests], ["GET", "POST"])

    def test_a_batch_failure_midway_is_reported_and_a_rerun_converges(self):
        plan_id = self.dry_run()["plan_id"]

        def fail_second_batch(line: str) -> None:
            if line.startswith("batch 1/3 committed"):
                self.destination.inject(Fault.status(500, method="PUT", path="/collections/qmem_memories/points"))

        outcome = self.admin(*self.import_args(plan_id, "--batch-size", "2", "--json"),
                             progress=fail_second_batch)
        self.assertEqual(outcome.code, 1)
        self.assertIn("batch 2 of 3 failed", outcome.error)
        self.assertIn("batches 1-1 (2 points) were committed", outcome.error)
        self.assertNotIn("\n", outcome.error)
        document = json.loads(outcome.stdout)
        self.assertEqual((document["written"], document["batches"]), (2, {"total": 3, "committed": 1, "failed": 2}))
        self.assertEqual(len(self.destination.points("qmem_memories")), 2)

        rerun = self.admin(*self.import_args(plan_id, "--batch-size", "2"))
        self.assertEqual(rerun.code, 0, rerun.error)
        stored = self.destination.points("qmem_memories")
        self.assertEqual(len(stored), 5)
        self.assertEqual(len({p["payload"]["source_id"] for p in stored}), 5)
        self.assertSourceUntouched()

    def test_bad_arguments_are_usage_errors_before_any_request(self):
        cases = {
            "short plan id": self.import_args("ab" * 31),
            "upper-case plan id": self.import_args("AB" * 32),
            "credential in the URL": ["import-hermes", "--source-url", "http://u:pw12345@127.0.0.1:1",
                                      "--source-collection", "h", "--target-host", "pi", "--source-model", "m",
                                      "--dry-run"],
            "token in the collection": self.import_args("dry-run", collection=GITHUB_TOKEN),
            "bad project": self.import_args("dry-run", "--project", "a b"),
            "unknown host": self.import_args("dry-run")[:6] + ["hermes"] + self.import_args("dry-run")[7:],
            "both modes": self.import_args("dry-run", "--approve", "ab" * 32),
            "no model": [a for a in self.import_args("dry-run") if a not in ("--source-model", "bge-m3")],
            "batch size": self.import_args("dry-run", "--batch-size", "0"),
        }
        self.source.clear()
        for name, args in cases.items():
            with self.subTest(name):
                outcome = self.admin(*args)
                self.assertEqual(outcome.code, 2, outcome.error)
                self.assertNotIn("pw12345", outcome.error)
                self.assertNotIn(GITHUB_TOKEN, outcome.error)
        self.assertEqual(self.source.requests, [])
        self.assertEqual(self.destination.requests, [])

    def test_contract_mismatches_stop_before_any_point_is_read(self):
        self.source.create_collection("wide", size=8, vector_name="dense")
        self.source.create_collection("dot", size=DIM, distance="Dot", vector_name="dense")
        self.source.create_collection("unnamed", size=DIM)
        cases = {
            "dimension": (self.import_args("dry-run", collection="wide"), "dimension is 8"),
            "distance": (self.import_args("dry-run", collection="dot"), "distance is Dot"),
            "model": ([a if a != "bge-m3" else "nomic-embed-text" for a in self.import_args("dry-run")],
                      "'nomic-embed-text'"),
            "profile qdrant-memory on an unnamed vector": (self.import_args("dry-run", collection="unnamed"),
                                                           "--profile mem0"),
            "profile mem0 on a named vector": (self.import_args("dry-run", "--profile", "mem0"),
                                               "--profile qdrant-memory"),
            "missing source collection": (self.import_args("dry-run", collection="nope"), "does not exist"),
        }
        for name, (args, message) in cases.items():
            with self.subTest(name):
                outcome = self.admin(*args)
                self.assertEqual(outcome.code, 1)
                self.assertIn(message, outcome.error)
        self.assertEqual(self.source.requests_to("/collections", "POST"), [])
        self.destination.drop_collection("qmem_memories")
        outcome = self.admin(*self.import_args("dry-run"))
        self.assertEqual(outcome.code, 1)
        self.assertIn("run `python3 -m qmem.admin init` first", outcome.error)
        self.assertEqual(self.destination.mutations(), [])
        self.assertSourceUntouched()

    def test_a_named_destination_vector_receives_the_copied_vectors(self):
        self.destination.drop_collection("qmem_memories")
        self.configure(vectorName="memory")
        self.init_destination()
        plan_id = self.dry_run()["plan_id"]
        self.assertEqual(self.admin(*self.import_args(plan_id)).code, 0)
        stored = {p["payload"]["source_id"]: p["vector"] for p in self.destination.points("qmem_memories")}
        self.assertEqual(set(stored["1"]), {"memory"})
        self.assertEqual(len(stored), 5)

    def test_the_destination_cannot_be_its_own_source(self):
        args = self.import_args("dry-run", collection="qmem_memories")
        args[args.index(self.source.url)] = self.destination.url + "/"
        outcome = self.admin(*args)
        self.assertEqual(outcome.code, 2)
        self.assertIn("the source is the destination collection itself", outcome.error)

    def test_a_scroll_that_goes_backwards_is_refused(self):
        page = {"result": {"points": [{"id": 5, "payload": {}, "vector": {"dense": unit(1)}},
                                      {"id": 3, "payload": {}, "vector": {"dense": unit(1)}}],
                           "next_page_offset": None}, "status": "ok", "time": 0}
        self.source.inject(Fault.status(200, page, path="/collections/hermes_memories/points/scroll"))
        outcome = self.admin(*self.import_args("dry-run"))
        self.assertEqual(outcome.code, 1)
        self.assertIn("went backwards", outcome.error)

    def test_the_mem0_profile_end_to_end(self):
        self.source.create_collection("mem0", size=DIM)
        self.source.add_points("mem0", [
            (1, unit(1), mem0_payload("Prefers small pull requests")),
            ("0e039c91-9509-57b6-877a-e878e1d61d93", unit(2), mem0_payload("Uses fish shell", agent_id=None)),
            (3, unit(3), mem0_payload(f"key {GITHUB_TOKEN}")),
        ])
        args = self.import_args("dry-run", "--profile", "mem0", collection="mem0")
        document = self.admin_json(*args)
        self.assertEqual(document["counts"]["accepted"], 2)
        applied = self.admin_json(*[a if a != "--dry-run" else "--approve" for a in args] + [document["plan_id"]])
        self.assertEqual(applied["written"], 2)
        for stored in self.destination.points("qmem_memories"):
            self.assertEqual(stored["payload"]["source_type"], "hermes-mem0")
            self.assertTrue(is_eligible(stored["payload"], host="pi", project="any", lane="host"))
        self.assertSourceUntouched()


class ClientSurfaceTests(AdminTestCase):
    def test_each_client_has_only_its_operations_and_sends_nothing_else(self):
        def public(cls):
            return sorted(name for name in dir(cls) if not name.startswith("_"))

        self.assertEqual(public(SourceProjection), ["close", "collection_info", "points"])
        self.assertEqual(public(AdminQdrant), ["close", "collection_info", "create_collection",
                                               "create_keyword_index", "upsert"])
        projection = SourceProjection(self.source.url, "hermes_memories", api_key=SOURCE_KEY, connect_timeout=2,
                                      body_timeout=2)
        destination = AdminQdrant(self.destination.url, "qmem_memories", api_key=ADMIN_KEY, connect_timeout=2,
                                  body_timeout=2)
        self.addCleanup(projection.close)
        self.addCleanup(destination.close)
        channel = projection._SourceProjection__channel  # reaching past the API still meets the allowlist
        for method, path in (("PUT", "/collections/hermes_memories/points"),
                             ("POST", "/collections/hermes_memories/points/delete"),
                             ("DELETE", "/collections/hermes_memories"), ("GET", "/collections/other")):
            with self.subTest(method=method, path=path):
                with self.assertRaises(AdminQdrantError):
                    channel.send(method, path, json_body={})
        with self.assertRaises(AdminQdrantError):
            destination._AdminQdrant__channel.send("POST", "/collections/qmem_memories/points/delete", json_body={})
        self.assertEqual(self.source.requests, [])
        self.assertEqual(self.destination.requests, [])


class PointSpoolTests(AdminTestCase):
    def test_a_large_spool_is_a_private_unlinked_file_that_reads_back_exactly(self):
        plan_inputs: PlanInputs = inputs()
        accepted = [normalize_point(point(i, qdrant_memory_payload(f"memory {i} città"), unit(i)), plan_inputs)
                    for i in range(1, 8)]
        self.assertTrue(all(isinstance(a, Accepted) for a in accepted))
        with PointSpool(max_memory=64) as spool:
            for outcome in accepted:
                spool.append(outcome)
            status = os.fstat(spool.fileno())
            self.assertEqual(stat.S_IMODE(status.st_mode), 0o600)
            self.assertEqual(status.st_nlink, 0)  # no name anyone else could open
            batches = list(spool.batches(3))
        self.assertEqual([len(b) for b in batches], [3, 3, 1])
        read_back = [entry for batch in batches for entry in batch]
        self.assertEqual(read_back, [(a.point_id, a.payload, a.vector.tolist()) for a in accepted])


class CommandLineTests(AdminTestCase):
    """Real ``python3 -m qmem.admin`` subprocesses with a temporary HOME."""

    def cli(self, *args: str):
        result = self.run_module("qmem.admin", *args)
        self.assertNoTraceback(result)
        return result

    def test_exit_codes_and_one_line_errors(self):
        self.assertEqual(self.cli("--help").code, 0)
        for args, code in ((["nope"], 2), ([], 2), (["import-hermes", "--dry-run"], 2),
                           (["status", "--json"], 1), (["init", "--batch-size", "2"], 2)):
            with self.subTest(args=args):
                result = self.cli(*args)
                self.assertEqual(result.code, code)
                lines = result.stderr.splitlines()
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertTrue(lines[0].startswith("qmem-admin: "))
        self.assertFalse(json.loads(self.cli("status", "--json").stdout)["ok"])  # one document
        self.configure(qdrantUrl=refused_url())
        result = self.cli("init", "--json")
        self.assertEqual(result.code, 1)
        self.assertEqual(len(result.stderr.splitlines()), 1)
        self.assertEqual(json.loads(result.stdout)["error"]["category"], "destination")

    def test_usage_errors_under_json_and_help_everywhere(self):
        from qmem.curation.args import build_parser

        for args in (["init", "--json", "--nope"], ["import-hermes", "--json", "--dry-run"],
                     ["status", "--json", "--source-url"]):
            with self.subTest(args=args):
                result = self.cli(*args)
                self.assertEqual(result.code, 2)
                self.assertEqual(json.loads(result.stdout)["error"]["category"], "usage")
        parser = build_parser()
        [sub] = [action for action in parser._actions if hasattr(action, "_name_parser_map")]
        for name, command in sub.choices.items():
            with self.subTest(command=name):
                self.assertTrue(command.description)
                self.assertIn(f"python3 -m qmem.admin {name}", command.epilog or "")
                self.assertTrue(all(action.help for action in command._actions), name)
        from qmem import __version__

        self.assertEqual(self.cli("--version").stdout, f"qmem-admin {__version__}\n")

    def test_dry_run_then_approve_through_the_command_line(self):
        self.assertEqual(self.cli("init").code, 0)
        seed_edge_cases(self.source)
        dry = self.cli(*self.import_args("dry-run"), "--json")
        self.assertEqual(dry.code, 0, dry.stderr)
        plan_id = json.loads(dry.stdout)["plan_id"]  # exactly one document
        self.assertEqual(dry.stderr, "")
        applied = self.cli(*self.import_args(plan_id), "--json")
        self.assertEqual(applied.code, 0, applied.stderr)
        self.assertEqual(json.loads(applied.stdout)["written"], 5)
        self.assertIn("qmem-admin: batch 1/1 committed (5/5 points)", applied.stderr)
        self.assertEqual(len(self.destination.points("qmem_memories")), 5)
        self.assertSourceUntouched()


class RuntimeIsolationTests(TempHomeTestCase):
    def test_no_runtime_module_imports_the_admin_surface(self):
        script = textwrap.dedent("""
            import importlib, json, sys
            from pathlib import Path
            import qmem
            admin = set(json.loads(sys.argv[1]))
            root = Path(qmem.__file__).parent
            names = sorted(".".join(["qmem", *p.relative_to(root).with_suffix("").parts]).removesuffix(".__init__")
                           for p in root.rglob("*.py") if p.name != "__init__.py" or p.parent != root)
            for name in names:
                if name not in admin:
                    importlib.import_module(name)
            loaded = sorted(admin & set(sys.modules))
            importlib.import_module("qmem.admin")
            print(json.dumps({"runtime": [n for n in names if n not in admin], "loaded": loaded,
                              "after": sorted(admin & set(sys.modules))}))
        """)
        admin = sorted(f"qmem.{name}" for name in ADMIN_MODULES)
        proc = subprocess.run([sys.executable, "-c", script, json.dumps(admin)], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        result = json.loads(proc.stdout)
        self.assertIn("qmem.local", result["runtime"])
        self.assertEqual(result["loaded"], [])
        self.assertEqual(result["after"], admin)  # qmem.admin is the way into every one of them

    def test_every_module_named_for_the_admin_surface_is_in_the_isolation_checks(self):
        named = {"admin"} | {f"curation.{path.stem}".removesuffix(".__init__")
                             for path in (REPO / "qmem" / "curation").glob("*.py")}
        self.assertEqual(named, ADMIN_MODULES)
