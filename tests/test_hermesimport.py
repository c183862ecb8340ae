"""The Hermes import's pure rules: source contracts, normalization, ids, vectors, the plan id."""

from __future__ import annotations

import base64
import hashlib
import math
import struct
import sys
import unicodedata
import unittest
from array import array

from qmem.curation.canonjson import canonical_bytes
from qmem.curation.hermespoint import (
    Accepted, Rejected, Skipped, destination_payload, destination_point_id, normalize_point, parse_source_id,
)
from qmem.curation.plan import (
    ImportReport, PlanInputs, PlanManifest, compatibility_problems, endpoint_identity, manifest_document,
    validate_source_url,
)
from qmem.curation.qdrant import NON_FINITE, parse_page
from qmem.errors import InputError
from qmem.recall import is_eligible

DIM = 4
PLAN_ID = "0123456789abcdef" * 4
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"
IDENTITY_ID = "5d0f8a8e-2b7c-5e0e-9c55-3c2f3d1c6a11"  # hermes-plugin-qdrant-memory's reserved point


def decode_vector(encoded: str) -> array:
    """The float64 array an encoded vector stands for (little-endian bytes, base64), read here
    independently of the code that wrote it."""
    vector = array("d", base64.b64decode(encoded, validate=True))
    if sys.byteorder != "little":
        vector.byteswap()
    return vector


def qdrant_memory_payload(text: str = "Deploys use blue-green switching", **changes: object) -> dict:
    """A payload as hermes-plugin-qdrant-memory (schema v1) writes it, ``cloud_origin`` included."""
    normalized = " ".join(unicodedata.normalize("NFKC", text).split()) if isinstance(text, str) else ""
    digest = hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()
    payload = {
        "text": text, "user_id": "operator", "agent_id": "hermes", "source": "tool", "session_id": "sess-42",
        "category": ["ops", "deploy"], "importance": 0.7, "metadata": {"origin": "chat", "turn": 3},
        "cloud_origin": None, "created_at": "2026-01-05T10:21:07.123456Z", "updated_at": "2026-01-06T08:00:00Z",
        "content_hash": "sha256:" + digest, "schema_version": 1,
    }
    payload.update(changes)
    return payload


def mem0_payload(data: str = "Prefers small pull requests", **changes: object) -> dict:
    """A payload as mem0's self-hosted Qdrant store writes it (custom metadata flattened in)."""
    payload = {"data": data, "hash": hashlib.md5(str(data).encode()).hexdigest(),
               "created_at": "2025-01-05T10:21:07.123456-08:00", "updated_at": "2025-01-06T09:00:00-08:00",
               "user_id": "default", "agent_id": "hermes", "run_id": "run-7", "role": "user", "mood": "curious"}
    payload.update(changes)
    return payload


def vector(seed: int = 1) -> list[float]:
    return [0.1 * seed, -0.25, 0.5, 0.125 + seed / 1000]


def point(point_id: object, payload: object, vec: object = None, *, named: bool = True) -> dict:
    vec = vector() if vec is None else vec
    return {"id": point_id, "payload": payload, "vector": {"dense": vec} if named else vec}


def inputs(**changes: object) -> PlanInputs:
    values = dict(profile="qdrant-memory", target_host="pi", project=None, source_endpoint="http://127.0.0.1:6333",
                  source_collection="hermes_memories", source_dimension=DIM, source_distance="Cosine",
                  destination_collection="qmem_memories", destination_dimension=DIM, destination_distance="Cosine",
                  destination_vector_name=None, configured_model="bge-m3", declared_model="bge-m3")
    values.update(changes)
    return PlanInputs(**values)


MEM0 = inputs(profile="mem0")


