"""The binding's types serve its users: ``mypy --strict`` accepts a script
that uses every public class, and catches a typo in one (``with ... as x``
gives ``x`` its class, not ``Any``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from appnorth_test_support import BINDING_DIR

SCRIPT = Path(__file__).with_name("typing_user_script.py")


def run_mypy(script: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy")
    env = dict(os.environ, MYPYPATH=str(BINDING_DIR))
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--cache-dir", str(tmp_path / "mypy-cache"), str(script)],
                          env=env, capture_output=True, text=True, timeout=300)


def test_mypy_strict_accepts_a_script_using_every_class(tmp_path: Path) -> None:
    result = run_mypy(SCRIPT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_catches_a_typo_inside_with(tmp_path: Path) -> None:
    source = SCRIPT.read_text(encoding="utf-8")
    assert 'events.track("purchase"' in source
    typo = tmp_path / "typo.py"
    typo.write_text(source.replace('events.track("purchase"', 'events.trak("purchase"'), encoding="utf-8")
    result = run_mypy(typo, tmp_path)
    assert result.returncode != 0
    assert '"Events" has no attribute "trak"' in result.stdout, result.stdout
