"""examples/python/aiohttp_app.py, the aiohttp web app on appnorth.aio, run
against the dev server: its routes answer with the server's data, a write
made while the API is down is kept and replayed, and many requests served
at once by the one loop thread all complete."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, List

import pytest

from appnorth_test_support import APP, REPO_ROOT, Admin

aiohttp = pytest.importorskip("aiohttp")
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402


def _example() -> ModuleType:
    path = REPO_ROOT / "examples" / "python" / "aiohttp_app.py"
    spec = importlib.util.spec_from_file_location("aiohttp_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["aiohttp_app"] = module
    spec.loader.exec_module(module)
    return module


def test_the_example_app_serves_appnorth_data(server_url: str, admin: Admin, tmp_path: Path) -> None:
    board = admin.add_board(APP, "Web")
    admin.add_idea(APP, board["id"], "Served by aiohttp")
    admin.publish_config(APP, {"greeting": "hi from config"})
    example = _example()

    async def main() -> List[Any]:
        app = example.make_app(server_url, APP, tmp_path)
        async with TestClient(TestServer(app)) as web:
            boards = await (await web.get("/boards")).json()
            ideas = await (await web.get("/ideas", params={"board": board["id"]})).json()
            admin.outage()
            kept = await web.post("/ideas", json={"board_id": board["id"], "title": "Written offline"})
            admin.clear_faults()
            flushed = await (await web.post("/flush")).json()
            bad = await web.post("/ideas", json={"board_id": board["id"], "title": "  "})
            many = await asyncio.gather(*(web.get("/boards") for _ in range(32)))
            statuses = [r.status for r in many]
            config = None
            for _ in range(200):  # the app refreshes its config in the background
                config = await (await web.get("/config")).json()
                if config["greeting"] != "hello":
                    break
                await asyncio.sleep(0.02)
            return [boards, ideas, kept.status, flushed, bad.status, statuses, config]

    boards, ideas, kept_status, flushed, bad_status, statuses, config = asyncio.run(main())
    assert [b["name"] for b in boards["boards"]] == ["Web"]
    assert [i["title"] for i in ideas["ideas"]] == ["Served by aiohttp"]
    assert kept_status == 202, "kept in the queue while the API dropped the request"
    assert flushed == {"sent": 1}
    assert bad_status == 400
    assert statuses == [200] * 32
    assert config is not None and config["greeting"] == "hi from config"
    titles = sorted(i["title"] for i in admin.state(APP).get("ideas", []))
    assert "Written offline" in titles