class QdrantMemoryProfileTests(unittest.TestCase):
    def test_a_record_becomes_a_point_eligible_for_its_lane(self):
        for project, lane in ((None, "host"), ("shop", "project")):
            with self.subTest(project=project):
                outcome = normalize_point(point(7, qdrant_memory_payload()), inputs(project=project))
                self.assertIsInstance(outcome, Accepted)
                payload = destination_payload(outcome.payload, PLAN_ID)
                self.assertTrue(is_eligible(payload, host="pi", project="shop", lane=lane))
                self.assertFalse(is_eligible(payload, host="prime", project="shop", lane=lane))
                other_lane = "host" if lane == "project" else "project"
                self.assertFalse(is_eligible(payload, host="pi", project="shop", lane=other_lane))

    def test_the_destination_payload_is_exactly_the_mapped_allowlist(self):
        outcome = normalize_point(point(7, qdrant_memory_payload()), inputs(project="shop"))
        self.assertEqual(outcome.payload, {
            "text": "Deploys use blue-green switching", "host": "pi", "status": "active", "secret_scan": "passed",
            "project": "shop", "source_type": "hermes-qdrant-memory", "source_collection": "hermes_memories",
            "source_id": "7", "transform_version": "hermes-v1", "created_at": "2026-01-05T10:21:07.123456Z",
            "updated_at": "2026-01-06T08:00:00Z", "user_id": "operator", "agent_id": "hermes",
            "session_id": "sess-42", "source_label": "tool", "tags": ["ops", "deploy"], "importance": 0.7,
            "metadata": {"origin": "chat", "turn": 3}})
        self.assertNotIn("import_run_id", outcome.payload)  # it is the plan id, set when written
        self.assertEqual(destination_payload(outcome.payload, PLAN_ID)["import_run_id"], PLAN_ID)

    def test_fields_outside_the_allowlist_are_dropped(self):
        raw = qdrant_memory_payload(cloud_origin={"id": "c1"}, api_token="should never travel", extra=[1, 2])
        outcome = normalize_point(point(1, raw), inputs())
        self.assertIsInstance(outcome, Accepted)
        for name in ("cloud_origin", "api_token", "extra"):
            self.assertNotIn(name, outcome.source_payload)
            self.assertNotIn(name, outcome.payload)
        self.assertNotIn("should never travel", repr(outcome))

    def test_the_identity_point_is_skipped(self):
        raw = {"_qdrant_memory_schema": 1, "embedding_fingerprint": "sha256:abc"}
        outcome = normalize_point(point(IDENTITY_ID, raw), inputs())
        self.assertEqual(outcome, Skipped(IDENTITY_ID, {"_qdrant_memory_schema": 1,
                                                       "embedding_fingerprint": "sha256:abc"}))

    def test_null_agent_id_is_left_out(self):
        outcome = normalize_point(point(1, qdrant_memory_payload(agent_id=None, session_id=None)), inputs())
        self.assertIsInstance(outcome, Accepted)
        self.assertNotIn("agent_id", outcome.payload)
        self.assertNotIn("session_id", outcome.payload)
        self.assertIsNone(outcome.source_payload["agent_id"])  # covered by the plan as received

    def test_missing_created_at_falls_back_to_updated_at_else_the_record_is_rejected(self):
        payload = qdrant_memory_payload()
        del payload["created_at"]
        self.assertEqual(normalize_point(point(1, payload), inputs()).payload["created_at"], "2026-01-06T08:00:00Z")
        self.assertEqual(normalize_point(point(1, qdrant_memory_payload(created_at=None)), inputs())
                         .payload["created_at"], "2026-01-06T08:00:00Z")
        del payload["updated_at"]
        self.assertEqual(normalize_point(point(1, payload), inputs()), Rejected("1", "bad_timestamp"))
        for bad in ("2026-01-05", "2026-01-05T10:21:07", "yesterday", 1767607267, "2026-13-01T00:00:00Z"):
            with self.subTest(created_at=bad):  # present but not RFC 3339 with a zone: no fallback
                self.assertEqual(normalize_point(point(1, qdrant_memory_payload(created_at=bad)), inputs()),
                                 Rejected("1", "bad_timestamp"))

    def test_text_must_be_a_non_empty_bounded_string(self):
        cases = {"number": (123, "bad_text"), "list": (["a"], "bad_text"), "null": (None, "bad_text"),
                 "blank": ("  \n ", "bad_text"), "lone surrogate": ("a\ud800b", "bad_text"),
                 "oversize": ("x" * 20_001, "text_too_long")}
        for name, (text, reason) in cases.items():
            with self.subTest(name):
                self.assertEqual(normalize_point(point(1, qdrant_memory_payload(text)), inputs()),
                                 Rejected("1", reason))
        self.assertIsInstance(normalize_point(point(1, qdrant_memory_payload("x" * 20_000)), inputs()), Accepted)

    def test_bounded_fields_reject_the_record(self):
        cases = {
            "too many tags": {"category": [f"t{i}" for i in range(33)]},
            "long tag": {"category": ["x" * 65]},
            "tag not a string": {"category": ["ok", 3]},
            "category not a list": {"category": "ops"},
            "importance above 1": {"importance": 2},
            "importance a word": {"importance": "high"},
            "importance a boolean": {"importance": True},
            "long user id": {"user_id": "u" * 129},
            "user id with a newline": {"user_id": "a\nb"},
            "label a number": {"source": 5},
            "metadata a list": {"metadata": ["a"]},
            "metadata too large": {"metadata": {"blob": "x" * 17_000}},
            "metadata with an unsafe integer": {"metadata": {"n": 2**60}},
            "schema version 2": {"schema_version": 2},
            "schema version as text": {"schema_version": "1"},
            "schema version missing": {"schema_version": None},
        }
        for name, changes in cases.items():
            with self.subTest(name):
                self.assertEqual(normalize_point(point(1, qdrant_memory_payload(**changes)), inputs()),
                                 Rejected("1", "bad_payload"))

    def test_metadata_keeps_plain_scalars_with_tame_keys(self):
        metadata = {"kept": "yes", "n": 3, "ratio": 0.5, "flag": False, "nested": {"a": 1}, "list": [1],
                    "bad key": "x", "long": "y" * 600, "ctl": "a\x00b", **{f"k{i:02d}": i for i in range(40)}}
        outcome = normalize_point(point(1, qdrant_memory_payload(metadata=metadata)), inputs())
        self.assertEqual(list(outcome.payload["metadata"]), ["flag"] + [f"k{i:02d}" for i in range(31)])
        few = {key: metadata[key] for key in ("kept", "n", "ratio", "flag", "nested", "list", "bad key", "long", "ctl")}
        kept = normalize_point(point(1, qdrant_memory_payload(metadata=few)), inputs()).payload["metadata"]
        self.assertEqual(kept, {"flag": False, "kept": "yes", "n": 3, "ratio": 0.5})
        self.assertEqual(outcome.source_payload["metadata"], metadata)  # the plan covers it as received

    def test_a_credential_anywhere_rejects_the_record_naming_only_its_family(self):
        cases = {
            "in the text": ({"text": f"the deploy token is {GITHUB_TOKEN}"}, "secret:github-token"),
            "in a metadata value": ({"metadata": {"note": GITHUB_TOKEN}}, "secret:github-token"),
            "as a metadata assignment": ({"metadata": {"db_password": "hunter22!"}}, "secret:credential-assignment"),
            "in provenance": ({"session_id": "AKIA" + "Q3ZK7TXW2M5PLR8N"}, "secret:aws-access-key"),
            "in a tag": ({"category": ["ops", GITHUB_TOKEN]}, "secret:github-token"),
        }
        for name, (changes, reason) in cases.items():
            with self.subTest(name):
                outcome = normalize_point(point(9, qdrant_memory_payload(**changes)), inputs())
                self.assertEqual(outcome, Rejected("9", reason))
                self.assertNotIn(GITHUB_TOKEN, repr(outcome))


