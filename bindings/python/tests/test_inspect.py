"""``python -m appnorth inspect DIR`` answers "why are my events not
arriving?" from a real data directory, without changing it or sending
anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin

QUIET: Dict[str, Any] = {"flush_interval_ms": 600_000, "batch_threshold": 1000, "close_timeout_ms": 0}


def run_inspect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "appnorth", "inspect", *args],
                          capture_output=True, text=True, timeout=60)


def test_inspect_reports_events_consent_config_and_pending_writes(client: appnorth.Client, admin: Admin,
                                                                   tmp_path: Path) -> None:
    admin.publish_config(APP, {"price": 9.99})
    with appnorth.Config(client, tmp_path) as config:
        config.refresh()
    with appnorth.Events(client, tmp_path, **QUIET) as events:
        events.track("first", {"n": 1})
        events.track("second")
    admin.outage()
    with appnorth.Storage.sqlite(tmp_path, "queue") as storage, appnorth.OfflineQueue(storage) as queue:
        assert queue.submit_comment(client, "i-1", "kept while offline") is False
    admin.clear_faults()
    before = admin.requests()

    result = run_inspect(str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["events"]["queued"] == 2 and report["events"]["bytes"] > 0
    assert report["events"]["oldest_ms"] <= report["events"]["newest_ms"]
    assert report["consent"] == "unknown"
    assert [(c["app_id"], c["tier"]) for c in report["config"]] == [(APP, "cached")]
    assert report["config"][0]["fetched_ms"] > 0
    [queue_report] = report["queues"]
    assert queue_report["name"] == "queue" and queue_report["pending"] == 1
    assert [e["kind"] for e in queue_report["scopes"][client.scope]] == ["comment"]

    text = run_inspect(str(tmp_path))
    assert text.returncode == 0, text.stderr
    assert "events: 2 queued" in text.stdout and "consent: unknown" in text.stdout
    assert f"config for {APP}: cached tier" in text.stdout
    assert f"{client.scope}: 1" in text.stdout

    # Nothing sent, nothing removed.
    assert admin.requests() == before
    again = json.loads(run_inspect(str(tmp_path), "--json").stdout)
    assert again["events"] == report["events"] and again["queues"] == report["queues"]


def test_inspect_shows_revoked_consent(client: appnorth.Client, tmp_path: Path) -> None:
    with appnorth.Events(client, tmp_path, **QUIET) as events:
        events.set_consent(False)
    report = json.loads(run_inspect(str(tmp_path), "--json").stdout)
    assert report["consent"] == "revoked" and report["events"]["queued"] == 0
    assert "revoked: nothing is queued or sent" in run_inspect(str(tmp_path)).stdout


def test_inspect_of_a_folder_without_data_says_so(tmp_path: Path) -> None:
    result = run_inspect(str(tmp_path))
    assert result.returncode == 1
    assert "not an appnorth data directory" in result.stderr


def test_inspect_counts_events_still_in_journals(client: appnorth.Client, tmp_path: Path) -> None:
    # The handle stays open: its events wait in its journal file, not yet
    # in the database (issue 24: the inspector said "queued: 0").
    with appnorth.Events(client, tmp_path, **QUIET) as events:
        for n in range(7):
            events.track("journaled", {"n": n})
        report = json.loads(run_inspect(str(tmp_path), "--json").stdout)
        assert report["events"]["journals"]["events"] == 7 and report["events"]["journals"]["files"] >= 1
        assert report["events"]["queued"] == 7 == events.stats()["queued"]
        assert report["events"]["in_flight"] == 0
        assert "7 in 1 journal file(s) not yet imported" in run_inspect(str(tmp_path)).stdout
        stats = events.stats()
        assert stats["journals"] >= 1
        on_disk = sum(p.stat().st_size for p in tmp_path.iterdir()
                      if p.name.startswith(("appnorth.sqlite3", "events-")) and not p.name.endswith("-shm"))
        assert stats["disk_bytes"] == on_disk
