"""Remote config over its tiers:

  1. The server is down: the config comes from the bundled file.
  2. The server is up: a refresh resolves it to the remote config, and the
     listener fires.
  3. A new version is published: the live stream delivers it.
  4. "Restart" offline (a client on a dead port, the same data directory):
     the config comes back from the cache.

    python3 examples/python/remote_config.py API_URL APP_ID DATA_DIR

DEV SERVER ONLY: publishing uses the dev server's /admin endpoint.
"""

import json
import os
import socket
import sys
import threading

import appnorth
from devserver_admin import admin


def dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def main(api_url: str, app_id: str, data_dir: str) -> int:
    bundled = os.path.join(data_dir, "appdna-config.json")
    os.makedirs(data_dir, exist_ok=True)
    with open(bundled, "w", encoding="utf-8") as f:
        json.dump({"price": 4.99, "banner": "bundled"}, f)
    changed = threading.Event()

    with appnorth.Client(dead_url(), app_id, api_timeout_ms=1000, resource_timeout_ms=1000) as offline, \
            appnorth.Config(offline, data_dir, bundled_path=bundled) as config:
        print(f"1. server down: {appnorth.ConfigTier(config.source.tier).name} tier, "
              f"banner {config.get_string('banner')!r}")

    admin(api_url, "POST", f"/admin/apps/{app_id}/config", {"config": {"price": 9.99, "banner": "remote v1"}})
    with appnorth.Client(api_url, app_id) as client, \
            appnorth.Config(client, data_dir, bundled_path=bundled) as config:
        @config.on_update
        def on_change(values, changed_keys, tier):  # runs on a library thread
            print(f"   listener: {sorted(changed_keys)} changed, banner {values.get('banner')!r}")
            changed.set()

        config.refresh()
        print(f"2. server up: {config.source.tier.name} tier, price {config.get_double('price', 0.0)}")
        changed.clear()
        config.start_live()
        admin(api_url, "POST", f"/admin/apps/{app_id}/config", {"config": {"price": 7.5, "banner": "remote v2"}})
        got = changed.wait(15)
        print(f"3. published v2: delivered live {got}, banner {config.get_string('banner')!r}")

    with appnorth.Client(dead_url(), app_id, api_timeout_ms=1000, resource_timeout_ms=1000) as offline, \
            appnorth.Config(offline, data_dir, bundled_path=bundled) as config:
        print(f"4. restarted offline: {config.source.tier.name} tier, banner {config.get_string('banner')!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
