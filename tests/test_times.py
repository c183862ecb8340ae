"""Times are compared one way: every form of RFC 3339 is stored in qmem's one form, and find,
status, meta and the tools' local answers agree on what has expired — online and offline,
and for an index written by an older qmem once it is upgraded."""

import json
import sqlite3
from datetime import datetime, timedelta, timezone

from qmem.localdb.record import Observation, stored_time
from qmem.localindex import LocalIndex
from qmem.records import canonical_time, validate_new_record
from qmem.store import qmem_meta, qmem_search

from .sessionfiles import SessionFile
from .support import GatewayTestCase, TempHomeTestCase

NOW = datetime.now(timezone.utc)
PLUS_TWO = timezone(timedelta(hours=2))
MINUS_FIVE = timezone(timedelta(hours=-5))

#: An expiry that has passed, in each form the text of a comparison could get wrong.
PASSED = {
    "lowercase": "2020-01-01t00:00:00z",  # SQLite's julianday() reads no lower-case t
    # An hour ago in UTC, written at +02:00: as text it looks an hour ahead.
    "offset": (NOW - timedelta(hours=1)).astimezone(PLUS_TWO).strftime("%Y-%m-%dt%H:%M:%S.%f+02:00"),
    "leap second": "2020-06-30T23:59:60Z",
}
#: An expiry still to come, likewise.
AHEAD = {
    "lowercase offset": (NOW + timedelta(days=1)).astimezone(MINUS_FIVE).strftime("%Y-%m-%dt%H:%M:%S-05:00"),
    # Three hours from now in UTC, written at +02:00 with nanoseconds.
    "nanoseconds": (NOW + timedelta(hours=3)).astimezone(PLUS_TWO).strftime("%Y-%m-%dT%H:%M:%S.%f123+02:00"),
    "no time at all": "when the project ends",  # kept as given, never counts as past
}
ONE_FORM = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$"