class Mem0ProfileTests(unittest.TestCase):
    def test_a_mem0_record_maps_data_run_id_and_zoned_timestamps(self):
        outcome = normalize_point(point("7F3C1D2E-0A4B-4C5D-8E9F-112233445566", mem0_payload(), named=False), MEM0)
        self.assertIsInstance(outcome, Accepted)
        self.assertEqual(outcome.source_id, "7f3c1d2e-0a4b-4c5d-8e9f-112233445566")
        payload = outcome.payload
        self.assertEqual(payload["text"], "Prefers small pull requests")
        self.assertEqual(payload["source_type"], "hermes-mem0")
        self.assertEqual(payload["session_id"], "run-7")
        self.assertEqual(payload["created_at"], "2025-01-05T18:21:07.123456Z")
        self.assertEqual(payload["updated_at"], "2025-01-06T17:00:00Z")
        for dropped in ("role", "mood", "hash", "data"):
            self.assertNotIn(dropped, payload)
        self.assertNotIn("mood", outcome.source_payload)
        payload = destination_payload(outcome.payload, PLAN_ID)
        self.assertTrue(is_eligible(payload, host="pi", project="x", lane="host"))

    def test_mem0_edge_cases(self):
        no_created = mem0_payload()
        del no_created["created_at"]
        cases = {
            "no created_at": (no_created, Accepted),
            "null agent": (mem0_payload(agent_id=None), Accepted),
            "text not a string": (mem0_payload(data=["x"]), Rejected),
            "secret": (mem0_payload(data=f"use {GITHUB_TOKEN}"), Rejected),
        }
        for name, (payload, kind) in cases.items():
            with self.subTest(name):
                self.assertIsInstance(normalize_point(point(3, payload, named=False), MEM0), kind)


