"""A user's script touching every public class, for ``mypy --strict``
(tests/test_typing.py). It is type-checked, never run."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional

import appnorth


def on_config(values: Dict[str, Any], changed: List[str], tier: int) -> None:
    logging.getLogger("myapp").info("config %s changed %s from tier %d", values, changed, tier)


def main(data_dir: str) -> int:
    api_url = os.environ.get("APPNORTH_URL", "http://127.0.0.1:8080")
    with appnorth.Client(api_url, "demo", email=None, token=None, api_timeout_ms=5000) as client:
        boards: Dict[str, Any] = client.list_boards()
        ideas = client.list_ideas(q="search", status="open", limit=10)
        scope: str = client.scope
        with appnorth.Feedback("Great app", diagnostics={"os": "linux"}) as feedback:
            client.submit_feedback(feedback)
        with appnorth.Storage.sqlite(data_dir, "queue") as storage, \
                appnorth.OfflineQueue(storage) as queue:
            sent_now: bool = queue.submit_comment(client, ideas["ideas"][0]["id"], "Yes please")
            flushed: int = queue.flush(client)
            pending: int = queue.pending_count()
        with appnorth.Storage.memory() as memory, appnorth.ManualClock(0) as clock, \
                appnorth.ReadCache(memory, ttl_seconds=60, clock=clock) as cache:
            cache.store_boards(client, boards["boards"])
            cached: Optional[List[Any]] = cache.boards(client)
            clock.advance(1000)
            for source, fresh in cache.read_boards(client):
                print(source == appnorth.Source.NETWORK, len(fresh))
        with appnorth.Events(client, data_dir, close_timeout_ms=500) as events:
            queued: bool = events.track("purchase", {"price": 9.99})
            sent: int = events.flush(2000)
            consent: appnorth.Consent = events.consent
            events.set_network_type(appnorth.NetworkType.WIFI)
            stats: Dict[str, Any] = events.stats()
        with appnorth.Config(client, data_dir) as config:
            config.add_listener(on_config)
            price: float = config.get_double("price", 4.99)
            source_info: appnorth.ConfigSource = config.source
            status: appnorth.FetchStatus = config.last_fetch_status()
            tier: appnorth.ConfigTier = source_info.tier
    try:
        client.list_boards()
    except appnorth.WrongStateError as error:
        code: int = error.code
        print(code == appnorth.Status.E_WRONG_STATE)
    except appnorth.NetworkError:
        pass
    except appnorth.AppNorthTimeoutError:
        pass
    print(scope, sent_now, flushed, pending, cached, queued, sent, consent, stats, price, status, tier,
          appnorth.BundledConfigWarning, appnorth.LogLevel.DEBUG)
    return 0
