"""``python -m appnorth inspect DIR``: why are my events not arriving?

The event queue comes from the library's own calls on an events handle
opened on the directory: ``Events.stats()`` for the counts (the database
and every process's journal files) and ``Events.pending()``
(appnorth_events_pending) for the events in the database, as the server
would receive them; the inspector no longer decodes journal files itself.
That open is the library's: it imports journals that ended processes left
(as the app's next run would) and keeps the files' permissions. The SQLite
database is opened read-only for consent, the cached config and the batch
in flight; the pending writes of each offline queue come from the
library's per-entry view (``OfflineQueue.entries()``). The inspector
uploads, sends and discards nothing: its events handle points at a port
nothing listens on and never flushes.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

DATABASE = "appnorth.sqlite3"
#: Where the inspector's own events handle points: a port nothing listens on,
#: so that nothing it holds could ever be sent (it uploads nothing anyway: no
#: timer, no threshold, no flush; its close does not flush).
NOWHERE = "http://127.0.0.1:9"


def _library_events(directory: str) -> Dict[str, Any]:
    """The event queue as the library reads it: ``Events.stats()`` for the
    counts (the database and every process's journals), and
    ``Events.pending()`` (appnorth_events_pending) for the events in the
    database, as the server would receive them. Opening the queue is the
    library's own open: it imports the journals ended processes left, as
    the next run of the app would."""
    from . import Client, Events

    with Client(NOWHERE, "inspect", logger=False) as client, \
            Events(client, directory, flush_interval_ms=86_400_000, batch_threshold=10_000,
                   close_timeout_ms=0) as events:
        stats = events.stats()
        pending = events.pending(2**31 - 1)
    timestamps = [event.get("timestamp") for event in (pending[:1] + pending[-1:]) if isinstance(event, dict)]
    # The handle's own journal file (empty: it tracks nothing) is not the app's.
    own = sum(1 for name in os.listdir(directory) if name.startswith(f"events-{os.getpid()}-"))
    return {"queued": stats["queued"], "bytes": stats["queued_bytes"], "in_database": len(pending),
            "oldest_ms": timestamps[0] if timestamps else None, "newest_ms": timestamps[-1] if timestamps else None,
            "journals": {"files": max(0, stats["journals"] - own), "events": stats["queued"] - len(pending)}}


def _when(ms: Optional[int]) -> str:
    if ms is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _json(blob: Any) -> Any:
    try:
        return json.loads(bytes(blob).decode("utf-8"))
    except (ValueError, TypeError):
        return None


def _queues(directory: str, names: List[str]) -> List[Dict[str, Any]]:
    from . import OfflineQueue, Storage  # the library's own reading of each queue

    queues = []
    for name in names:
        with Storage.sqlite(directory, name) as storage, OfflineQueue(storage) as queue:
            entries = queue.entries()
        scopes: Dict[str, List[Dict[str, Any]]] = {}
        for entry in entries:
            scopes.setdefault(entry.get("scope", "?"), []).append(entry)
        queues.append({"name": name, "pending": len(entries), "scopes": scopes})
    return queues


def inspect(directory: str) -> Dict[str, Any]:
    """What the data directory holds, as a dict (see ``--json``)."""
    path = os.path.join(directory, DATABASE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: not an appnorth data directory")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        kv = list(db.execute("SELECT namespace, key, value, updated_ms FROM kv")) if "kv" in tables else []
        has_events = "events" in tables
        leases = []
        for namespace, _, value, _ in kv:
            if namespace != "events_lease":
                continue
            # low:high[:owed:0:from]: rows from `from` on are in an attempt.
            parts = bytes(value).decode("ascii", "replace").split(":")
            if len(parts) >= 2 and all(p.lstrip("-").isdigit() for p in parts[:2]):
                low, high = int(parts[0]), int(parts[1])
                if len(parts) >= 5 and parts[4].lstrip("-").isdigit():
                    low = max(low, int(parts[4]))
                leases.append((low, high))
        in_flight = 0
        for low, high in leases if has_events else []:
            in_flight += db.execute("SELECT COUNT(*) FROM events WHERE seq BETWEEN ? AND ?", (low, high)).fetchone()[0]
    finally:
        db.close()
    # Every event waiting in the directory: the database and the journals.
    has_journals = any(name.startswith("events-") and name.endswith(".journal") for name in os.listdir(directory))
    if has_events or has_journals:
        events = _library_events(directory)
    else:
        events = {"queued": 0, "bytes": 0, "in_database": 0, "oldest_ms": None, "newest_ms": None,
                  "journals": {"files": 0, "events": 0}}
    events["in_flight"] = in_flight
    # The last upload error lives in the memory of a running queue only.
    events["last_error"] = None
    consent = "unknown"
    configs = []
    queue_names = []
    for namespace, key, value, updated_ms in kv:
        document = _json(value)
        if namespace == "consent" and key == "analytics":
            consent = bytes(value).decode("utf-8", "replace")
        elif namespace == "config":
            record = document if isinstance(document, dict) else {}
            configs.append({"app_id": key, "tier": "cached" if record else "unreadable",
                            "fetched_ms": record.get("fetched_ms"), "etag": record.get("etag"),
                            "version": record.get("config_version")})
        elif namespace == "blob" and isinstance(document, dict) and document.get("format") == "appnorth.offline-queue":
            queue_names.append(key)
    return {"directory": os.path.abspath(directory), "events": events, "consent": consent,
            "config": configs, "queues": _queues(directory, sorted(queue_names))}


def render(report: Dict[str, Any]) -> str:
    events = report["events"]
    lines = [f"data directory {report['directory']}",
             f"events: {events['queued']} queued, {events['bytes']} bytes; oldest {_when(events['oldest_ms'])}, "
             f"newest {_when(events['newest_ms'])}",
             f"  {events['in_database']} in the database ({events['in_flight']} in a batch being sent), "
             f"{events['journals']['events']} in {events['journals']['files']} journal file(s) not yet imported",
             "  last upload error: only a running queue knows it (Events.stats()['last_error'])",
             f"consent: {report['consent']}"
             + ("  (revoked: nothing is queued or sent)" if report["consent"] == "revoked" else "")]
    if not report["config"]:
        lines.append("config: nothing cached (the bundled tier or your defaults until a fetch succeeds)")
    for config in report["config"]:
        lines.append(f"config for {config['app_id']}: {config['tier']} tier, fetched {_when(config['fetched_ms'])}, "
                     f"version {config['version']}, etag {config['etag']}")
    if not report["queues"]:
        lines.append("offline queues: none")
    for queue in report["queues"]:
        lines.append(f"offline queue {queue['name']!r}: {queue['pending']} pending write(s)")
        for scope, entries in queue["scopes"].items():
            lines.append(f"  {scope}: {len(entries)}")
            for entry in entries:
                lines.append(f"    {entry.get('kind')} {entry.get('id')} queued {_when(entry.get('created_ms'))}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m appnorth", description="Tools for libappnorth data.")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("inspect", help="show what a data directory holds, without changing it")
    command.add_argument("directory")
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = inspect(args.directory)
    except (OSError, sqlite3.Error) as exc:
        print(f"appnorth inspect: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0
