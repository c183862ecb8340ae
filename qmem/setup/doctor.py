"""``python3 -m qmem.local doctor``: is this qmem set up right?  One report, every part.

Promises:

* **What it checks**: the Python and SQLite (FTS5); the config file in effect (or why it
  cannot be read — a missing ``$QMEM_CONFIG`` file is reported, not fatal) and where each
  setting comes from (default, file, environment); the data paths and the session
  directories ``import`` reads; which credentials are set (never a value), with a warning
  when a gateway URL is set without ``QMEM_GATEWAY_API_KEY``; a live ``GET /v1/status`` of
  the Memory Gateway (reachable, version, key accepted); when recall is on, Qdrant's health,
  the collection readable with the runtime key and matching ``recall.dimension`` /
  ``recall.distance``, and one embeddings call with its dimension; the circuit breakers with
  the time left; the local index (schema, counts, ``PRAGMA quick_check``) when it exists —
  it is never created; and which hosts (pi, Prime, Hermes) have qmem installed, with the
  version there, whether the host can load and has enabled it, and as which host it would
  run (:mod:`qmem.setup.hostcheck`); and whether Claude Code or Codex has the plugin ``qmem@qmem``
  installed and its MCP server would start from the host's copy (:mod:`qmem.setup.plugincheck`).
* **It changes nothing.**  The probes go around the shared circuit breakers (a doctor run is
  an explicit question, asked even while a breaker is open) and do not report to them: the
  breakers are shown as they are, with a hint when a service answers although its breaker
  is still open.  Each probe is bounded by the service's configured timeouts, no retries;
  the three services are probed at the same time.
* **Problems vs warnings**: anything configured that does not work is a problem (the CLI
  exits 1); things worth knowing that do not break anything are warnings (exit 0), among
  them what :mod:`qmem.secretscan.audit` finds: a config value that looks like a credential
  (named by field and family), such a config file readable by group or others, and the admin
  key reused for the runtime or the source.
* It is one of the commands that exist to show the setup, so it shows endpoints and paths;
  never a credential, a request or response body, a query or memory text.  Any string of the
  report that the credential scanner flags — a token pasted as ``recall.collection``, say —
  is shown as ``[redacted: <family>]``.  The embeddings probe sends a fixed sentence, nothing
  of the user's.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import __version__
from .. import config as config_mod
from ..breaker import Breaker, BreakerPolicy
from ..clients.embeddings import EmbeddingError, EmbeddingsClient
from ..clients.gateway import GatewayClient, GatewayRefused, GatewayUnauthorized, GatewayUnavailable
from ..clients.qdrant import QdrantError, ReadOnlyQdrant
from ..config import Config
from ..errors import ConfigError, QmemError
from ..localdb.sessionimport import session_roots
from ..localindex import LocalIndex
from ..secretscan.audit import audit, hide_flagged
from . import install
from ..valueclass import dataclass, field
from .hostcheck import check_hosts, host_words
from .plugincheck import LABELS, check_plugins, plugin_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["diagnose", "render"]

#: What the embeddings probe sends: a fixed sentence, never the user's text.
EMBEDDING_PROBE_TEXT = "qmem doctor: a probe of the embeddings service"
_RUNTIME_ROLES = ("gateway", "qdrant", "embedding")


@dataclass
class Diagnosis:
    document: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# --- the parts ------------------------------------------------------------------------------

def _python() -> dict[str, Any]:
    try:
        probe = sqlite3.connect(":memory:")
        try:
            probe.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
            fts5 = True
        except sqlite3.Error:
            fts5 = False
        finally:
            probe.close()
    except sqlite3.Error:
        fts5 = False
    return {"version": platform.python_version(), "executable": sys.executable, "sqlite": sqlite3.sqlite_version,
            "fts5": fts5}


def _config(env: Mapping[str, str]) -> tuple[dict[str, Any], Config]:
    path = config_mod.config_path(env)
    origin = ("QMEM_CONFIG" if (env.get("QMEM_CONFIG") or "").strip()
              else "XDG_CONFIG_HOME" if (env.get("XDG_CONFIG_HOME") or "").strip() else "default location")
    report: dict[str, Any] = {"file": str(path), "chosen_by": origin, "exists": path.is_file(), "error": None,
                              "settings": {}}
    try:
        config = config_mod.load_config(env)
        sources = config_mod.setting_sources(env)
    except ConfigError as exc:
        report["error"] = exc.message
        return report, Config()
    document = config_mod.to_document(config)
    values = {key: value for key, value in document.items() if key != "recall"}
    values.update({f"recall.{key}": value for key, value in document["recall"].items()})
    report["settings"] = {key: {"value": value, "source": sources.get(key, "default")} for key, value in values.items()}
    return report, config


def _paths(env: Mapping[str, str], config: Config) -> dict[str, Any]:
    paths = config_mod.resolve_paths(config, env)
    roots = [{"label": root.label, "host": root.host, "directory": str(root.root),
              "reads": root.directories(), "exists": root.found()} for root in session_roots(env)]
    return {"data_dir": str(paths.data_dir), "index": str(paths.database), "breaker_file": str(paths.breaker_file),
            "sessions": roots}


def _credentials(env: Mapping[str, str]) -> dict[str, Any]:
    out = {}
    for role, names in config_mod.CREDENTIAL_VARIABLES.items():
        via = next((name for name in names if (env.get(name) or "").strip()), None)
        out[role] = {"variable": names[0], "set": via is not None, "via": via}
    return out


def _breaker_state(env: Mapping[str, str], config: Config, url: str) -> dict[str, Any]:
    policy = BreakerPolicy(base_ms=config.breaker_base_ms, max_ms=config.breaker_max_ms,
                           trip_after=config.breaker_trip_after)
    snapshot = Breaker(config_mod.resolve_paths(config, env).breaker_file, url, policy).snapshot()
    return {key: snapshot[key] for key in ("state", "retry_in_ms", "consecutive_failures", "consecutive_opens")}


def _probe_gateway(env: Mapping[str, str], config: Config, scratch: Path) -> dict[str, Any]:
    assert config.url is not None
    key = config_mod.credential("gateway", env)
    # A private breaker in a scratch directory: the probe neither waits for nor reports to the shared one.
    client = GatewayClient(config.url, key, breaker=Breaker(scratch / "gateway-breaker.json", config.url,
                                                            BreakerPolicy()),
                           connect_timeout=config.connect_timeout_ms / 1000, timeout=config.timeout_ms / 1000,
                           retries=0)
    report: dict[str, Any] = {"reachable": False, "version": None, "key": "not set" if key is None else "unknown",
                              "error": None}
    try:
        status = client.status()
    except GatewayUnauthorized as exc:
        if key is None:
            report.update(reachable=True, key="missing",
                          error="the Memory Gateway wants an API key: export QMEM_GATEWAY_API_KEY")
        else:
            report.update(reachable=True, key="refused", error=exc.message)
    except GatewayRefused as exc:
        report.update(reachable=True, error=exc.message)
    except GatewayUnavailable as exc:
        report.update(error=exc.message, reason=exc.kind)
    else:
        version = status.get("version") if isinstance(status, dict) else None
        report.update(reachable=True, version=version if isinstance(version, str) else None,
                      key="accepted" if key is not None else "not needed")
    finally:
        client.close()
    return report


def _probe_qdrant(env: Mapping[str, str], config: Config) -> dict[str, Any]:
    recall = config.recall
    assert recall.qdrant_url is not None
    client = ReadOnlyQdrant(recall.qdrant_url, recall.collection, api_key=config_mod.credential("qdrant", env),
                            search_endpoint=recall.search_endpoint, timeout_s=recall.timeout_ms / 1000)
    report: dict[str, Any] = {"healthy": False, "collection": recall.collection, "readable": False,
                              "dimension": None, "distance": None, "matches": False, "error": None}
    try:
        report["healthy"] = client.health()
        info = client.collection_info(recall.vector_name)
        report.update(readable=True, dimension=info.dimension, distance=info.distance, vector_name=info.vector_name,
                      points=info.points_count)
        mismatch = []
        if info.dimension != recall.dimension:
            mismatch.append(f"dimension {info.dimension}, the config says {recall.dimension}")
        if info.distance != recall.distance:
            mismatch.append(f"distance {info.distance}, the config says {recall.distance}")
        report["matches"] = not mismatch
        if mismatch:
            report["error"] = f"the collection has {' and '.join(mismatch)}"
    except QdrantError as exc:
        report["error"] = exc.message
    finally:
        client.close()
    return report


def _probe_embeddings(env: Mapping[str, str], config: Config) -> dict[str, Any]:
    recall = config.recall
    assert recall.embeddings_url is not None
    client = EmbeddingsClient(recall.embeddings_url, recall.embedding_model,
                              api_key=config_mod.credential("embedding", env), timeout_s=recall.timeout_ms / 1000)
    report: dict[str, Any] = {"ok": False, "model": recall.embedding_model, "dimension": None, "matches": False,
                              "error": None}
    try:
        vector = client.embed(EMBEDDING_PROBE_TEXT)
        report.update(ok=True, dimension=len(vector), matches=len(vector) == recall.dimension)
        if len(vector) != recall.dimension:
            report["error"] = (f"the embeddings have dimension {len(vector)}, the config says "
                               f"{recall.dimension}")
    except EmbeddingError as exc:
        report["error"] = exc.message
    finally:
        client.close()
    return report


def _index(env: Mapping[str, str], config: Config) -> dict[str, Any]:
    path = config_mod.resolve_paths(config, env).database
    if not path.exists():
        return {"exists": False}  # doctor never creates the index
    try:
        with LocalIndex(path) as index:
            status = index.status().to_json()
            rows = index.check_integrity()
    except QmemError as exc:
        return {"exists": True, "error": exc.message}
    return {"exists": True, **status, "integrity": "ok" if rows == ["ok"] else "; ".join(rows)[:300]}


def _run_probes(probes: dict[str, Callable[[], dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Run the network probes at once; each is bounded by its own client timeouts."""
    if not probes:
        return {}
    with ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="qmem-doctor") as pool:
        futures = {name: pool.submit(probe) for name, probe in probes.items()}
        results = {}
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except QmemError as exc:
                results[name] = {"error": exc.message}
            except Exception as exc:  # a probe must not take the report down with it
                results[name] = {"error": f"the probe failed ({exc.__class__.__name__})"}
        return results


