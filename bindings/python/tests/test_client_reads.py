"""Reading boards and ideas from the real dev server, with every filter and
cursor pagination. Each test arranges state through /admin, acts through
the binding and checks both the result and what the server received."""

from __future__ import annotations

import json
import threading
from typing import Any, Dict, List

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin


@pytest.fixture
def catalogue(admin: Admin) -> Dict[str, Any]:
    """Two boards; five ideas with different statuses and words."""
    features = admin.add_board(APP, "Features", "New things")
    bugs = admin.add_board(APP, "Bugs", "Broken things")
    ideas = [
        admin.add_idea(APP, features["id"], "Dark mode", "A dark theme for night reading", "planned"),
        admin.add_idea(APP, features["id"], "Offline sync", "Queue changes while offline", "in_progress"),
        admin.add_idea(APP, features["id"], "Faster search", "Results as you type", "open"),
        admin.add_idea(APP, bugs["id"], "Crash on login", "Emoji in the password crashes", "done"),
        admin.add_idea(APP, bugs["id"], "Blurry icons", "Icons look DARK and blurry", "open"),
    ]
    return {"features": features, "bugs": bugs, "ideas": ideas}


def _ids(page: Dict[str, Any]) -> List[str]:
    return [idea["id"] for idea in page["ideas"]]


def test_list_boards_of_an_empty_app(client: appnorth.Client) -> None:
    assert client.list_boards() == {"boards": []}


def test_list_boards_returns_the_seeded_boards(client: appnorth.Client, catalogue: Dict[str, Any],
                                               admin: Admin) -> None:
    boards = client.list_boards()["boards"]
    assert [(b["id"], b["name"], b["description"]) for b in boards] == [
        (catalogue["features"]["id"], "Features", "New things"),
        (catalogue["bugs"]["id"], "Bugs", "Broken things"),
    ]
    (request,) = admin.requests(expect=1)
    assert (request["method"], request["path"]) == ("GET", f"/v1/apps/{APP}/boards")


def test_list_boards_json_is_the_servers_text(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    text = client.list_boards_json()
    assert isinstance(text, str)
    assert json.loads(text) == {"boards": catalogue_boards(catalogue)}


def catalogue_boards(catalogue: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [catalogue["features"], catalogue["bugs"]]


def test_non_ascii_text_round_trips(client: appnorth.Client, admin: Admin) -> None:
    board = admin.add_board(APP, "Idées ✨", "Über 日本語 🚀")
    assert client.list_boards()["boards"] == [board]


def test_list_ideas_without_filters(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    page = client.list_ideas()
    assert _ids(page) == [idea["id"] for idea in catalogue["ideas"]]
    assert page["next_cursor"] is None


def test_list_ideas_by_board(client: appnorth.Client, catalogue: Dict[str, Any], admin: Admin) -> None:
    page = client.list_ideas(board=catalogue["bugs"]["id"])
    assert _ids(page) == [i["id"] for i in catalogue["ideas"][3:]]
    assert f"board={catalogue['bugs']['id']}" in admin.requests(expect=1)[-1]["query"]


def test_list_ideas_by_search_is_case_insensitive(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    page = client.list_ideas(q="dark")
    assert [i["title"] for i in page["ideas"]] == ["Dark mode", "Blurry icons"]


def test_list_ideas_search_text_is_url_encoded(client: appnorth.Client, admin: Admin,
                                               catalogue: Dict[str, Any]) -> None:
    page = client.list_ideas(q="as you type")
    assert [i["title"] for i in page["ideas"]] == ["Faster search"]
    assert " " not in admin.requests(expect=1)[-1]["query"]


def test_list_ideas_by_status(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    assert [i["title"] for i in client.list_ideas(status="open")["ideas"]] == ["Faster search", "Blurry icons"]
    assert [i["title"] for i in client.list_ideas(status="done")["ideas"]] == ["Crash on login"]
    assert client.list_ideas(status="declined")["ideas"] == []


def test_list_ideas_filters_combine(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    page = client.list_ideas(board=catalogue["features"]["id"], status="open", q="search")
    assert [i["title"] for i in page["ideas"]] == ["Faster search"]


def test_list_ideas_limit(client: appnorth.Client, catalogue: Dict[str, Any], admin: Admin) -> None:
    page = client.list_ideas(limit=2)
    assert _ids(page) == [i["id"] for i in catalogue["ideas"][:2]]
    assert page["next_cursor"]
    assert "limit=2" in admin.requests(expect=1)[-1]["query"]


def test_cursor_pagination_visits_every_idea_once(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    seen: List[str] = []
    cursor = None
    pages = 0
    while True:
        page = client.list_ideas(limit=2, cursor=cursor)
        pages += 1
        seen += _ids(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [i["id"] for i in catalogue["ideas"]]


def test_cursor_pagination_keeps_filters(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    first = client.list_ideas(board=catalogue["features"]["id"], limit=2)
    second = client.list_ideas(board=catalogue["features"]["id"], limit=2, cursor=first["next_cursor"])
    assert _ids(first) + _ids(second) == [i["id"] for i in catalogue["ideas"][:3]]
    assert second["next_cursor"] is None


def test_list_ideas_json_accepts_str_bytes_and_none(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    all_ids = [i["id"] for i in catalogue["ideas"]]
    assert _ids(json.loads(client.list_ideas_json(None))) == all_ids
    assert _ids(json.loads(client.list_ideas_json('{"status": "done"}'))) == [all_ids[3]]
    assert _ids(json.loads(client.list_ideas_json(b'{"limit": 1}'))) == [all_ids[0]]


def test_scope_of_an_anonymous_client(server_url: str) -> None:
    with appnorth.Client(server_url + "/", APP) as client:
        assert client.scope == f"{server_url}|{APP}|anonymous"


def test_scope_uses_the_lowercased_email(server_url: str) -> None:
    with appnorth.Client(server_url, APP, email="Ada@Example.COM", token="tok") as client:
        assert client.scope == f"{server_url}|{APP}|ada@example.com"


def test_one_client_from_several_threads(client: appnorth.Client, catalogue: Dict[str, Any]) -> None:
    results: List[int] = []
    failures: List[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(len(client.list_ideas()["ideas"]))
        except BaseException as exc:  # noqa: BLE001 - collected for the assert
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=FAST_TIMEOUT_MS / 1000 * 10)
    assert not failures
    assert results == [5] * 20