class OneFormTests(TempHomeTestCase):
    def test_every_rfc3339_form_becomes_one(self):
        self.assertEqual(canonical_time("2027-01-31t10:00:00z"), "2027-01-31T10:00:00.000000Z")
        self.assertEqual(canonical_time("2027-01-31T10:00:00.5+02:00"), "2027-01-31T08:00:00.500000Z")
        self.assertEqual(canonical_time("2027-01-31 10:00:00.123456789-00:30"), "2027-01-31T10:30:00.123456Z")
        self.assertEqual(canonical_time("0001-01-01T00:30:00+01:00"), None)  # before year 1 in UTC
        self.assertEqual(canonical_time("tomorrow"), None)
        self.assertEqual(stored_time("tomorrow"), "tomorrow")
        future = (NOW + timedelta(days=2)).astimezone(PLUS_TWO)
        record = validate_new_record({"text": "t", "project_id": "p",
                                      "expires_at": future.strftime("%Y-%m-%dt%H:%M:%S+02:00")})
        self.assertEqual(record.expires_at, future.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000000Z"))

    def test_the_index_stores_one_form_and_find_status_and_meta_agree(self):
        with LocalIndex(self.home / "qmem.sqlite") as index:
            index.learn([Observation(id=f"passed-{name}", text=f"expiring note {name}", expires_at=value,
                                     created_at=value, project_id="p", kind="fact", scope="s")
                         for name, value in PASSED.items()]
                        + [Observation(id=f"ahead-{name}", text=f"expiring note {name}", expires_at=value,
                                       project_id="p", kind="fact", scope="s")
                           for name, value in AHEAD.items()])
            for name in PASSED:
                record = index.get(f"passed-{name}")
                self.assertRegex(record.expires_at, ONE_FORM)
                self.assertEqual(record.created_at, record.expires_at)
            self.assertEqual(index.get("ahead-no time at all").expires_at, "when the project ends")
            self.assertCountEqual([r.id for r in index.find("expiring note").records],
                                  [f"ahead-{name}" for name in AHEAD])
            self.assertEqual(len(index.find("expiring note", deleted=True).records), len(PASSED) + len(AHEAD))
            self.assertEqual(index.status().hidden["expired"], len(PASSED))
            self.assertEqual(index.meta()["counts"], {"s": {"fact": len(AHEAD)}})
            # Learning the same times again in another form changes nothing.
            again = index.learn([Observation(id="passed-lowercase", expires_at="2020-01-01T02:00:00+02:00")])
            self.assertEqual(again["unchanged"], 1)


class UpgradeTests(TempHomeTestCase):
    def test_an_older_index_is_rewritten_in_one_form_by_the_upgrade(self):
        path = self.home / "qmem.sqlite"
        with LocalIndex(path) as index:
            index.learn([Observation(id=f"passed-{name}", text=f"expiring note {name}", project_id="p")
                         for name in PASSED]
                        + [Observation(id=f"ahead-{name}", text=f"expiring note {name}", project_id="p")
                           for name in AHEAD])
        # What an older qmem wrote: the times as given, and schema v3.
        conn = sqlite3.connect(path)
        with conn:
            for name, value in PASSED.items():
                conn.execute("UPDATE records SET expires_at = ?, deleted_at = ?, created_at = ? WHERE id = ?",
                             (value, None if name != "offset" else value, value, f"passed-{name}"))
            for name, value in AHEAD.items():
                conn.execute("UPDATE records SET expires_at = ? WHERE id = ?", (value, f"ahead-{name}"))
            conn.execute("PRAGMA user_version = 3")
        conn.close()
        seen = []
        with LocalIndex(path, progress=lambda done, total: seen.append((done, total))) as index:
            self.assertEqual(index.status().schema_version, 4)
            self.assertEqual((seen[0], seen[-1]), ((0, len(PASSED) + len(AHEAD)), (len(PASSED) + len(AHEAD),) * 2))
            for name in PASSED:
                record = index.get(f"passed-{name}")
                self.assertRegex(record.expires_at, ONE_FORM)
                self.assertRegex(record.created_at, ONE_FORM)
            self.assertRegex(index.get("passed-offset").deleted_at, ONE_FORM)
            self.assertEqual(index.get("ahead-no time at all").expires_at, "when the project ends")
            self.assertCountEqual([r.id for r in index.find("expiring note").records],
                                  [f"ahead-{name}" for name in AHEAD])
            self.assertEqual(index.status().hidden["expired"], len(PASSED))


class ThroughTheCommandsTests(GatewayTestCase):
    """``find``, ``status`` and the tools' local answers agree, for records learned online
    (pulled from the gateway) and offline (restored from a session file, queued by a store)."""

    def local(self, *args):
        result = self.run_module("qmem.local", *args)
        self.assertNoTraceback(result)
        self.assertEqual(result.code, 0, result.stderr)
        return json.loads(result.stdout) if "--json" in args else result.stdout

    def assertAgree(self, passed, ahead):
        found = self.local("find", "expiring", "note", "--json")
        self.assertCountEqual([r["id"] for r in found["results"]], ahead)
        everything = self.local("find", "expiring", "note", "--deleted", "--json")["results"]
        self.assertCountEqual([r["id"] for r in everything], passed + ahead)
        for record in everything:
            if record["expires_at"] != "when the project ends":
                self.assertRegex(record["expires_at"], ONE_FORM)
        self.assertEqual(self.local("status", "--json")["hidden"]["expired"], len(passed))
        self.configure(url=None)  # the tools, answering from the local index
        rt = self.runtime()
        answer = qmem_search(rt, {"query": "expiring note", "top_k": 20})
        self.assertEqual(answer.details["fallback"], "local_sqlite")
        self.assertCountEqual([r["id"] for r in answer.details["results"]], ahead)
        self.assertEqual(sum(qmem_meta(rt, {}).details["meta"]["counts"]["project"].values()), len(ahead))

    def test_online_records_pulled_from_the_gateway(self):
        ids = {}
        for group in (PASSED, AHEAD):
            for name, value in group.items():
                ids[name] = self.gateway.add_record(f"expiring note {name}", expires_at=value)["id"]
        self.assertEqual(self.local("pull", "--json")["items"], len(ids))
        self.assertAgree([ids[name] for name in PASSED], [ids[name] for name in AHEAD])

    def test_offline_records_restored_from_a_session_and_queued(self):
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        restored = {}
        for number, (name, value) in enumerate(PASSED.items()):
            restored[name] = f"local-{number:032x}"
            session.call("qmem_store", {"text": f"expiring note {name}", "project_id": "p", "scope": "project",
                                        "expires_at": value},
                         details={"qmem": 1, "queued": True, "record": {"id": restored[name]}})
        self.configure(url=None)
        self.assertEqual(self.local("import", "--json")["queued_restored"], len(PASSED))
        ahead = []
        for name, value in AHEAD.items():
            if name == "no time at all":
                continue  # a store refuses it
            stored = self.local("store", "--queue-only", "--project", "p", "--scope", "project",
                                "--text", f"expiring note {name}", "--expires-at", value, "--json")
            self.assertRegex(stored["record"]["expires_at"], ONE_FORM)
            ahead.append(stored["record"]["id"])
        self.assertAgree(list(restored.values()), ahead)
