"""The READMEs' Python quickstarts run as written.

Each snippet is extracted from the Markdown and run verbatim in a fresh
interpreter, from an unrelated folder, against the dev server seeded with
the demo data. The only thing the test chooses is the server's address,
through the ``APPNORTH_URL`` variable the snippets read. Then the server's
admin state shows what arrived.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from appnorth_test_support import BINDING_DIR, REPO_ROOT, Admin

DEMO_APP = "demo"


def python_blocks(readme: Path) -> List[str]:
    blocks = re.findall(r"^```python\n(.*?)^```$", readme.read_text(encoding="utf-8"), re.S | re.M)
    assert blocks, f"{readme} has no python code block"
    return blocks


def run_snippet(code: str, server_url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, APPNORTH_URL=server_url)
    script = tmp_path / "quickstart.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def seeded(admin: Admin) -> Admin:
    admin._call("POST", "/admin/reset", {"seed_demo": True})
    return admin


def test_readme_python_quickstart_delivers_its_event(seeded: Admin, server_url: str, tmp_path: Path) -> None:
    blocks = python_blocks(REPO_ROOT / "README.md")
    assert len(blocks) == 1, "the README's Python quickstart is one runnable block"
    result = run_snippet(blocks[0], server_url, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Features" in result.stdout and "idea: Faster search" in result.stdout, result.stdout
    state = seeded.state(DEMO_APP)
    assert [c["body"] for c in state["comments"]] == ["Yes please"]
    # The event was only tracked; leaving `with Events(...)` uploaded it.
    events = [e for e in state["events"] if e["name"] == "purchase"]
    assert len(events) == 1 and events[0]["properties_raw"] == '{"price": 9.99}'


def test_binding_readme_first_snippet_runs(seeded: Admin, server_url: str, tmp_path: Path) -> None:
    result = run_snippet(python_blocks(BINDING_DIR / "README.md")[0], server_url, tmp_path)
    assert result.returncode == 0, result.stderr
    titles = [i["title"] for i in seeded.state(DEMO_APP)["ideas"]]
    assert "Dark mode for the editor" in titles


EXAMPLES = REPO_ROOT / "examples" / "python"


@pytest.mark.parametrize("name,expect", [
    ("boards", "open ideas about search: ['Faster search']"),
    ("offline_comment", "3. bob's flush sent 0; ada's entry pending: 1"),
    ("track_events", "the server holds 3 level_complete event(s)"),
    ("remote_config", "4. restarted offline: CACHED tier, banner 'remote v2'"),
])
def test_python_example_walkthrough_runs(seeded: Admin, server_url: str, tmp_path: Path, name: str,
                                         expect: str) -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), server_url, DEMO_APP,
                             str(tmp_path / "data")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert expect in result.stdout, result.stdout