class VectorTests(unittest.TestCase):
    def check(self, vec, profile_inputs=None, *, named=True, expected="bad_vector"):
        outcome = normalize_point(point(1, qdrant_memory_payload() if named else mem0_payload(), vec, named=named),
                                  profile_inputs or inputs())
        if expected == "accepted":
            self.assertIsInstance(outcome, Accepted)
            return outcome
        self.assertEqual(outcome, Rejected("1", expected))
        return outcome

    def test_invalid_vectors_are_rejected(self):
        parsed = parse_page(b'{"nan": [NaN, 1.0, 0.5, 0.2], "inf": [1e400, 1.0, 0.5, 0.2], '
                            b'"minus": [-Infinity, 1.0, 0.5, 0.2]}')
        cases = {"short": [0.1, 0.2, 0.3], "long": [0.1] * 5, "NaN literal": parsed["nan"],
                 "overflowing literal": parsed["inf"], "-Infinity literal": parsed["minus"],
                 "boolean": [True, 0.1, 0.2, 0.3], "string": ["0.1", 0.1, 0.2, 0.3], "null": [None, 0.1, 0.2, 0.3],
                 "nested": [[0.1], 0.1, 0.2, 0.3], "not a list": "0.1,0.2", "huge integer": [10**400, 0, 0, 1],
                 "zero under Cosine": [0, 0.0, 0, 0]}
        for name, vec in cases.items():
            with self.subTest(name):
                self.check(vec)

    def test_nan_and_infinity_literals_never_parse_as_numbers(self):
        parsed = parse_page(b'{"a": NaN, "b": Infinity, "c": [-Infinity], "d": 1.5}')
        self.assertEqual([parsed["a"], parsed["b"], parsed["c"][0]], [NON_FINITE] * 3)
        self.assertEqual(parsed["d"], 1.5)
        for changes in ({"importance": parsed["a"]}, {"metadata": {"score": parsed["b"]}}):
            with self.subTest(changes=list(changes)):
                self.assertEqual(normalize_point(point(1, qdrant_memory_payload(**changes)), inputs()),
                                 Rejected("1", "bad_payload"))

    def test_named_and_unnamed_vectors_follow_the_profile(self):
        self.check(vector(), MEM0, named=True)  # mem0 has one unnamed vector, not {"dense": …}
        self.check(vector(), inputs(), named=False)  # qdrant-memory has the named vector "dense"
        outcome = normalize_point({"id": 1, "payload": qdrant_memory_payload()}, inputs())
        self.assertEqual(outcome, Rejected("1", "bad_vector"))  # no vector at all

    def test_valid_edge_vectors_are_accepted(self):
        self.check([1, 0, 0, 0], expected="accepted")  # JSON integers are numbers
        self.check([0, 0, 0, 0], inputs(source_distance="Dot", destination_distance="Dot"), expected="accepted")
        # Finite values whose sum overflows take the slow path, and pass it.
        self.check([1.7e308, 1.7e308, 0.0, 0.0], expected="accepted")

    def test_the_encoding_is_the_exact_float64_bytes(self):
        vec = [0.1, -2.5e-310, math.nextafter(1.0, 2.0), 3]
        outcome = self.check(vec, expected="accepted")
        self.assertEqual(decode_vector(outcome.vector_b64), array("d", vec))
        self.assertEqual(outcome.vector.tolist(), [0.1, -2.5e-310, math.nextafter(1.0, 2.0), 3.0])
        import base64
        self.assertEqual(base64.b64decode(outcome.vector_b64), struct.pack("<4d", *vec))


