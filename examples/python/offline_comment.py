"""The offline write queue and the read cache, step by step:

  1. Lose connectivity and submit a comment: it is queued, 1 pending.
  2. Reconnect and flush: it is sent (same idempotency key), 0 pending.
  3. Queue a comment as ada, switch to bob: bob's flush sends nothing and
     ada's entry stays; logging ada out discards it.
  4. Read boards through the cache before and after its TTL expires, moving
     a manual clock instead of waiting.

    python3 examples/python/offline_comment.py API_URL APP_ID DATA_DIR

DEV SERVER ONLY: "losing connectivity" asks the dev server to drop every
connection (devserver_admin.py); a real app flushes when the OS says it is
back online.
"""

import sys

import appnorth
from devserver_admin import admin, go_offline, go_online


def main(api_url: str, app_id: str, data_dir: str) -> int:
    admin(api_url, "POST", "/admin/users", {"app": app_id, "email": "ada@example.com", "token": "tok-ada"})
    admin(api_url, "POST", "/admin/users", {"app": app_id, "email": "bob@example.com", "token": "tok-bob"})
    with appnorth.Client(api_url, app_id, email="ada@example.com", token="tok-ada", api_timeout_ms=3000) as ada, \
            appnorth.Client(api_url, app_id, email="bob@example.com", token="tok-bob", api_timeout_ms=3000) as bob, \
            appnorth.Storage.sqlite(data_dir, "queue") as storage, \
            appnorth.OfflineQueue(storage) as queue:
        idea = ada.list_ideas(limit=1)["ideas"][0]

        go_offline(api_url)
        sent = queue.submit_comment(ada, idea["id"], "Written on the train")
        print(f"1. offline: sent now {sent}, pending {queue.pending_count()}")

        go_online(api_url)
        print(f"2. back online: flush sent {queue.flush(ada)}, pending {queue.pending_count()}")

        go_offline(api_url)
        queue.submit_comment(ada, idea["id"], "ada's second thought")
        go_online(api_url)
        print(f"3. bob's flush sent {queue.flush(bob)}; ada's entry pending: {queue.pending_count()}")
        print(f"   ada logs out: {queue.discard(ada)} discarded, pending {queue.pending_count()}")

    with appnorth.Client(api_url, app_id) as client, appnorth.ManualClock(1_700_000_000_000) as clock, \
            appnorth.Storage.sqlite(data_dir, "cache") as storage, \
            appnorth.ReadCache(storage, ttl_seconds=300, clock=clock) as cache:
        for step in ("first read", "within the TTL", "after the TTL"):
            sources = [appnorth.Source(source).name for source, _ in cache.read_boards(client)]
            print(f"4. {step}: {sources}")
            clock.advance(200_000)
        cache.clear(client)
        print(f"   after logout the cache holds: {cache.boards(client)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
