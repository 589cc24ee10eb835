"""Issue 23, class 1 with a real second user: another local user (uid 65534,
through ``setpriv``) prepares or plants the data directory, and a root
process using it gets nothing: no file of its own touched, nothing adopted,
no forged event uploaded. Runs only as root (skipped with a message
otherwise); the same-user cases are in Tests/AppNorthCoreTests/
DataDirectorySecurityTests.swift."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

import appnorth
from appnorth_test_support import APP, BINDING_DIR

OTHER = 65534
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="the other-user cases need root and setpriv (to act as a second uid); skipped")


def as_other(*argv: str, env: dict | None = None) -> None:
    subprocess.run(["setpriv", f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups", *argv],
                   check=True, env=env, timeout=60)


@pytest.fixture
def other_python(shared: Path) -> tuple[str, dict]:
    """A Python the other user can run, with the binding and the library it
    imports copied where that user can read them: the checkout may sit in a
    folder only we can enter (/root, a 0700 home), and so may the venv's
    interpreter. Returns the interpreter and the environment to run it with."""
    readable = shared / "binding"
    shutil.copytree(BINDING_DIR / "appnorth", readable / "appnorth",
                    ignore=shutil.ignore_patterns("__pycache__"))
    library = readable / Path(appnorth.LIBRARY_PATH).name
    shutil.copy2(appnorth.LIBRARY_PATH, library)
    for path in [readable, *readable.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    candidates = [sys.executable, getattr(sys, "_base_executable", ""), "/usr/bin/python3",
                  shutil.which("python3") or ""]
    for python in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run(["setpriv", f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups", python, "-c",
                                "import sys; assert sys.version_info >= (3, 9)"], capture_output=True, timeout=60)
        if probe.returncode == 0:
            return python, dict(os.environ, PYTHONPATH=str(readable), APPNORTH_LIBRARY=str(library), HOME="/tmp")
    pytest.fail(f"no Python 3.9+ that uid {OTHER} can run among {candidates}")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A world-writable sticky folder, as /tmp is."""
    folder = Path(tempfile.mkdtemp(prefix="appnorth-shared-", dir="/tmp"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def precious(tmp_path: Path) -> Path:
    """A root file no planted link may change (stands for /etc/passwd)."""
    path = tmp_path / "precious"
    path.write_text("root:x:0:0\n")
    path.chmod(0o644)
    return path


def unchanged(path: Path) -> bool:
    return path.read_text() == "root:x:0:0\n" and stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_directory_another_user_made_is_refused_with_its_planted_links(
        client: appnorth.Client, shared: Path, precious: Path) -> None:
    data = shared / "data"
    as_other("sh", "-c", f"mkdir -m 0777 {data} && chmod 0777 {data} && "
             + " && ".join(f"ln -s {precious} {data}/{name}" for name in
                           ["identity.json.lock", "consent.watch", "identity.json", "appnorth.sqlite3"]))
    with pytest.raises(appnorth.StorageError, match="unsafe data directory.*belongs to uid 65534"):
        appnorth.Events(client, data)
    with pytest.raises(appnorth.StorageError, match="unsafe data directory"):
        appnorth.Config(client, data)
    assert unchanged(precious)
    assert os.stat(data).st_uid == OTHER and stat.S_IMODE(os.stat(data).st_mode) == 0o777


def test_a_private_directory_of_another_user_is_refused(client: appnorth.Client, shared: Path) -> None:
    data = shared / "data"
    as_other("mkdir", "-m", "0700", str(data))
    with pytest.raises(appnorth.StorageError, match="belongs to uid 65534"):
        appnorth.Events(client, data)


def test_a_world_writable_directory_of_our_own_is_refused(client: appnorth.Client, shared: Path,
                                                          precious: Path) -> None:
    data = shared / "data"
    data.mkdir()
    data.chmod(0o777)
    as_other("ln", "-s", str(precious), str(data / "identity.json.lock"))
    with pytest.raises(appnorth.StorageError, match="lets other users write"):
        appnorth.Events(client, data)
    assert unchanged(precious)


@pytest.mark.parametrize("name", ["identity.json", "identity.json.lock", "consent.watch", "appnorth.sqlite3",
                                  "appnorth.sqlite3-wal", "appnorth.sqlite3-shm"])
def test_a_file_another_user_left_is_never_adopted(client: appnorth.Client, shared: Path, name: str) -> None:
    # Left while the folder was open to them (an older version, a wide
    # umask); the folder is ours and private again now.
    data = shared / "data"
    data.mkdir(mode=0o700)
    data.chmod(0o777)
    as_other("sh", "-c", f"printf '{{\"anonymous_id\":\"forged\"}}' > {data}/{name}")
    data.chmod(0o700)
    with pytest.raises(appnorth.StorageError, match=f"unsafe file .*/{name} refused"):
        appnorth.Events(client, data)
    assert (data / name).stat().st_uid == OTHER


def test_a_journal_another_user_wrote_is_not_uploaded(server_url: str, client: appnorth.Client, shared: Path,
                                                      admin, other_python: tuple[str, dict]) -> None:
    # The other user runs the library itself, in a folder of its own, and
    # dies with a journal left (its checksums are no MAC: anyone can make
    # one). The journal then sits in our folder, as one planted while an
    # older version left the folder open would.
    theirs = shared / "theirs"
    as_other("mkdir", "-m", "0700", str(theirs))
    script = textwrap.dedent(f"""
        import os, appnorth
        client = appnorth.Client({server_url!r}, {APP!r})
        events = appnorth.Events(client, {str(theirs)!r}, flush_interval_ms=600000, batch_threshold=1000)
        events.track("forged", {{"by": "another user"}})
        os._exit(0)
    """)
    python, env = other_python
    as_other(python, "-c", script, env=env)
    data = shared / "data"
    data.mkdir(mode=0o700)
    journals = []
    for p in theirs.iterdir():
        if p.name.startswith("events-") and p.name.endswith(".journal"):
            p.rename(data / p.name)
            journals.append(data / p.name)
    assert journals and all(p.stat().st_uid == OTHER for p in journals)
    with appnorth.Events(client, data, flush_interval_ms=600000) as events:
        events.flush(5000)
    assert admin.state(APP)["events"] == []
    assert all(p.exists() for p in journals), "left in place"
    # The control: the same journal, ours, is imported and sent.
    for p in journals:
        os.chown(p, 0, 0)
    with appnorth.Events(client, data, flush_interval_ms=600000) as events:
        events.flush(5000)
    assert [e["name"] for e in admin.state(APP)["events"]] == ["forged"]


def test_a_swap_of_the_path_after_open_writes_nothing_through_it(client: appnorth.Client, shared: Path,
                                                                 tmp_path: Path) -> None:
    parent = shared / "parent"
    as_other("mkdir", "-m", "0755", str(parent))
    data = parent / "data"
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / "identity.json").write_text('{"anonymous_id":"mine"}')
    with appnorth.Events(client, data, flush_interval_ms=600000) as events:
        as_other("sh", "-c", f"mv {data} {parent}/moved && ln -s {mine} {data}")
        events.identify("user-1")
    assert (mine / "identity.json").read_text() == '{"anonymous_id":"mine"}'
    assert '"user_id":"user-1"' in (parent / "moved" / "identity.json").read_text()
