"""Self-tests of the loopback HTTP fakes in tests/fakes (client side: http.client only).

Every fault is observed the way a client sees it, with socket timeouts of a few
tens of milliseconds; nothing sleeps to synchronise (``wait_for_requests`` is a
condition variable).
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import socket
import struct
import threading
import unittest
import uuid
from typing import Any, Mapping

from tests.fakes import (
    FakeEmbeddings,
    FakeGateway,
    FakeQdrant,
    FakeServer,
    Fault,
    RecordedRequest,
    Response,
    cosine,
    embed_text,
    refused_url,
)

SHORT = 0.05  # client socket timeout for hang / stall faults
WATCHDOG = 60  # the longest a test waits for what must happen (returns as soon as it has)
GW_KEY = "test-gateway-key"


class Result:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "")


def call(
    server: FakeServer,
    method: str,
    path: str,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = WATCHDOG,
) -> Result:
    """One request on a fresh connection; JSON-encodes a non-bytes body."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        data: bytes | None = None
        if body is not None:
            if isinstance(body, bytes):
                data = body
            else:
                data = json.dumps(body).encode()
                hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return Result(resp.status, resp.headers, resp.read())
    finally:
        conn.close()


class EchoServer(FakeServer):
    """Answers every request with a JSON echo of what it received."""

    fail = False

    def handle_request(self, req: RecordedRequest) -> Response:
        if self.fail:
            raise RuntimeError("boom")
        return Response.json(
            {"method": req.method, "path": req.path, "query": req.query, "json": req.json}
        )


# =====================================================================  base
class FakeServerBaseTests(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = EchoServer().start()
        self.addCleanup(self.srv.stop)

    def test_url_and_recording(self) -> None:
        self.assertRegex(self.srv.url, r"^http://127\.0\.0\.1:\d+$")
        res = call(self.srv, "POST", "/a/b%20c?x=1&y=two", {"k": [1, 2]}, {"X-Thing": "v"})
        self.assertEqual(res.status, 200)
        self.assertEqual(res.json["path"], "/a/b c")
        (req,) = self.srv.requests
        self.assertEqual(req.method, "POST")
        self.assertEqual(req.path, "/a/b c")
        self.assertEqual(req.query, {"x": "1", "y": "two"})
        self.assertEqual(req.headers["x-thing"], "v")
        self.assertEqual(req.header("Content-Type"), "application/json")
        self.assertEqual(req.json, {"k": [1, 2]})
        self.assertTrue(req.json_ok)
        self.assertEqual(req.status, 200)
        self.assertIsNone(req.fault)
        self.srv.clear()
        self.assertEqual(self.srv.requests, [])

    def test_raw_body_kept_when_not_json(self) -> None:
        call(self.srv, "PUT", "/raw", b"\x00not json", {"Content-Type": "application/octet-stream"})
        (req,) = self.srv.requests
        self.assertEqual(req.body, b"\x00not json")
        self.assertFalse(req.json_ok)
        self.assertIsNone(req.json)

    def test_keep_alive_connection_serves_several_requests(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=WATCHDOG)
        self.addCleanup(conn.close)
        for i in range(3):
            conn.request("GET", f"/n/{i}")
            resp = conn.getresponse()
            self.assertEqual(json.loads(resp.read())["path"], f"/n/{i}")
        self.assertEqual(len(self.srv.requests), 3)
        self.assertTrue(self.srv.wait_for_responses(3, timeout=WATCHDOG))

    def test_status_fault_with_retry_after_seconds_then_normal(self) -> None:
        self.srv.inject(Fault.status(503, retry_after="2"))
        res = call(self.srv, "GET", "/x")
        self.assertEqual(res.status, 503)
        self.assertEqual(res.headers["Retry-After"], "2")
        self.assertEqual(self.srv.requests[0].fault, "status")
        self.assertEqual(call(self.srv, "GET", "/x").status, 200)
        self.assertEqual(self.srv.faults, [])

    def test_status_fault_with_http_date_and_custom_body(self) -> None:
        date = "Wed, 21 Oct 2015 07:28:00 GMT"
        self.srv.inject(Fault.status(429, {"error": "slow down"}, retry_after=date))
        res = call(self.srv, "GET", "/x")
        self.assertEqual(res.status, 429)
        self.assertEqual(res.headers["Retry-After"], date)
        self.assertEqual(res.json, {"error": "slow down"})
        self.assertEqual(res.content_type, "application/json")

    def test_faults_are_fifo_and_filtered_by_path_and_method(self) -> None:
        self.srv.inject(
            Fault.status(500, path="/only"),
            Fault.status(502, method="POST"),
            Fault.status(504),
        )
        self.assertEqual(call(self.srv, "GET", "/other").status, 504)  # skips the first two
        self.assertEqual(call(self.srv, "GET", "/only/here").status, 500)
        self.assertEqual(call(self.srv, "GET", "/other").status, 200)
        self.assertEqual(call(self.srv, "POST", "/other", {}).status, 502)

    def test_times_and_unlimited_faults(self) -> None:
        self.srv.inject(Fault.status(503, times=2))
        self.assertEqual([call(self.srv, "GET", "/").status for _ in range(3)], [503, 503, 200])
        self.srv.inject(Fault.status(503, times=None))
        self.assertEqual([call(self.srv, "GET", "/").status for _ in range(3)], [503] * 3)
        self.srv.clear_faults()
        self.assertEqual(call(self.srv, "GET", "/").status, 200)

    def test_hang_fires_client_header_timeout(self) -> None:
        self.srv.inject(Fault.hang())
        with self.assertRaises(TimeoutError):
            call(self.srv, "GET", "/hang", timeout=SHORT)
        self.assertTrue(self.srv.wait_for_requests(1, timeout=WATCHDOG))
        self.assertEqual(self.srv.requests[0].fault, "hang")
        self.assertIsNone(self.srv.requests[0].status)
        # the next request on a new connection is served normally
        self.assertEqual(call(self.srv, "GET", "/after").status, 200)

    def test_stall_body_fires_client_body_timeout(self) -> None:
        self.srv.inject(Fault.stall_body())
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=WATCHDOG)
        self.addCleanup(conn.close)
        conn.connect()
        sock = conn.sock  # http.client drops conn.sock on "Connection: close"
        conn.request("GET", "/stall")
        resp = conn.getresponse()  # status line and headers arrive
        self.assertEqual(resp.status, 200)
        self.assertGreater(int(resp.headers["Content-Length"]), 0)
        sock.settimeout(SHORT)  # the body timeout
        with self.assertRaises(TimeoutError):
            resp.read()

    def test_stall_body_after_handler_truncates_the_real_answer(self) -> None:
        self.srv.inject(Fault.stall_body(when="after", sent_bytes=5))
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=WATCHDOG)
        self.addCleanup(conn.close)
        conn.connect()
        sock = conn.sock
        conn.request("GET", "/real")
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.read(5), b'{"met')
        sock.settimeout(SHORT)
        with self.assertRaises(TimeoutError):
            resp.read()

    def test_disconnect_mid_body(self) -> None:
        self.srv.inject(Fault.disconnect_mid_body(b"0123456789", sent_bytes=4))
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=WATCHDOG)
        self.addCleanup(conn.close)
        conn.request("GET", "/cut")
        resp = conn.getresponse()
        self.assertEqual(resp.headers["Content-Length"], "10")
        with self.assertRaises(http.client.IncompleteRead) as ctx:
            resp.read()
        self.assertEqual(ctx.exception.partial, b"0123")

    def test_close_without_response(self) -> None:
        self.srv.inject(Fault.close_without_response())
        with self.assertRaises(http.client.RemoteDisconnected):
            call(self.srv, "GET", "/close")

    def test_reset(self) -> None:
        self.srv.inject(Fault.reset())
        with self.assertRaises(ConnectionResetError):
            call(self.srv, "GET", "/rst")

    def test_delay_headers_until_event(self) -> None:
        gate = threading.Event()
        self.srv.inject(Fault.delay_headers(gate), Fault.delay_headers(threading.Event()))
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=WATCHDOG)
        self.addCleanup(conn.close)
        conn.request("GET", "/slow")
        self.assertTrue(self.srv.wait_for_requests(1, timeout=WATCHDOG))
        self.assertEqual(self.srv.wait_for_responses(1, timeout=0.01), False)
        gate.set()
        resp = conn.getresponse()
        self.assertEqual(json.loads(resp.read())["path"], "/slow")
        # with the event never set, the client's header timeout fires
        with self.assertRaises(TimeoutError):
            call(self.srv, "GET", "/slower", timeout=SHORT)

    def test_wait_for_requests_times_out(self) -> None:
        self.assertFalse(self.srv.wait_for_requests(1, timeout=0.02))  # returns, saying nothing came

    def test_handler_exception_becomes_500_and_is_recorded(self) -> None:
        self.srv.fail = True
        self.assertEqual(call(self.srv, "GET", "/").status, 500)
        self.assertEqual(len(self.srv.errors), 1)
        self.assertIn("boom", self.srv.errors[0])

    def test_fault_spec_validation(self) -> None:
        with self.assertRaises(ValueError):
            Fault(kind="nope")
        with self.assertRaises(ValueError):
            Fault.hang(when="during")
        with self.assertRaises(ValueError):
            Fault.status(503, times=0)


