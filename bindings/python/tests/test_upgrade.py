"""Upgrades keep every event: a data directory the 0.3 library left when its
host was killed mid-upload (Tests/fixtures/datadir-0.3, made by
Tests/fixtures/make_datadir_0_3.py with the 0.3 release library) opens
with this library, and every event it holds reaches the server exactly
once: the table's rows (their first batch leased by the attempt that was
in flight), the killed host's ANJ2 journal, and an ANJ1 journal an
earlier version left.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections import Counter
from pathlib import Path

import appnorth
from appnorth_test_support import Admin

FIXTURES = Path(__file__).resolve().parents[3] / "Tests" / "fixtures"


def copy_fixture(into: Path) -> Path:
    """The fixture as a host's own data directory: 0700, files 0600 (git
    keeps neither mode), owned by this user."""
    data_dir = into / "datadir-0.3"
    shutil.copytree(FIXTURES / "datadir-0.3", data_dir)
    os.chmod(data_dir, 0o700)
    for name in os.listdir(data_dir):
        os.chmod(data_dir / name, 0o600)
    return data_dir


def test_a_0_3_data_directory_killed_mid_upload_delivers_every_event_once(tmp_path: Path, server_url: str) -> None:
    expected = json.loads((FIXTURES / "datadir-0.3.manifest.json").read_text())["events"]
    assert len(expected) == 55 and len(set(expected)) == 55
    data_dir = copy_fixture(tmp_path)
    left = {n for n in os.listdir(data_dir) if n.endswith(".journal")}
    assert len(left) == 2, "the killed host's ANJ2 journal and an ANJ1 one"
    app = f"pytest-upgrade-{uuid.uuid4().hex[:8]}"
    with appnorth.Client(server_url, app) as client, appnorth.Events(client, str(data_dir)) as events:
        assert events.stats()["queued"] == 55
        events.set_network_type(appnorth.NETWORK_WIFI)
        events.flush(30000)
        stats = events.stats()
    assert stats["queued"] == 0
    assert all(count == 0 for count in stats["dropped"].values()), stats["dropped"]
    admin = Admin(server_url)
    names = Counter(e["name"] for e in admin.state(app)["events"])
    posts = [r for r in admin.requests() if r.get("path") == f"/v1/apps/{app}/events"]
    assert sum(r.get("events_duplicates", 0) for r in posts) == 0, "no event was sent twice"
    assert sum(r.get("events_accepted", 0) for r in posts) == 55
    assert sorted(names) == sorted(expected)
    assert set(names.values()) == {1}, "each event once"
    # The journals went in and were removed.
    assert not left & set(os.listdir(data_dir))
