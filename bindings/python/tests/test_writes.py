"""Community writes through the client: ideas, comments, votes, chat and
feedback reach the server once, with their idempotency keys, and bad
content is refused before anything is sent."""

from __future__ import annotations

from typing import Any, Dict

import pytest

import appnorth
from appnorth_test_support import APP, Admin


@pytest.fixture
def board(admin: Admin) -> Dict[str, Any]:
    return admin.add_board(APP, "Features")


@pytest.fixture
def idea(admin: Admin, board: Dict[str, Any]) -> Dict[str, Any]:
    return admin.add_idea(APP, board["id"], "Dark mode")


def test_submit_idea_is_stored_by_the_server(client: appnorth.Client, admin: Admin,
                                             board: Dict[str, Any]) -> None:
    answer = client.submit_idea(board["id"], "Offline sync", "Queue it all")
    assert answer["idea"]["title"] == "Offline sync"
    (stored,) = admin.state(APP)["ideas"]
    assert (stored["id"], stored["title"], stored["body"], stored["author"]) == (
        answer["idea"]["id"], "Offline sync", "Queue it all", "anonymous")
    (request,) = admin.requests(expect=1)
    assert request["headers"].get("Idempotency-Key")


def test_same_idempotency_key_is_applied_once(client: appnorth.Client, admin: Admin,
                                              board: Dict[str, Any]) -> None:
    first = client.submit_idea(board["id"], "Once", idempotency_key="key-1")
    second = client.submit_idea(board["id"], "Once", idempotency_key="key-1")
    assert first == second
    assert len(admin.state(APP)["ideas"]) == 1
    keys = [r["headers"]["Idempotency-Key"] for r in admin.requests(expect=2)]
    assert keys == ["key-1", "key-1"]


def test_reused_key_with_another_payload_is_a_conflict(client: appnorth.Client, admin: Admin,
                                                        board: Dict[str, Any]) -> None:
    client.submit_idea(board["id"], "First", idempotency_key="key-2")
    with pytest.raises(appnorth.ConflictError) as info:
        client.submit_idea(board["id"], "Second", idempotency_key="key-2")
    assert info.value.http_status == 409
    assert [i["title"] for i in admin.state(APP)["ideas"]] == ["First"]


def test_comment_and_list_comments(client: appnorth.Client, admin: Admin, idea: Dict[str, Any]) -> None:
    answer = client.submit_comment(idea["id"], "Yes please")
    assert client.list_comments(idea["id"])["comments"] == [answer["comment"]]
    assert [c["body"] for c in admin.state(APP)["comments"]] == ["Yes please"]


def test_comment_on_unknown_idea_is_not_found(client: appnorth.Client) -> None:
    with pytest.raises(appnorth.NotFoundError):
        client.submit_comment("i_424242", "hello?")


def test_second_vote_is_a_conflict(client: appnorth.Client, admin: Admin, idea: Dict[str, Any]) -> None:
    assert client.vote(idea["id"])["vote"]["votes"] == 1
    with pytest.raises(appnorth.ConflictError):
        client.vote(idea["id"])
    assert len(admin.state(APP)["votes"]) == 1


def test_chat_messages(client: appnorth.Client, admin: Admin) -> None:
    sent = client.send_chat_message("Hello support")
    assert client.list_chat_messages()["messages"] == [sent["message"]]


def test_feedback_with_diagnostics_and_screenshots(client: appnorth.Client, admin: Admin) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    answer = client.submit_feedback("It crashed", diagnostics={"os": "linux", "free_mb": 512},
                                    screenshots=[(png, "image/png"), (b"\xff\xd8\xff" * 10, "image/jpeg")])
    assert answer["feedback"]["screenshot_count"] == 2
    (stored,) = admin.state(APP)["feedback"]
    assert stored["text"] == "It crashed"
    assert stored["diagnostics"] == {"os": "linux", "free_mb": 512}
    assert stored["screenshots"] == [{"content_type": "image/png", "size": len(png)},
                                     {"content_type": "image/jpeg", "size": 30}]


def test_feedback_object_can_be_built_and_reused(client: appnorth.Client, admin: Admin) -> None:
    with appnorth.Feedback("Twice") as feedback:
        feedback.set_diagnostics('{"price": 9.99}')
        client.submit_feedback(feedback)
        client.submit_feedback(feedback)
    assert feedback.closed
    assert [f["diagnostics"] for f in admin.state(APP)["feedback"]] == [{"price": 9.99}] * 2