class IdTests(unittest.TestCase):
    def test_source_ids(self):
        self.assertEqual(parse_source_id(7), ("7", (0, 7)))
        self.assertEqual(parse_source_id(2**64 - 1)[0], "18446744073709551615")
        self.assertEqual(parse_source_id("7F3C1D2E-0A4B-4C5D-8E9F-112233445566")[0],
                         "7f3c1d2e-0a4b-4c5d-8e9f-112233445566")
        for bad in (-1, 2**64, True, 1.5, None, "", "abc", "7", ["1"], "x" * 100):
            with self.subTest(bad=bad):
                self.assertIsNone(parse_source_id(bad))
                self.assertEqual(normalize_point(point(bad, qdrant_memory_payload()), inputs()),
                                 Rejected(None, "bad_id"))
        self.assertEqual(normalize_point(["not", "a", "point"], inputs()), Rejected(None, "bad_id"))

    def test_destination_ids_are_deterministic_and_distinct(self):
        first = destination_point_id("pi", "hermes_memories", "7")
        self.assertEqual(first, destination_point_id("pi", "hermes_memories", "7"))
        others = {destination_point_id("prime", "hermes_memories", "7"),
                  destination_point_id("pi", "hermes_other", "7"), destination_point_id("pi", "hermes_memories", "8")}
        self.assertEqual(len(others | {first}), 4)
        # The same source point read twice, or with another project, lands on the same destination point.
        a = normalize_point(point(7, qdrant_memory_payload()), inputs())
        b = normalize_point(point(7, qdrant_memory_payload("changed text")), inputs(project="shop"))
        self.assertEqual(a.point_id, b.point_id)
        self.assertEqual(a.point_id, first)