class LifecycleTests(unittest.TestCase):
    def test_refused_url(self) -> None:
        url = refused_url("/v1")
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/v1$")
        port = int(url.split(":")[2].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        with self.assertRaises(ConnectionRefusedError):
            conn.request("GET", "/v1")
        conn.close()

    def test_stop_is_quick_while_hang_and_stall_are_in_progress(self) -> None:
        srv = EchoServer().start()
        srv.stop_join_timeout = WATCHDOG  # the threads are asserted gone below: give a loaded machine time
        srv.inject(Fault.hang(), Fault.stall_body(), Fault.delay_headers(threading.Event()))
        socks = []
        for i in range(3):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=WATCHDOG)
            s.sendall(f"GET /h{i} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            socks.append(s)
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=WATCHDOG)  # keep-alive idle
        socks.append(idle)
        self.assertTrue(srv.wait_for_requests(3, timeout=WATCHDOG))
        srv.stop()  # returns at all only because it releases every hang, stall and delay at once
        for s in socks:
            # every connection ends: FIN after the (partial) answer, or RST for
            # a connection still in the listen backlog when stop() closed it
            try:
                while s.recv(65536):
                    pass
            except ConnectionResetError:
                pass
            s.close()
        self.assertEqual(
            [t for t in threading.enumerate() if t.name.startswith("EchoServer:")], []
        )
        self.assertEqual(srv.active_connections, 0)
        srv.stop()  # idempotent

    def test_context_manager_and_single_start(self) -> None:
        with EchoServer() as srv:
            self.assertEqual(call(srv, "GET", "/").status, 200)
        self.assertTrue(srv.stopped)
        with self.assertRaises(RuntimeError):
            srv.start()