@pytest.mark.parametrize("kwargs,error", [
    ({"feedback": ""}, appnorth.ValidationError),
    ({"feedback": None}, appnorth.ValidationError),
    ({"feedback": "x", "diagnostics": "[1]"}, appnorth.InvalidJSONError),
    ({"feedback": "x", "diagnostics": "{nope"}, appnorth.InvalidJSONError),
    ({"feedback": "x", "screenshots": [(b"GIF89a", "image/gif")]}, appnorth.InvalidArgumentError),
    ({"feedback": "x", "screenshots": [(b"", "image/png")]}, appnorth.InvalidArgumentError),
    ({"feedback": "x", "screenshots": [(b"1", "image/png")] * 6}, appnorth.TooLargeError),
    ({"feedback": "x", "screenshots": [(b"1" * (appnorth.MAX_SCREENSHOT_BYTES + 1), "image/png")]},
     appnorth.TooLargeError),
    ({"feedback": "x" * (appnorth.MAX_FEEDBACK_TEXT_CHARS + 1)}, appnorth.TooLargeError),
])
def test_bad_feedback_is_refused_before_sending(client: appnorth.Client, admin: Admin,
                                                kwargs: Dict[str, Any], error: type) -> None:
    with pytest.raises(error) as info:
        client.submit_feedback(**kwargs)
    assert isinstance(info.value, appnorth.AppNorthError) and info.value.message
    admin.assert_nothing_sent()


def test_oversize_feedback_values_are_refused_by_their_setters(client: appnorth.Client, admin: Admin) -> None:
    feedback = appnorth.Feedback("kept", diagnostics={"kept": True})
    with pytest.raises(appnorth.TooLargeError):
        feedback.set_text("x" * (appnorth.MAX_FEEDBACK_TEXT_CHARS + 1))
    limit = appnorth.MAX_DIAGNOSTICS_BYTES
    with pytest.raises(appnorth.TooLargeError, match="diagnostics"):
        feedback.set_diagnostics('{"log":"' + "x" * limit + '"}')
    with pytest.raises(appnorth.TooLargeError):
        feedback.set_diagnostics("[" * (50 * 1024 * 1024))  # measured before parsing
    exact = '{"log":"' + "x" * (limit - 10) + '"}'
    assert len(exact) == limit
    feedback.set_diagnostics(exact)
    feedback.set_diagnostics({"kept": True, "nul": "a\x00b"})  # sent as \u0000
    # Offline, what is queued is what the setters kept.
    queue = appnorth.OfflineQueue(appnorth.Storage.memory())
    admin.outage()
    assert queue.submit_feedback(client, feedback) is False
    admin.clear_faults()
    assert queue.flush(client) == 1
    (stored,) = admin.state(APP)["feedback"]
    assert stored["text"] == "kept" and stored["diagnostics"] == {"kept": True, "nul": "a\x00b"}
    feedback.close()
    queue.close()


def test_an_oversize_api_url_is_refused() -> None:
    with pytest.raises(appnorth.TooLargeError):
        appnorth.Client("http://h/" + "p" * appnorth.MAX_URL_BYTES, APP)


@pytest.mark.parametrize("title,body,error", [
    ("   ", None, appnorth.ValidationError),
    ("x" * (appnorth.MAX_TITLE_CHARS + 1), None, appnorth.TooLargeError),
    ("ok", "x" * (appnorth.MAX_TEXT_CHARS + 1), appnorth.TooLargeError),
    (None, None, appnorth.InvalidArgumentError),
    (b"\xff\xfe", None, appnorth.InvalidUTF8Error),
])
def test_bad_ideas_are_refused_before_sending(client: appnorth.Client, admin: Admin, board: Dict[str, Any],
                                              title: Any, body: Any, error: type) -> None:
    with pytest.raises(error):
        client.submit_idea(board["id"], title, body)
    admin.assert_nothing_sent()


@pytest.mark.parametrize("key", ["clé", "k" * 256, "tab\there", ""])
def test_bad_idempotency_key_is_refused(client: appnorth.Client, admin: Admin, board: Dict[str, Any],
                                        key: str) -> None:
    """Keys are 1 to 255 printable ASCII characters (the header's rule)."""
    with pytest.raises(appnorth.InvalidArgumentError, match="idempotency key"):
        client.submit_idea(board["id"], "t", idempotency_key=key)
    admin.assert_nothing_sent()


def test_title_limit_counts_characters_not_bytes(client: appnorth.Client, board: Dict[str, Any]) -> None:
    title = "é" * appnorth.MAX_TITLE_CHARS  # 400 UTF-8 bytes
    assert client.submit_idea(board["id"], title)["idea"]["title"] == title
