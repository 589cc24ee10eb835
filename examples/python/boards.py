"""List an app's boards and the ideas on each.

    python3 examples/python/boards.py API_URL APP_ID     e.g. http://127.0.0.1:8080 demo
"""

import sys

import appnorth


def main(api_url: str, app_id: str) -> int:
    print(f"libappnorth {appnorth.version()}")
    with appnorth.Client(api_url, app_id) as client:
        for board in client.list_boards()["boards"]:
            print(f"{board['name']} ({board['id']})")
            for idea in client.list_ideas(board=board["id"], limit=20)["ideas"]:
                print(f"  - {idea['title']} [{idea['status']}] votes {idea['votes']}")
        found = client.list_ideas(q="search", status="open")["ideas"]
        print(f"open ideas about search: {[idea['title'] for idea in found]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
