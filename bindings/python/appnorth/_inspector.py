"""``python -m appnorth inspect DIR``: why are my events not arriving?

Reads a data directory without changing it: the SQLite database is opened
read-only for the event queue, consent and the cached config; the event
journals (``events-*.journal``, every process's events not yet moved into
the database) are read as files and decoded as the library decodes them;
the pending writes of each offline queue come from the library's own
per-entry view (``OfflineQueue.entries()``). The inspector uploads, sends
and discards nothing.
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
# Record versions by magic (Sources/AppNorthCore/Events/Journal/JournalRecord.swift):
# "ANJ1" records carry `_checksum`, "ANJ2" records (what the library writes
# now) `_checksum2`.
JOURNAL_MAGIC_V1 = 0x314A4E41
JOURNAL_MAGIC_V2 = 0x324A4E41
MASK = (1 << 64) - 1


def _checksum(length: int, payload: bytes) -> int:
    """JournalRecord.checksum: the length and the payload, mixed."""
    k1, k2 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F

    def step(h: int, word: int) -> int:
        x = (h ^ (word * k1 & MASK)) & MASK
        return (((x << 31) | (x >> 33)) & MASK) * k2 & MASK

    h = 0x27D4EB2F165667C5 ^ (length * k1 & MASK)
    whole = len(payload) - len(payload) % 8
    for offset in range(0, whole, 8):
        h = step(h, int.from_bytes(payload[offset:offset + 8], "little"))
    h = step(h, int.from_bytes(payload[whole:], "little"))
    h ^= h >> 33
    h = h * 0xFF51AFD7ED558CCD & MASK
    return h ^ (h >> 29)


def _mum(a: int, b: int) -> int:
    product = (a & MASK) * (b & MASK)
    return (product >> 64) ^ (product & MASK)


def _checksum2(length: int, payload: bytes) -> int:
    """JournalRecord.checksum2: sixteen bytes a step, folded by a 128-bit product."""
    s0, s1, s2, s3, s4 = (0xA0761D6478BD642F, 0xFF037ED1A0B428DB, 0x8EBC6AF09C88C6E3, 0x589965CC75374CC3,
                          0x1D8E4E27C47D124F)

    def word(at: int) -> int:
        return int.from_bytes(payload[at:at + 8], "little")

    h = s0 ^ length
    count, offset = len(payload), 0
    while count - offset >= 16:
        h = _mum(word(offset) ^ s1, word(offset + 8) ^ h)
        offset += 16
    if offset < count:
        if count >= 16:
            a, b = word(count - 16), word(count - 8)
        elif count >= 8:
            a, b = word(0), word(count - 8)
        else:
            a, b = int.from_bytes(payload, "little"), 0
        h = _mum(a ^ s2, b ^ h)
    return _mum(h ^ s3, count ^ s4)


def _journal_records(data: bytes, start: int) -> List[int]:
    """The payload sizes of the sound records from `start` on (damage skipped)."""
    sizes, position = [], start
    while position + 16 <= len(data):
        magic = int.from_bytes(data[position:position + 4], "little")
        length = int.from_bytes(data[position + 4:position + 8], "little")
        end = position + 16 + length
        checksum = {JOURNAL_MAGIC_V1: _checksum, JOURNAL_MAGIC_V2: _checksum2}.get(magic)
        if (checksum and end <= len(data) and data[position + 16:position + 23] == b'{"id":"'
                and checksum(length, data[position + 16:end]) == int.from_bytes(data[position + 8:position + 16], "little")):
            sizes.append(length)
            position = end
        else:
            position += 1
    return sizes


def _journals(directory: str, marks: Dict[str, Dict[str, bytes]], revocations: int) -> Dict[str, Any]:
    """Events waiting in journal files: not imported yet (after a file's
    progress mark), and not from before the latest revocation of consent
    (those are purged, never sent)."""
    files = events = size = 0
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("events-") and name.endswith(".journal")) or name in marks["imported"]:
            continue
        parts = name[len("events-"):-len(".journal")].split("-")
        epoch = int(parts[1][1:]) if len(parts) == 3 and parts[1][1:].isdigit() else 0
        try:
            with open(os.path.join(directory, name), "rb") as f:
                data = f.read()
        except OSError:
            continue
        try:
            start = min(max(0, int(marks["progress"].get(name, b"0"))), len(data))
        except ValueError:
            start = 0
        sizes = _journal_records(data, start)
        files += 1
        if epoch == revocations:
            events += len(sizes)
            size += sum(sizes)
    return {"files": files, "events": events, "bytes": size}


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
        events: Dict[str, Any] = {"queued": 0, "bytes": 0, "oldest_ms": None, "newest_ms": None}
        marks: Dict[str, Dict[str, bytes]] = {"imported": {}, "progress": {}}
        revocations = 0
        leases = []
        for namespace, key, value, _ in kv:
            if namespace == "events_journal_imported":
                marks["imported"][key] = bytes(value)
            elif namespace == "events_journal_progress":
                marks["progress"][key] = bytes(value)
            elif namespace == "consent" and key == "revocations":
                try:
                    revocations = int(bytes(value).decode("ascii"))
                except ValueError:
                    pass
            elif namespace == "events_lease":
                # low:high[:owed:0:from]: rows from `from` on are in an attempt.
                parts = bytes(value).decode("ascii", "replace").split(":")
                if len(parts) >= 2 and all(p.lstrip("-").isdigit() for p in parts[:2]):
                    low, high = int(parts[0]), int(parts[1])
                    if len(parts) >= 5 and parts[4].lstrip("-").isdigit():
                        low = max(low, int(parts[4]))
                    leases.append((low, high))
        in_flight = 0
        if "events" in tables:
            count, size = db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM events").fetchone()
            events.update(queued=count, bytes=size)
            for low, high in leases:
                in_flight += db.execute("SELECT COUNT(*) FROM events WHERE seq BETWEEN ? AND ?", (low, high)).fetchone()[0]
            for key, order in (("oldest_ms", "ASC"), ("newest_ms", "DESC")):
                row = db.execute(f"SELECT payload FROM events ORDER BY seq {order} LIMIT 1").fetchone()
                payload = _json(row[0]) if row else None
                events[key] = payload.get("timestamp") if isinstance(payload, dict) else None
    finally:
        db.close()
    journals = _journals(directory, marks, revocations)
    # Every event waiting in the directory: the table and the journals.
    events.update(queued=events["queued"] + journals["events"], bytes=events["bytes"] + journals["bytes"],
                  in_database=events["queued"], journals=journals, in_flight=in_flight)
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