# ==================================================================  gateway
class GatewayTests(unittest.TestCase):
    def setUp(self) -> None:
        self.gw = FakeGateway(api_key=GW_KEY).start()
        self.addCleanup(self.gw.stop)

    def req(
        self, method: str, path: str, body: Any = None, key: str | None = GW_KEY, **headers: str
    ) -> Result:
        hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
        if key is not None:
            hdrs["Authorization"] = f"Bearer {key}"
        return call(self.gw, method, path, body, hdrs)

    def store(self, text: str, kind: str = "fact", project: str = "p1", idem: str | None = None, **extra: Any) -> Result:
        body = {"text": text, "kind": kind, "project_id": project, "agent_id": "a1", "scope": "project", "source": "test"}
        body.update(extra)
        headers = {"Idempotency_Key": idem} if idem else {}
        return self.req("POST", "/v1/memories", body, **headers)

    def test_auth(self) -> None:
        for key in (None, "wrong"):
            res = self.req("GET", "/v1/status", key=key)
            self.assertEqual(res.status, 401)
            self.assertEqual(res.json["error"], "unauthorized")
        res = self.req("GET", "/v1/status")
        self.assertEqual(res.status, 200)
        self.assertEqual(res.json["version"], "2.12.0")

    def test_store_shape_and_idempotent_replay(self) -> None:
        res = self.store("Use tabs for Makefiles", idem="local-1")
        self.assertEqual(res.status, 201)
        rec = res.json
        uuid.UUID(rec["id"])
        for key in ("text", "kind", "project_id", "agent_id", "scope", "source", "created_at",
                    "superseded_by", "supersede_reason", "private", "deleted_at", "expires_at"):
            self.assertIn(key, rec)
        self.assertTrue(rec["created_at"].endswith("Z"))
        again = self.store("Use tabs for Makefiles", idem="local-1")
        self.assertEqual((again.status, again.json), (201, rec))
        self.assertEqual(self.gw.replays, 1)
        self.assertEqual(self.gw.count_by_text(), {"Use tabs for Makefiles": 1})
        self.assertEqual(self.gw.idempotency_keys, {"local-1": rec["id"]})

    def test_validation(self) -> None:
        self.assertEqual(self.store("x", kind="rumour").status, 422)
        self.assertEqual(self.store("   ").status, 422)
        res = self.req("POST", "/v1/memories", {"text": "t", "kind": "fact"})
        self.assertEqual(res.status, 422)
        self.assertEqual(res.json["error"], "validation_error")
        self.assertEqual(res.json["detail"][0]["loc"], ["body", "project_id"])
        self.assertEqual(self.store("x", expires_at="tomorrow").status, 422)
        self.assertEqual(self.store("x", expires_at="2030-01-01T00:00:00Z").status, 201)
        bad = self.req("POST", "/v1/memories", b"{nope", Content_Type="application/json")
        self.assertEqual((bad.status, bad.json["error"]), (400, "bad_request"))
        self.gw.reject_texts.add("forbidden text")
        self.assertEqual(self.store("forbidden text").status, 422)
        self.assertEqual(len(self.gw.records), 1)

    def test_similarity_duplicate_409(self) -> None:
        first = self.store("Deploys  run on Fridays").json
        dup = self.store("deploys run on FRIDAYS ")
        self.assertEqual(dup.status, 409)
        self.assertEqual(dup.json["error"], "duplicate")
        self.assertEqual(dup.json["id"], first["id"])
        self.assertEqual(self.store("deploys run on fridays", project="other").status, 201)
        self.gw.duplicate_of["something else"] = "forced-id"
        forced = self.store("Something   else")
        self.assertEqual((forced.status, forced.json["id"]), (409, "forced-id"))

    def test_supersede(self) -> None:
        old = self.store("The API port is 8080").json
        missing = self.store("The API port is 9090", supersedes_id=str(uuid.uuid4()))
        self.assertEqual((missing.status, missing.json["error"]), (404, "not_found"))
        new = self.store("The API port is 9090", supersedes_id=old["id"], supersede_reason="moved").json
        self.assertEqual(new["supersedes_id"], old["id"])
        got = self.req("GET", f"/v1/memories/{old['id']}").json
        self.assertEqual(got["superseded_by"], new["id"])
        self.assertEqual(got["supersede_reason"], "moved")
        # superseded text is no longer a duplicate target
        self.assertEqual(self.store("The API port is 8080").status, 201)
        hits = self.req("POST", "/v1/memories:search", {"query": "API port", "top_k": 10}).json["results"]
        self.assertNotIn(old["id"], [h["id"] for h in hits])
        hits = self.req("POST", "/v1/memories:search",
                        {"query": "API port", "top_k": 10, "include_superseded": True}).json["results"]
        by_id = {h["id"]: h for h in hits}
        self.assertEqual(by_id[old["id"]]["superseded_by"], new["id"])
        self.assertNotIn("superseded_by", by_id[new["id"]])

    def test_search_scores_filters_and_flags(self) -> None:
        a = self.gw.add_record("alpha beta gamma", "fact", "p1", scope="project")
        b = self.gw.add_record("alpha beta", "decision", "p1", scope="global")
        c = self.gw.add_record("alpha", "fact", "p2", private=True)
        d = self.gw.add_record("alpha deleted", "fact", "p1")
        self.gw.soft_delete(d["id"])
        self.gw.add_record("unrelated words", "fact", "p1")
        res = self.req("POST", "/v1/memories:search", {"query": "alpha beta", "top_k": 10})
        results = res.json["results"]
        self.assertEqual([r["id"] for r in results], [b["id"], a["id"], c["id"]])
        self.assertEqual([r["score"] for r in results], [1.0, round(2 / 3, 4), 0.5])
        self.assertEqual(
            set(results[0]), {"id", "score", "text", "kind", "project_id", "scope", "agent_id", "created_at"}
        )
        self.assertIs(results[2]["private"], True)
        q = lambda **kw: [r["id"] for r in self.req("POST", "/v1/memories:search", {"query": "alpha beta", **kw}).json["results"]]
        self.assertEqual(q(kind="decision"), [b["id"]])
        self.assertEqual(q(project_id="p2"), [c["id"]])
        self.assertEqual(q(scope="global"), [b["id"]])
        self.assertEqual(q(top_k=1), [b["id"]])
        self.assertEqual(q(min_score=0.6), [b["id"], a["id"]])
        self.gw.scores[b["id"]] = 0.1
        self.assertEqual(q(top_k=3), [a["id"], c["id"], b["id"]])
        self.assertEqual(self.req("POST", "/v1/memories:search", {"query": "x", "top_k": 0}).status, 422)
        self.assertEqual(self.req("POST", "/v1/memories:search", {"query": ""}).status, 422)

    def test_get_record(self) -> None:
        rec = self.gw.add_record("remember me", agent_id="a9")
        self.gw.set_private(rec["id"])
        got = self.req("GET", f"/v1/memories/{rec['id']}")
        self.assertEqual(got.status, 200)
        self.assertIs(got.json["private"], True)
        self.gw.soft_delete(rec["id"])
        self.assertIsNotNone(self.req("GET", f"/v1/memories/{rec['id']}").json["deleted_at"])
        missing = self.req("GET", f"/v1/memories/{uuid.uuid4()}")
        self.assertEqual((missing.status, missing.json["error"]), (404, "not_found"))

    def export(self, cursor: str | None = None, limit: int = 2) -> dict[str, Any]:
        path = f"/v1/memories:export?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        res = self.req("GET", path)
        self.assertEqual(res.status, 200, res.body)
        return res.json

    def test_export_cursor_resumes_with_new_and_changed_records(self) -> None:
        ids = [self.gw.add_record(f"record number {i}")["id"] for i in range(3)]
        page1 = self.export()
        self.assertEqual([i["id"] for i in page1["items"]], ids[:2])
        self.assertTrue(page1["has_more"])
        page2 = self.export(page1["next_cursor"])
        self.assertEqual([i["id"] for i in page2["items"]], ids[2:])
        self.assertFalse(page2["has_more"])
        head = page2["next_cursor"]
        self.assertIsNotNone(head)
        self.assertEqual(self.export(head)["items"], [])
        self.assertEqual(self.export(head)["next_cursor"], head)
        # later: a new record, a soft delete and a supersede all show up after `head`
        new = self.gw.add_record("record number 3")["id"]
        self.gw.soft_delete(ids[0])
        self.gw.supersede(ids[1], new, "newer")
        later = self.export(head, limit=10)
        self.assertEqual([i["id"] for i in later["items"]], [new, ids[0], ids[1]])
        self.assertEqual(set(later["items"][1]), {"id", "deleted_at"})
        self.assertEqual(later["items"][2]["superseded_by"], new)
        self.assertEqual(later["next_cursor"], self.gw.head_cursor())

    def test_export_errors_and_knobs(self) -> None:
        self.assertEqual(self.req("GET", "/v1/memories:export?cursor=bogus").status, 400)
        self.assertEqual(self.req("GET", "/v1/memories:export?limit=0").status, 422)
        rec = self.gw.add_record("gone soon")
        self.gw.soft_delete(rec["id"])
        self.gw.full_tombstones = True
        self.gw.null_cursor_when_exhausted = True
        page = self.export(limit=10)
        self.assertEqual(page["items"][0]["text"], "gone soon")
        self.assertIsNotNone(page["items"][0]["deleted_at"])
        self.assertIsNone(page["next_cursor"])

    def test_meta(self) -> None:
        a = self.gw.add_record("one", "fact", "p1", agent_id="a1", scope="project")
        self.gw.add_record("two", "decision", "p1", agent_id="a2", scope="project")
        self.gw.add_record("three", "fact", "p2", scope="global")
        b = self.gw.add_record("four", "fact", "p1")
        self.gw.supersede(a["id"], b["id"])
        gone = self.gw.add_record("five", "episode", "p3", agent_id="a3")
        self.gw.soft_delete(gone["id"])
        meta = self.req("GET", "/v1/meta").json
        self.assertEqual(
            meta,
            {
                "counts": {"project": {"decision": 1, "fact": 1}, "global": {"fact": 1}},
                "projects": ["p1", "p2"],
                "agents": ["a1", "a2"],
                "superseded": 1,
                "total": 3,
            },
        )

    def test_ambiguous_write_disconnect_after_store_then_retry(self) -> None:
        self.gw.inject(Fault.disconnect_mid_body(when="after", path="/v1/memories", method="POST"))
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=WATCHDOG)
        self.addCleanup(conn.close)
        body = json.dumps({"text": "landed anyway", "kind": "fact", "project_id": "p"})
        conn.request("POST", "/v1/memories", body, {
            "Authorization": f"Bearer {GW_KEY}", "Idempotency-Key": "L-7", "Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 201)
        with self.assertRaises(http.client.IncompleteRead):
            resp.read()
        self.assertEqual(self.gw.count_by_text(), {"landed anyway": 1})
        retry = self.req("POST", "/v1/memories", json.loads(body), Idempotency_Key="L-7")
        self.assertEqual(retry.status, 201)
        self.assertEqual(retry.json["id"], self.gw.idempotency_keys["L-7"])
        self.assertEqual(self.gw.count_by_text(), {"landed anyway": 1})

    def test_status_fault_after_store_and_default_error_envelope(self) -> None:
        self.gw.inject(Fault.status(503, retry_after="1", when="after"))
        res = self.store("stored behind a 503", idem="k")
        self.assertEqual(res.status, 503)
        self.assertEqual(res.json["error"], "service_unavailable")
        self.assertEqual(res.headers["Retry-After"], "1")
        self.assertEqual(self.gw.count_by_text(), {"stored behind a 503": 1})
        self.gw.inject(Fault.hang(when="after"))
        with self.assertRaises(TimeoutError):
            call(self.gw, "POST", "/v1/memories",
                 {"text": "hung after store", "kind": "fact", "project_id": "p"},
                 {"Authorization": f"Bearer {GW_KEY}"}, timeout=SHORT)
        self.assertTrue(self.gw.wait_for_requests(2, timeout=WATCHDOG))
        self.assertEqual(self.gw.count_by_text()["hung after store"], 1)


# ===================================================================  qdrant
class QdrantTests(unittest.TestCase):
    KEYS = {"admin-key": "rw", "read-key": "r"}

    def setUp(self) -> None:
        self.q = FakeQdrant(keys=self.KEYS).start()
        self.addCleanup(self.q.stop)
        self.q.create_collection("mem", 4)
        self.q.add_point("mem", 1, [1, 0, 0, 0], {"host": "pi", "status": "active", "secret_scan": "passed", "project": "a"})
        self.q.add_point("mem", 2, [0.9, 0.1, 0, 0], {"host": "pi", "status": "active ", "secret_scan": "passed", "project": "b"})
        self.q.add_point("mem", 3, [0.8, 0.2, 0, 0], {"host": "pi", "status": "active", "secret_scan": "PASSED", "project": "b"})
        self.q.add_point("mem", "6f1b6f4e-0000-4000-8000-000000000001", [0.7, 0.3, 0, 0],
                         {"host": "prime", "status": "active", "secret_scan": "passed", "project": "b", "flag": True})

    def req(self, method: str, path: str, body: Any = None, key: str | None = "read-key", bearer: bool = False) -> Result:
        headers = {}
        if key is not None:
            headers = {"Authorization": f"Bearer {key}"} if bearer else {"api-key": key}
        return call(self.q, method, path, body, headers)

    def eligible_filter(self, host: str = "pi") -> dict[str, Any]:
        return {"must": [
            {"key": "host", "match": {"value": host}},
            {"key": "status", "match": {"value": "active"}},
            {"key": "secret_scan", "match": {"value": "passed"}},
        ]}

    def test_healthz_needs_no_key(self) -> None:
        res = self.req("GET", "/healthz", key=None)
        self.assertEqual((res.status, res.body), (200, b"healthz check passed"))
        self.assertTrue(res.content_type.startswith("text/plain"))

    def test_auth_plain_text_401_and_json_403(self) -> None:
        res = self.req("GET", "/collections/mem", key=None)
        self.assertEqual(res.status, 401)
        self.assertTrue(res.content_type.startswith("text/plain"))
        self.assertEqual(res.body, b"Must provide an API key or an Authorization bearer token")
        res = self.req("GET", "/collections/mem", key="nope")
        self.assertEqual((res.status, res.body), (401, b"Invalid API key or JWT"))
        self.assertEqual(self.req("GET", "/collections/mem", key="read-key", bearer=True).status, 200)
        mutations = [
            ("PUT", "/collections/new", {"vectors": {"size": 4, "distance": "Cosine"}}),
            ("PUT", "/collections/mem/index", {"field_name": "host", "field_schema": "keyword"}),
            ("PUT", "/collections/mem/points?wait=true", {"points": [{"id": 9, "vector": [1, 0, 0, 0]}]}),
            ("POST", "/collections/mem/points/delete", {"points": [1]}),
            ("DELETE", "/collections/mem", None),
        ]
        for method, path, body in mutations:
            res = self.req(method, path, body)
            self.assertEqual(res.status, 403, path)
            self.assertEqual(res.json["status"]["error"], "Forbidden: Global manage access is required")
        self.assertEqual(len(self.q.mutations()), len(mutations))
        self.assertEqual(len(self.q.points("mem")), 4)
        # read-only POSTs are allowed for the read key and are not mutations
        self.assertEqual(self.req("POST", "/collections/mem/points/scroll", {}).status, 200)
        self.assertEqual(len(self.q.mutations()), len(mutations))

    def test_legacy_auth_style(self) -> None:
        with FakeQdrant(keys=self.KEYS, auth_style="legacy") as q:
            q.create_collection("c", 2)
            res = call(q, "PUT", "/collections/c/index", {"field_name": "x"}, {"api-key": "read-key"})
            self.assertEqual(res.status, 403)
            self.assertTrue(res.content_type.startswith("text/plain"))
            self.assertEqual(call(q, "GET", "/collections/c").status, 403)

    def test_collection_info_and_missing_collection(self) -> None:
        self.assertEqual(self.req("PUT", "/collections/mem/index", {"field_name": "host", "field_schema": "keyword"},
                                  key="admin-key").json["result"]["status"], "acknowledged")
        res = self.req("GET", "/collections/mem")
        self.assertEqual(res.status, 200)
        info = res.json
        self.assertEqual(info["status"], "ok")
        self.assertIsInstance(info["time"], float)
        result = info["result"]
        self.assertEqual(result["points_count"], 4)
        self.assertEqual(result["config"]["params"]["vectors"], {"size": 4, "distance": "Cosine"})
        self.assertEqual(result["payload_schema"], {"host": {"data_type": "keyword", "points": 4}})
        for key in ("status", "optimizer_status", "indexed_vectors_count", "segments_count"):
            self.assertIn(key, result)
        missing = self.req("GET", "/collections/nope")
        self.assertEqual(missing.status, 404)
        self.assertEqual(missing.json["status"]["error"], "Not found: Collection `nope` doesn't exist!")

    def test_create_named_collection_over_http(self) -> None:
        body = {"vectors": {"dense": {"size": 3, "distance": "Dot"}}}
        res = self.req("PUT", "/collections/named", body, key="admin-key")
        self.assertEqual((res.status, res.json["result"]), (200, True))
        self.assertEqual(self.req("PUT", "/collections/named", body, key="admin-key").status, 409)
        info = self.req("GET", "/collections/named").json["result"]
        self.assertEqual(info["config"]["params"]["vectors"], {"dense": {"size": 3, "distance": "Dot"}})
        up = self.req("PUT", "/collections/named/points?wait=true",
                      {"points": [{"id": 5, "vector": {"dense": [1, 2, 3]}, "payload": {"a": 1}}]}, key="admin-key")
        self.assertEqual(up.json["result"]["status"], "completed")
        bad_name = self.req("PUT", "/collections/named/points", {"points": [{"id": 6, "vector": {"sparse": [1, 2, 3]}}]},
                            key="admin-key")
        self.assertEqual(bad_name.status, 400)
        self.assertIn("Not existing vector name", bad_name.json["status"]["error"])
        search = self.req("POST", "/collections/named/points/search",
                          {"vector": {"name": "dense", "vector": [1, 1, 1]}, "limit": 1})
        self.assertEqual(search.json["result"][0]["score"], 6.0)
        unnamed = self.req("POST", "/collections/named/points/search", {"vector": [1, 1, 1], "limit": 1})
        self.assertEqual(unnamed.status, 400)
        query = self.req("POST", "/collections/named/points/query",
                         {"query": [1, 1, 1], "using": "dense", "limit": 1, "with_payload": True})
        self.assertEqual(query.json["result"]["points"][0]["payload"], {"a": 1})

    def test_upsert_validation_and_normalization(self) -> None:
        admin = "admin-key"
        res = self.req("PUT", "/collections/mem/points", {"points": [{"id": 7, "vector": [1, 2, 3]}]}, key=admin)
        self.assertEqual(res.status, 400)
        self.assertEqual(res.json["status"]["error"], "Wrong input: Vector dimension error: expected dim: 4, got 3")
        res = self.req("PUT", "/collections/mem/points", {"points": [{"id": -1, "vector": [1, 0, 0, 0]}]}, key=admin)
        self.assertEqual(res.status, 400)
        upper = "6F1B6F4E-0000-4000-8000-0000000000AA"
        res = self.req("PUT", "/collections/mem/points?wait=true",
                       {"points": [{"id": upper, "vector": [3, 4, 0, 0], "payload": {"k": "v"}}]}, key=admin)
        self.assertEqual(res.status, 200)
        stored = self.q.point("mem", upper.lower())
        self.assertEqual(stored["id"], upper.lower())
        self.assertEqual(stored["vector"], [0.6, 0.8, 0.0, 0.0])
        no_ctype = call(self.q, "POST", "/collections/mem/points/scroll", b"{}", {"api-key": "read-key"})
        self.assertEqual((no_ctype.status, no_ctype.json["status"]["error"]), (400, "Content type error"))

    def test_search_filter_exact_and_type_sensitive(self) -> None:
        res = self.req("POST", "/collections/mem/points/search",
                       {"vector": [1, 0, 0, 0], "limit": 10, "filter": self.eligible_filter(),
                        "with_payload": True, "with_vector": False})
        self.assertEqual(res.status, 200)
        hits = res.json["result"]
        self.assertEqual([h["id"] for h in hits], [1])  # "active " and "PASSED" don't match
        self.assertEqual(set(hits[0]), {"id", "version", "score", "payload"})
        self.assertAlmostEqual(hits[0]["score"], 1.0)
        flt = {"must": [{"key": "flag", "match": {"value": 1}}]}
        self.assertEqual(self.req("POST", "/collections/mem/points/search",
                                  {"vector": [1, 0, 0, 0], "limit": 10, "filter": flt}).json["result"], [])
        flt = {"must": [{"key": "flag", "match": {"value": True}}]}
        self.assertEqual(len(self.req("POST", "/collections/mem/points/search",
                                      {"vector": [1, 0, 0, 0], "limit": 10, "filter": flt}).json["result"]), 1)
        host_lane = {"must": [{"key": "host", "match": {"value": "pi"}}],
                     "must_not": [{"key": "project", "match": {"value": "a"}}]}
        ids = [h["id"] for h in self.req("POST", "/collections/mem/points/search",
                                         {"vector": [1, 0, 0, 0], "limit": 10, "filter": host_lane}).json["result"]]
        self.assertEqual(ids, [2, 3])
        should = {"should": [{"key": "project", "match": {"value": "a"}}, {"key": "host", "match": {"value": "prime"}}]}
        ids = [h["id"] for h in self.req("POST", "/collections/mem/points/search",
                                         {"vector": [1, 0, 0, 0], "limit": 10, "filter": should}).json["result"]]
        self.assertEqual(ids, [1, "6f1b6f4e-0000-4000-8000-000000000001"])
        # without with_payload there is no payload key; score_threshold cuts
        res = self.req("POST", "/collections/mem/points/search",
                       {"vector": [1, 0, 0, 0], "limit": 10, "score_threshold": 0.999, "with_vector": True})
        (only,) = res.json["result"]
        self.assertNotIn("payload", only)
        self.assertEqual(only["vector"], [1, 0, 0, 0])

    def test_ignore_filter_leaks(self) -> None:
        self.q.ignore_filter = True
        res = self.req("POST", "/collections/mem/points/search",
                       {"vector": [1, 0, 0, 0], "limit": 10, "filter": self.eligible_filter()})
        self.assertEqual(len(res.json["result"]), 4)
        self.assertEqual(self.q.requests[-1].json["filter"], self.eligible_filter())

    def test_search_validation_errors(self) -> None:
        base = {"vector": [1, 0, 0, 0], "limit": 3}
        cases = [
            ({**base, "limit": 0}, 422, "Validation error in JSON body"),
            ({"vector": [1, 0, 0, 0]}, 400, "missing field `limit`"),
            ({**base, "with_vector": "yes"}, 400, "Format error in JSON body"),
            ({**base, "vector": [1, 0]}, 400, "Vector dimension error: expected dim: 4, got 2"),
            ({**base, "vector": {"name": "dense", "vector": [1, 0, 0, 0]}}, 400, "Not existing vector name error: dense"),
            ({**base, "filter": {"must": [{"key": "host"}]}}, 400, "Expected some form of condition"),
        ]
        for body, status, message in cases:
            res = self.req("POST", "/collections/mem/points/search", body)
            self.assertEqual(res.status, status, body)
            self.assertIn(message, res.json["status"]["error"])
        malformed = self.req("POST", "/collections/mem/points/search", b"{", key="read-key")
        self.assertEqual(malformed.status, 400)

    def test_query_endpoint_shape(self) -> None:
        res = self.req("POST", "/collections/mem/points/query",
                       {"query": [0, 1, 0, 0], "limit": 2, "with_payload": ["host"], "filter": {"must": [{"key": "project", "match": {"value": "b"}}]}})
        points = res.json["result"]["points"]
        self.assertEqual([p["id"] for p in points], ["6f1b6f4e-0000-4000-8000-000000000001", 3])
        self.assertEqual(points[0]["payload"], {"host": "prime"})
        nearest = self.req("POST", "/collections/mem/points/query", {"query": {"nearest": [1, 0, 0, 0]}, "limit": 1})
        self.assertEqual(nearest.json["result"]["points"][0]["id"], 1)

    def test_scroll_order_pagination_and_count(self) -> None:
        self.q.add_point("mem", 10, [0, 0, 1, 0], {"host": "pi"})
        self.q.add_point("mem", "00000000-0000-4000-8000-000000000000", [0, 0, 0, 1], {})
        seen: list[Any] = []
        offset = None
        while True:
            body: dict[str, Any] = {"limit": 2}
            if offset is not None:
                body["offset"] = offset
            result = self.req("POST", "/collections/mem/points/scroll", body).json["result"]
            for p in result["points"]:
                self.assertIn("payload", p)  # scroll's default with_payload is true
                self.assertNotIn("vector", p)
            seen += [p["id"] for p in result["points"]]
            offset = result["next_page_offset"]
            if offset is None:
                break
        self.assertEqual(seen, [1, 2, 3, 10, "00000000-0000-4000-8000-000000000000",
                                "6f1b6f4e-0000-4000-8000-000000000001"])
        filtered = self.req("POST", "/collections/mem/points/scroll",
                            {"limit": 10, "filter": {"must": [{"key": "host", "match": {"any": ["prime"]}}]},
                             "with_payload": False, "with_vector": True}).json["result"]
        self.assertEqual(filtered["points"], [{"id": "6f1b6f4e-0000-4000-8000-000000000001", "vector": [0.7, 0.3, 0, 0]}])
        self.assertIsNone(filtered["next_page_offset"])
        count = self.req("POST", "/collections/mem/points/count", {"filter": self.eligible_filter()})
        self.assertEqual(count.json["result"], {"count": 1})

    def test_admin_upsert_delete_and_recorded_mutations(self) -> None:
        self.q.create_collection("dest", 4, vector_name="dense")
        admin = "admin-key"
        self.req("PUT", "/collections/dest/index", {"field_name": "status", "field_schema": {"type": "keyword"}}, key=admin)
        up = self.req("PUT", "/collections/dest/points?wait=true",
                      {"points": [{"id": i, "vector": {"dense": [1, 0, 0, i]}, "payload": {"status": "active"}}
                                  for i in range(3)]}, key=admin)
        self.assertEqual(up.json["result"]["status"], "completed")
        self.req("POST", "/collections/dest/points/delete?wait=true", {"points": [0]}, key=admin)
        self.req("POST", "/collections/dest/points/delete?wait=true",
                 {"filter": {"must": [{"key": "status", "match": {"value": "active"}}]}}, key=admin)
        self.assertEqual(self.q.points("dest"), [])
        self.assertEqual(self.q.payload_schema("dest"), {"status": "keyword"})
        self.assertEqual([r.path for r in self.q.mutations()],
                         ["/collections/dest/index", "/collections/dest/points",
                          "/collections/dest/points/delete", "/collections/dest/points/delete"])

    def test_large_collection_scroll_is_fast_enough(self) -> None:
        pool = [embed_text(f"pool {i}", 64) for i in range(8)]
        self.q.create_collection("big", 64)
        self.q.add_points("big", ((i, pool[i % 8], {"n": i}) for i in range(20_000)))
        total, offset = 0, None
        while True:
            body: dict[str, Any] = {"limit": 1000, "with_vector": True}
            if offset is not None:
                body["offset"] = offset
            result = self.req("POST", "/collections/big/points/scroll", body).json["result"]
            total += len(result["points"])
            offset = result["next_page_offset"]
            if offset is None:
                break
        self.assertEqual(total, 20_000)


# ===============================================================  embeddings
class EmbeddingsTests(unittest.TestCase):
    def setUp(self) -> None:
        self.e = FakeEmbeddings(api_key="emb-key", models={"bge-m3": 16, "small": 8}).start()
        self.addCleanup(self.e.stop)

    def post(self, body: Any, key: str | None = "emb-key", path: str = "/v1/embeddings") -> Result:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return call(self.e, "POST", path, body, headers)

    def test_embed_text_is_deterministic_unit_and_similarity_aware(self) -> None:
        v = embed_text("Deploy the API on Fridays", 64)
        self.assertEqual(v, embed_text("Deploy the API on Fridays", 64))
        self.assertAlmostEqual(math.sqrt(sum(x * x for x in v)), 1.0)
        near = embed_text("deploy the api on mondays", 64)
        far = embed_text("bananas are yellow", 64)
        self.assertGreater(cosine(v, near), cosine(v, far))
        self.assertEqual(len(embed_text("!!!", 8)), 8)
        self.assertAlmostEqual(math.sqrt(sum(x * x for x in embed_text("!!!", 8))), 1.0)

    def test_response_shape_string_and_list(self) -> None:
        res = self.post({"model": "bge-m3", "input": "hello world"})
        self.assertEqual(res.status, 200)
        body = res.json
        self.assertEqual(body["object"], "list")
        self.assertEqual(body["model"], "bge-m3")
        self.assertEqual(body["usage"], {"prompt_tokens": 2, "total_tokens": 2})
        (item,) = body["data"]
        self.assertEqual((item["object"], item["index"]), ("embedding", 0))
        self.assertEqual(item["embedding"], embed_text("hello world", 16))
        res = self.post({"model": "small", "input": ["a b", "c"], "encoding_format": "float"})
        self.assertEqual([d["index"] for d in res.json["data"]], [0, 1])
        self.assertEqual(len(res.json["data"][1]["embedding"]), 8)
        self.assertEqual(self.e.inputs, ["hello world", "a b", "c"])

    def test_base64_and_dimensions(self) -> None:
        res = self.post({"model": "bge-m3", "input": "x y", "encoding_format": "base64"})
        raw = base64.b64decode(res.json["data"][0]["embedding"])
        floats = struct.unpack("<16f", raw)
        for got, want in zip(floats, embed_text("x y", 16)):
            self.assertAlmostEqual(got, want, places=6)
        res = self.post({"model": "bge-m3", "input": "x y", "dimensions": 4})
        self.assertEqual(len(res.json["data"][0]["embedding"]), 4)
        self.assertEqual(self.post({"model": "bge-m3", "input": "x", "dimensions": 99}).status, 400)

    def test_errors_use_openai_envelope(self) -> None:
        for key in (None, "bad"):
            res = self.post({"model": "bge-m3", "input": "x"}, key=key)
            self.assertEqual(res.status, 401)
            self.assertEqual(set(res.json["error"]), {"message", "type", "param", "code"})
        res = self.post({"model": "nope", "input": "x"})
        self.assertEqual((res.status, res.json["error"]["code"]), (404, "model_not_found"))
        for bad in ({"model": "bge-m3"}, {"model": "bge-m3", "input": ""}, {"model": "bge-m3", "input": [1, 2]},
                    {"model": "bge-m3", "input": "x", "encoding_format": "int8"}):
            self.assertEqual(self.post(bad).status, 400, bad)
        self.assertEqual(self.post(b"{", key="emb-key").status, 400)
        self.assertEqual(self.e.base_url, self.e.url + "/v1")

    def test_knobs_and_faults(self) -> None:
        self.e.response_dimension = 3
        self.assertEqual(len(self.post({"model": "bge-m3", "input": "x"}).json["data"][0]["embedding"]), 3)
        self.e.response_dimension = None
        self.e.reverse_order = True
        self.assertEqual([d["index"] for d in self.post({"model": "bge-m3", "input": ["a", "b"]}).json["data"]], [1, 0])
        self.e.reverse_order = False
        self.e.overrides["fixed"] = [0.5] * 16
        self.assertEqual(self.post({"model": "bge-m3", "input": "fixed"}).json["data"][0]["embedding"], [0.5] * 16)
        self.e.inject(Fault.status(429, retry_after="3"))
        res = self.post({"model": "bge-m3", "input": "x"})
        self.assertEqual((res.status, res.headers["Retry-After"]), (429, "3"))
        self.assertEqual(res.json["error"]["type"], "rate_limit_error")
        self.e.inject(Fault.hang(path="/v1/embeddings"))
        with self.assertRaises(TimeoutError):
            call(self.e, "POST", "/v1/embeddings", {"model": "bge-m3", "input": "x"},
                 {"Authorization": "Bearer emb-key"}, timeout=SHORT)


if __name__ == "__main__":
    unittest.main()