# --- the whole ------------------------------------------------------------------------------

def diagnose(env: Mapping[str, str] | None = None) -> Diagnosis:
    """Check everything; see the module docstring."""
    env = os.environ if env is None else env
    problems: list[str] = []
    warnings: list[str] = []
    python = _python()
    if not python["fts5"]:
        problems.append("this Python's SQLite has no FTS5: the local index cannot work")
    config_report, config = _config(env)
    if config_report["error"]:
        problems.append(f"config: {config_report['error']}")
    credentials = _credentials(env)
    recall = config.recall

    probes: dict[str, Callable[[], dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="qmem-doctor-") as scratch:
        if config.url:
            probes["gateway"] = lambda: _probe_gateway(env, config, Path(scratch))
        if recall.active:
            probes["qdrant"] = lambda: _probe_qdrant(env, config)
            probes["embeddings"] = lambda: _probe_embeddings(env, config)
        results = _run_probes(probes)

    gateway: dict[str, Any] = {"configured": bool(config.url), "url": config.url}
    if config.url:
        gateway.update(results["gateway"], breaker=_breaker_state(env, config, config.url))
        if not credentials["gateway"]["set"]:
            warnings.append("url is set but QMEM_GATEWAY_API_KEY is not: requests go without an Authorization "
                            "header")
        if gateway.get("error"):
            problems.append(f"gateway: {gateway['error']}")
        if gateway.get("reachable") and gateway["breaker"]["state"] == "open":
            warnings.append(f"the gateway answers but its circuit breaker is open for "
                            f"{gateway['breaker']['retry_in_ms'] / 1000:.0f} s more: `python3 -m qmem.local breaker "
                            f"reset` closes it now")

    recall_report: dict[str, Any] = {"configured": recall.configured, "enabled": recall.enabled,
                                     "active": recall.active, "qdrant_url": recall.qdrant_url,
                                     "embeddings_url": recall.embeddings_url}
    recall_report["last"] = _last_recall(env, config)
    if recall.active:
        assert recall.qdrant_url is not None and recall.embeddings_url is not None
        recall_report.update(qdrant={**results["qdrant"], "breaker": _breaker_state(env, config, recall.qdrant_url)},
                             embeddings={**results["embeddings"],
                                         "breaker": _breaker_state(env, config, recall.embeddings_url)})
        for name in ("qdrant", "embeddings"):
            part = recall_report[name]
            if part.get("error"):
                problems.append(f"recall {name}: {part['error']}")
            elif name == "qdrant" and not part.get("healthy"):
                problems.append("recall qdrant: /healthz does not answer 200")
    elif recall.configured:
        warnings.append("recall is configured but switched off (recall.enabled is false)")

    index = _index(env, config)
    if index.get("error"):
        problems.append(f"index: {index['error']}")
    elif index.get("exists") and index.get("integrity") != "ok":
        problems.append(f"index: the integrity check failed ({index.get('integrity')})")

    host_check = check_hosts(env, recall_active=recall.active)
    hosts = host_check.document
    problems += host_check.problems
    warnings += host_check.warnings
    plugin_check = check_plugins(env)  # Claude Code and Codex: the plugin qmem@qmem
    problems += plugin_check.problems
    warnings += plugin_check.warnings

    warnings += audit(env)
    # Shown values are redacted by the scanner's families: the report never prints a credential.
    problems, warnings = hide_flagged(problems), hide_flagged(warnings)
    document = {
        "qmem": {"version": __version__, "package": str(install.package_dir())},
        "python": python,
        "config": config_report,
        "paths": _paths(env, config),
        "credentials": credentials,
        "gateway": gateway,
        "recall": recall_report,
        "index": index,
        "hosts": hosts,
        "plugins": plugin_check.document,
        "warnings": warnings,
        "problems": problems,
        "ok": not problems,
    }
    return Diagnosis(hide_flagged(document), problems, warnings)


# --- text -----------------------------------------------------------------------------------

def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _breaker_words(breaker: Mapping[str, Any]) -> str:
    if breaker["state"] == "open":
        return f"breaker open ({breaker['retry_in_ms'] / 1000:.0f} s left)"
    return f"breaker {breaker['state']}"


def _gateway_line(gateway: Mapping[str, Any]) -> str:
    if not gateway["configured"]:
        return "not configured (no url: stores are queued locally, searches answered locally)"
    head = f"{gateway['url']}  "
    if not gateway.get("reachable"):
        return f"{head}✗ unreachable: {gateway.get('error')}; {_breaker_words(gateway['breaker'])}"
    key = {"accepted": "API key accepted", "not needed": "no API key set (none asked for)",
           "refused": "API key REFUSED", "missing": "no API key set and the gateway wants one"}.get(gateway["key"],
                                                                                                  "API key ?")
    ok = not gateway.get("error")
    version = f"Memory Gateway {gateway['version']}" if gateway.get("version") else "Memory Gateway"
    tail = f": {gateway['error']}" if gateway.get("error") and gateway["key"] not in ("refused", "missing") else ""
    return f"{head}{_mark(ok)} {version}, {key}{tail}; {_breaker_words(gateway['breaker'])}"


def _recall_lines(recall: Mapping[str, Any]) -> list[str]:
    if not recall["configured"]:
        return ["off (not configured: write recall.qdrantUrl and recall.embeddingsUrl in the config to turn it on)"]
    if not recall["active"]:
        return ["off (recall.enabled is false)"]
    qdrant, embeddings = recall["qdrant"], recall["embeddings"]
    if qdrant.get("readable"):
        collection = (f"collection {qdrant['collection']} readable, {qdrant['dimension']} {qdrant['distance']}"
                      f"{', ' + str(qdrant.get('points')) + ' points' if qdrant.get('points') is not None else ''}")
    else:
        collection = f"collection {qdrant['collection']} not readable"
    q_ok = bool(qdrant.get("healthy") and qdrant.get("readable") and qdrant.get("matches"))
    q_line = (f"qdrant      {recall['qdrant_url']}  {_mark(q_ok)} healthz {'ok' if qdrant.get('healthy') else 'failing'}"
              f", {collection}{': ' + qdrant['error'] if qdrant.get('error') else ''}; "
              f"{_breaker_words(qdrant['breaker'])}")
    e_ok = bool(embeddings.get("ok") and embeddings.get("matches"))
    e_line = (f"embeddings  {recall['embeddings_url']}  {_mark(e_ok)} model {embeddings['model']}"
              f"{', dimension ' + str(embeddings['dimension']) if embeddings.get('dimension') else ''}"
              f"{': ' + embeddings['error'] if embeddings.get('error') else ''}; "
              f"{_breaker_words(embeddings['breaker'])}")
    return ["on", q_line, e_line, *_last_recall_lines(recall.get("last"))]


def render(diagnosis: Diagnosis) -> str:
    d = diagnosis.document
    python = d["python"]
    config = d["config"]
    lines = [f"qmem        {d['qmem']['version']} ({d['qmem']['package']})",
             f"python      {python['version']} ({python['executable']}), SQLite {python['sqlite']} "
             f"{'with FTS5' if python['fts5'] else '✗ WITHOUT FTS5'}"]
    state = "✗ " + config["error"] if config["error"] else ("exists" if config["exists"] else "no file: defaults")
    lines.append(f"config      {config['file']} (chosen by {config['chosen_by']}; {state})")
    for key, setting in config["settings"].items():
        if setting["source"] != "default":
            lines.append(f"              {key} = {setting['value']}  [{setting['source']}]")
    paths = d["paths"]
    lines.append(f"data        {paths['data_dir']} (index {paths['index']}, breakers {paths['breaker_file']})")
    lines.append("sessions    " + " · ".join(
        f"{root['label']} {root['directory']}{' (' + ', '.join(root['reads']) + ')' if root['reads'] else ''} "
        f"{'found' if root['exists'] else 'not found'}" for root in paths["sessions"]))
    creds = d["credentials"]
    lines.append("credentials " + " · ".join(
        f"{c['variable']} {'set' if c['set'] else 'not set'}{' (as ' + c['via'] + ')' if c['via'] and c['via'] != c['variable'] else ''}"
        for role, c in creds.items() if role in _RUNTIME_ROLES))
    lines.append(f"gateway     {_gateway_line(d['gateway'])}")
    recall = _recall_lines(d["recall"])
    lines.append(f"recall      {recall[0]}")
    lines += [f"  {line}" for line in recall[1:]]
    index = d["index"]
    if not index.get("exists"):
        lines.append("index       not created yet (the first store or import creates it)")
    elif index.get("error"):
        lines.append(f"index       ✗ {index['error']}")
    else:
        queue = index["queue"]
        lines.append(f"index       {_mark(index['integrity'] == 'ok')} schema v{index['schema_version']}, "
                     f"{index['records']} records, queue: pending {queue['pending']}, failed {queue['failed']}; "
                     f"integrity {index['integrity']}{', read-only' if index.get('read_only') else ''}")
    lines.append("hosts       " + " · ".join(f"{name}: {host_words(host)}" for name, host in d["hosts"].items()))
    lines.append("plugins     " + " · ".join(f"{LABELS[name]}: {plugin_words(report)}"
                                             for name, report in d["plugins"].items()))
    for warning in diagnosis.warnings:
        lines.append(f"warning     {warning}")
    for problem in diagnosis.problems:
        lines.append(f"problem     {problem}")
    count = len(diagnosis.problems)
    lines.append(f"overall     {'ok' if not count else f'{count} problem' + ('s' if count != 1 else '')}")
    return "\n".join(lines)


# -- the recall log's last outcome per lane (ids and numbers only: see qmem/recalllog.py)

def _last_recall(env: Mapping[str, str], config: Config) -> dict[str, Any]:
    """lane -> {"outcome", "category", "time"} of the newest automatic recall, or {}."""
    from ..recalllog import RecallLog, last_lane_outcomes

    log = RecallLog.in_directory(config_mod.resolve_paths(config, env).data_dir)
    return {lane: {"outcome": outcome, "category": category, "time": when}
            for lane, (outcome, category, when) in last_lane_outcomes(log.read_entries(20)).items()}


def _last_recall_lines(last: Mapping[str, Any] | None) -> list[str]:
    if not last:
        return ["last recall none recorded yet (python3 -m qmem.local recall-log)"]
    words = ", ".join(f"{lane} {info['outcome']}{' (' + info['category'] + ')' if info.get('category') else ''}"
                      for lane, info in last.items())
    when = next(iter(last.values()))["time"]
    return [f"last recall {when}: {words} (python3 -m qmem.local recall-log)"]

