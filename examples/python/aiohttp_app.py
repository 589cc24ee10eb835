"""A small aiohttp web app whose handlers talk to AppNorth without blocking
the event loop: every AppNorth call is an ``await`` of appnorth.aio (the
library's non-blocking calls) on a dispatch-mode client, so one loop thread
serves every request, every AppNorth callback runs on it, and no executor
thread is spent per call.

    pip install aiohttp
    python3 examples/python/aiohttp_app.py API_URL APP_ID DATA_DIR [PORT]

Routes:
    GET  /boards              the app's boards
    GET  /ideas?board=&q=     a page of ideas
    POST /ideas               {"board_id","title","body"}: submitted now (201) or
                              kept in the offline queue while the API is down (202)
    POST /flush               replays the offline queue: {"sent": N}
    GET  /config              the remote config value "greeting" (refreshed in the
                              background; changes are logged on the loop's thread)

A client that disconnects cancels its request's AppNorth call alone (aiohttp
cancels the handler's task; appnorth.aio cancels that operation).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Dict

from aiohttp import web

import appnorth
from appnorth import aio

CLIENT = web.AppKey("appnorth_client", appnorth.Client)
QUEUE = web.AppKey("appnorth_queue", appnorth.OfflineQueue)
CONFIG = web.AppKey("appnorth_config", appnorth.Config)

log = logging.getLogger("aiohttp_app")


async def boards(request: web.Request) -> web.Response:
    return web.json_response(await aio.list_boards(request.app[CLIENT]))


async def ideas(request: web.Request) -> web.Response:
    query = request.query
    page = await aio.list_ideas(request.app[CLIENT], board=query.get("board"), q=query.get("q"),
                                limit=int(query["limit"]) if "limit" in query else None)
    return web.json_response(page)


async def post_idea(request: web.Request) -> web.Response:
    body: Dict[str, Any] = await request.json()
    try:
        submitted = await aio.queue_submit_idea(request.app[QUEUE], request.app[CLIENT], body.get("board_id"),
                                                body.get("title"), body.get("body"))
    except (appnorth.ValidationError, appnorth.InvalidArgumentError) as error:
        return web.json_response({"error": str(error)}, status=400)
    return web.json_response({"submitted": submitted}, status=201 if submitted else 202)


async def flush(request: web.Request) -> web.Response:
    return web.json_response({"sent": await aio.queue_flush(request.app[QUEUE], request.app[CLIENT])})


async def config_value(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    return web.json_response({"greeting": config.get_string("greeting", "hello"), "tier": int(config.source.tier)})


def make_app(api_url: str, app_id: str, data_dir: Path) -> web.Application:
    """The web app; its AppNorth handles live as long as it runs."""
    app = web.Application()

    async def appnorth_handles(app: web.Application) -> AsyncIterator[None]:
        # Dispatch mode: completions, log lines and config listeners run on
        # the loop's thread (appnorth.aio serves the client's descriptor with
        # loop.add_reader), never on a library thread.
        with appnorth.Client(api_url, app_id, dispatch_mode=True) as client, \
                appnorth.OfflineQueue(appnorth.Storage.sqlite(data_dir, "queue")) as queue, \
                appnorth.Config(client, data_dir / "config") as config:
            app[CLIENT], app[QUEUE], app[CONFIG] = client, queue, config
            aio.add_config_listener(config, lambda values, keys, tier: log.info("config changed: %s", keys))
            refresh = asyncio.ensure_future(aio.refresh_config(config))
            yield
            refresh.cancel()
            await asyncio.gather(refresh, return_exceptions=True)

    app.cleanup_ctx.append(appnorth_handles)
    app.router.add_get("/boards", boards)
    app.router.add_get("/ideas", ideas)
    app.router.add_post("/ideas", post_idea)
    app.router.add_post("/flush", flush)
    app.router.add_get("/config", config_value)
    return app


def main(api_url: str, app_id: str, data_dir: str, port: str = "8081") -> int:
    logging.basicConfig(level=logging.INFO)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    web.run_app(make_app(api_url, app_id, Path(data_dir)), host="127.0.0.1", port=int(port))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