class ManifestTests(unittest.TestCase):
    def outcomes(self):
        return [
            normalize_point(point(IDENTITY_ID, {"_qdrant_memory_schema": 1, "embedding_fingerprint": "fp"}), inputs()),
            normalize_point(point(1, qdrant_memory_payload("città 😀 \u2028 \"quoted\" \\ \x07",
                                                          metadata={"é": "\U0001f600", "a": 1.5e-7})), inputs()),
            normalize_point(point(2, qdrant_memory_payload(f"token {GITHUB_TOKEN}")), inputs()),
            normalize_point(point(3, qdrant_memory_payload("second"), [1e21, -0.0, 5e-324, 1]), inputs()),
        ]

    def digest(self, plan_inputs, outcomes):
        manifest = PlanManifest(plan_inputs)
        for outcome in outcomes:
            manifest.add(outcome)
        return manifest.finish()

    def test_the_streamed_plan_id_is_the_sha256_of_the_rfc8785_manifest(self):
        outcomes = self.outcomes()
        self.assertEqual([type(o) for o in outcomes], [Skipped, Accepted, Rejected, Accepted])
        reference = canonical_bytes(manifest_document(inputs(), outcomes))
        self.assertEqual(self.digest(inputs(), outcomes), hashlib.sha256(reference).digest())
        self.assertEqual(self.digest(inputs(), []), hashlib.sha256(canonical_bytes(
            {"header": inputs().header(), "points": []})).digest())

    def test_the_manifest_covers_everything_it_names(self):
        outcomes = self.outcomes()
        accepted = outcomes[1]
        entry = manifest_document(inputs(), [accepted])["points"][0]
        self.assertEqual(set(entry), {"point", "source_id", "source_payload", "vector"})
        self.assertEqual(entry["point"], {"id": accepted.point_id, "payload": accepted.payload})
        self.assertEqual(set(inputs().header()), {"format", "transform_version", "target_host", "project", "profile",
                                                  "vector_encoding", "source", "destination", "model"})

    def test_any_change_changes_the_plan_id(self):
        outcomes = self.outcomes()
        base = self.digest(inputs(), outcomes)
        flipped = list(vector(1))
        flipped[3] = math.nextafter(flipped[3], 1.0)  # one bit of one number
        variants = {
            "target host": (inputs(target_host="prime"), outcomes),
            "project": (inputs(project="shop"), outcomes),
            "endpoint": (inputs(source_endpoint="http://127.0.0.1:6334"), outcomes),
            "source collection": (inputs(source_collection="other"), outcomes),
            "destination collection": (inputs(destination_collection="other"), outcomes),
            "destination vector name": (inputs(destination_vector_name="dense"), outcomes),
            "declared model": (inputs(declared_model="other"), outcomes),
            "configured model": (inputs(configured_model="other"), outcomes),
            "order": (inputs(), outcomes[::-1]),
            "one point fewer": (inputs(), outcomes[:-1]),
            "a vector bit": (inputs(), outcomes[:1] + [normalize_point(point(
                1, outcomes[1].source_payload, flipped), inputs())] + outcomes[2:]),
            "a payload value": (inputs(), outcomes[:1] + [normalize_point(point(
                1, {**outcomes[1].source_payload, "importance": 0.71}), inputs())] + outcomes[2:]),
            "a rejection reason": (inputs(), outcomes[:2] + [Rejected("2", "bad_text")] + outcomes[3:]),
        }
        digests = {name: self.digest(*args) for name, args in variants.items()}
        self.assertNotIn(base, digests.values())
        self.assertEqual(len(set(digests.values())), len(digests))

    def test_a_finished_manifest_takes_no_more_entries(self):
        manifest = PlanManifest(inputs())
        first = manifest.finish()
        self.assertEqual(manifest.finish(), first)
        with self.assertRaises(RuntimeError):
            manifest.add(Rejected(None, "bad_id"))

    def test_the_report_counts_by_reason(self):
        report = ImportReport()
        for outcome in self.outcomes():
            report.add(outcome)
        self.assertEqual(report.to_json(), {"read": 4, "accepted": 2, "skipped": {"identity": 1},
                                            "rejected": {"total": 1, "by_reason": {"secret:github-token": 1}}})


class SourceUrlTests(unittest.TestCase):
    def test_risky_urls_are_refused_without_echoing_them(self):
        cases = {
            "userinfo": "http://reader:s3cretpw@qdrant.internal:6333",
            "query": "http://qdrant.internal:6333/?api_key=abc123def",
            "fragment": "http://qdrant.internal:6333/#x",
            "control character": "http://qdrant.internal:6333/\x00",
            "space": "http://qdrant.internal:6333/a b",
            "scheme": "ftp://qdrant.internal/",
            "file": "file:///etc/passwd",
            "token in the path": f"http://qdrant.internal:6333/{GITHUB_TOKEN}",
        }
        for name, url in cases.items():
            with self.subTest(name):
                with self.assertRaises(InputError) as caught:
                    validate_source_url(url)
                self.assertIn("--source-url", caught.exception.message)
                self.assertNotIn("qdrant.internal", caught.exception.message)
        self.assertEqual(validate_source_url("https://qdrant.example:6333/base/"), "https://qdrant.example:6333/base")

    def test_endpoint_identity_is_scheme_host_port_path(self):
        self.assertEqual(endpoint_identity("HTTP://Qdrant.Example/base/"), "http://qdrant.example:80/base")
        self.assertEqual(endpoint_identity("https://qdrant.example"), "https://qdrant.example:443")
        self.assertEqual(endpoint_identity("http://[::1]:6333"), "http://[::1]:6333")


class CompatibilityTests(unittest.TestCase):
    def test_dimension_distance_and_model_must_match(self):
        self.assertEqual(compatibility_problems(inputs()), [])
        problems = compatibility_problems(inputs(source_dimension=8, source_distance="Dot", declared_model="e5"))
        self.assertEqual(len(problems), 3)
        self.assertIn("dimension is 8", problems[0])
        self.assertIn("Dot", problems[1])
        self.assertIn("'e5'", problems[2])


if __name__ == "__main__":
    unittest.main()
