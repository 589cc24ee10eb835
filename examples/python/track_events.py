"""Analytics events that outlive a lost connection and a restart:

  1. Lose connectivity and track three events: each is on disk before
     track() returns. A flush fails with a NetworkError and keeps them.
  2. "Restart the app": close and open the same data directory again; the
     three events are still queued, and go out soon after the open.
  3. Back online: they are delivered once; the queue is empty.

    python3 examples/python/track_events.py API_URL APP_ID DATA_DIR

DEV SERVER ONLY: see devserver_admin.py.
"""

import sys
import time

import appnorth
from devserver_admin import admin, go_offline, go_online

QUIET = {"flush_interval_ms": 600_000, "batch_threshold": 1000, "retries": 0}


def main(api_url: str, app_id: str, data_dir: str) -> int:
    with appnorth.Client(api_url, app_id, api_timeout_ms=3000) as client:
        go_offline(api_url)
        with appnorth.Events(client, data_dir, close_timeout_ms=0, **QUIET) as events:
            for i in range(3):
                events.track("level_complete", {"level": i + 1})
            try:
                events.flush(5000)
            except appnorth.NetworkError as error:
                print(f"1. offline flush failed ({error}); queued {events.stats()['queued']}")

        go_online(api_url)
        with appnorth.Events(client, data_dir, **QUIET) as events:
            # No flush call and a 10-minute timer: the events of the last run
            # go out on their own, soon after the open.
            print("2. reopened the same data directory")
            deadline = time.monotonic() + 10
            while events.stats()["queued"] and time.monotonic() < deadline:
                time.sleep(0.05)
            print(f"3. delivered; queued now {events.stats()['queued']}")
    names = [e["name"] for e in admin(api_url, "GET", f"/admin/apps/{app_id}/state")["events"]]
    print(f"   the server holds {names.count('level_complete')} level_complete event(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
