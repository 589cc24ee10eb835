"""Failures reach Python as the right exception, with the library's message
and the server's HTTP status: credentials, server faults, network outages
and bad inputs."""

from __future__ import annotations

from typing import Optional

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin

EMAIL = "Ada@Example.com"
TOKEN = "tok-3f9a-correct"


# -- credentials ------------------------------------------------------------

def test_wrong_token_is_an_authentication_error(server_url: str, admin: Admin) -> None:
    admin.add_user(APP, EMAIL, TOKEN)
    with appnorth.Client(server_url, APP, email=EMAIL, token="tok-wrong",
                         api_timeout_ms=FAST_TIMEOUT_MS) as client:
        with pytest.raises(appnorth.AuthenticationError) as info:
            client.list_boards()
    assert info.value.code == appnorth.E_AUTHENTICATION
    assert info.value.http_status == 401
    assert "unknown credential" in info.value.message
    assert "tok-wrong" not in info.value.message


def test_right_token_sends_the_email_and_the_server_never_logs_the_token(server_url: str,
                                                                       admin: Admin) -> None:
    admin.add_user(APP, EMAIL, TOKEN)
    board = admin.add_board(APP, "Members only")
    with appnorth.Client(server_url, APP, email=EMAIL, token=TOKEN,
                         api_timeout_ms=FAST_TIMEOUT_MS) as client:
        assert client.list_boards()["boards"] == [board]
    (request,) = admin.requests(expect=1)
    headers = {name.lower(): value for name, value in request["headers"].items()}
    assert headers["appnorth-user-email"] == EMAIL
    assert headers["authorization"] == "Bearer ***"
    assert TOKEN not in repr(request)


def test_anonymous_client_sends_no_credential_headers(client: appnorth.Client, admin: Admin) -> None:
    client.list_boards()
    (request,) = admin.requests(expect=1)
    names = {name.lower() for name in request["headers"]}
    assert "authorization" not in names and "appnorth-user-email" not in names


@pytest.mark.parametrize("email,token", [("ada@example.com", None), (None, "tok")])
def test_half_a_credential_is_refused(server_url: str, email: object, token: object) -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match="both"):
        appnorth.Client(server_url, APP, email=email, token=token)  # type: ignore[arg-type]


def test_malformed_credential_is_refused(server_url: str) -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match="email"):
        appnorth.Client(server_url, APP, email="not-an-address", token="tok")
    with pytest.raises(appnorth.InvalidArgumentError, match="token"):
        appnorth.Client(server_url, APP, email="a@b.c", token="has space")


# -- server faults -------------------------------------------------------------

def test_server_5xx_is_a_server_error_with_http_status(client: appnorth.Client, admin: Admin) -> None:
    admin.add_fault(status=503, path_prefix=f"/v1/apps/{APP}/boards")
    with pytest.raises(appnorth.ServerError) as info:
        client.list_boards()
    assert info.value.http_status == 503
    assert info.value.code == appnorth.E_SERVER
    assert "injected fault" in info.value.message
    assert admin.requests(expect=1)[0]["fault"] == "status"
    # The fault was for one request only.
    assert client.list_boards() == {"boards": []}


def test_unexpected_status_is_an_http_error(client: appnorth.Client, admin: Admin) -> None:
    admin.add_fault(status=418)
    with pytest.raises(appnorth.HTTPError) as info:
        client.list_ideas()
    assert info.value.http_status == 418


def test_unknown_board_is_not_found(client: appnorth.Client) -> None:
    with pytest.raises(appnorth.NotFoundError) as info:
        client.list_ideas(board="b_999999")
    assert info.value.http_status == 404
    assert "b_999999" in info.value.message


def test_bad_cursor_is_a_validation_error(client: appnorth.Client) -> None:
    with pytest.raises(appnorth.ValidationError) as info:
        client.list_ideas(cursor="not-a-cursor")
    assert info.value.http_status == 400
    assert "cursor" in info.value.message


def test_non_object_success_body_is_invalid_json(client: appnorth.Client, admin: Admin) -> None:
    admin.add_fault(status=200, body="<html>proxy login</html>")
    with pytest.raises(appnorth.InvalidJSONError):
        client.list_boards()


def test_unreachable_server_is_a_network_error(closed_port: int) -> None:
    with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP,
                         api_timeout_ms=FAST_TIMEOUT_MS) as client:
        with pytest.raises(appnorth.NetworkError) as info:
            client.list_boards()
    assert info.value.http_status == 0
    assert isinstance(info.value, appnorth.AppNorthError) and info.value.message


def test_dropped_connection_is_a_network_error(client: appnorth.Client, admin: Admin) -> None:
    admin.add_fault(drop=True)
    with pytest.raises(appnorth.NetworkError) as info:
        client.list_ideas()
    assert info.value.http_status == 0
    assert admin.requests(expect=1)[-1]["fault"] == "drop"


def test_slow_server_times_out_as_a_network_error(server_url: str, admin: Admin) -> None:
    # The server holds the request until the release: only the client's
    # 200 ms timeout can end the call.
    admin.add_fault(delay_ms=600_000)
    with appnorth.Client(server_url, APP, api_timeout_ms=200) as client:
        with pytest.raises(appnorth.NetworkError):
            client.list_boards()
    admin.wait_held(1)
    # Let the server finish the held request, so it is not logged during
    # the next test.
    admin.release()
    assert admin.requests(expect=1)[0]["fault"] == "delay"


# -- bad inputs: refused before any request ------------------------------------

@pytest.mark.parametrize("app_id,match", [
    (None, "app_id is NULL"),
    ("", "1 to 128"),
    ("bad app!", "A-Z a-z 0-9"),
    ("x" * 129, "1 to 128"),
])
def test_bad_app_id(server_url: str, app_id: object, match: str) -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match=match) as info:
        appnorth.Client(server_url, app_id)  # type: ignore[arg-type]
    assert info.value.code == appnorth.E_INVALID_ARGUMENT


@pytest.mark.parametrize("url,match", [
    (None, "api_url is NULL"),
    ("", "http:// or https://"),
    ("ftp://example.com", "http:// or https://"),
    ("http://", "no host"),
    ("http://:8080", "no host"),
    ("http://exa mple.com", "without spaces"),
    ("http://example.com/?x=1", "query"),
])
def test_bad_api_url(url: object, match: str) -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match=match):
        appnorth.Client(url, APP)  # type: ignore[arg-type]


def test_invalid_utf8_bytes_are_refused_by_the_library(server_url: str) -> None:
    with pytest.raises(appnorth.InvalidUTF8Error) as info:
        appnorth.Client(b"http://127.0.0.1/\xff\xfe", APP)
    assert info.value.code == appnorth.E_INVALID_UTF8
    assert "api_url" in info.value.message
    with pytest.raises(appnorth.InvalidUTF8Error):
        appnorth.Client(server_url, APP, email=b"ada\xc3@example.com", token=b"tok")


def test_unencodable_str_is_refused_by_the_binding(server_url: str) -> None:
    with pytest.raises(appnorth.InvalidUTF8Error, match="app_id"):
        appnorth.Client(server_url, "app\ud800")


def test_embedded_nul_is_refused_instead_of_truncated(server_url: str) -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match="NUL"):
        appnorth.Client(server_url, "app\0other")


def test_wrong_argument_types_are_type_errors(server_url: str) -> None:
    with pytest.raises(TypeError, match="app_id"):
        appnorth.Client(server_url, 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="api_timeout_ms"):
        appnorth.Client(server_url, APP, api_timeout_ms="100")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="api_timeout_ms"):
        appnorth.Client(server_url, APP, api_timeout_ms=True)


@pytest.mark.parametrize("api,resource", [(0, None), (600_001, None), (None, -5), (2 ** 32 + 1000, None)])
def test_bad_timeouts(server_url: str, api: object, resource: object) -> None:
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Client(server_url, APP, api_timeout_ms=api, resource_timeout_ms=resource)  # type: ignore[arg-type]


@pytest.mark.parametrize("query,error,match", [
    ("not json", appnorth.InvalidJSONError, None),
    ("[1, 2]", appnorth.InvalidJSONError, "object"),
    ('{"bogus": 1}', appnorth.InvalidJSONError, "unknown key"),
    ('{"limit": "5"}', appnorth.InvalidJSONError, "integer"),
    ('{"board": 7}', appnorth.InvalidJSONError, "string"),
    ('{"limit": 0}', appnorth.InvalidArgumentError, "1 to 100"),
    ('{"status": "someday"}', appnorth.InvalidArgumentError, "status"),
    (b'{"q": "\xff"}', appnorth.InvalidUTF8Error, None),
])
def test_bad_idea_queries_are_refused_before_any_request(client: appnorth.Client, admin: Admin,
                                                         query: object, error: type, match: Optional[str]) -> None:
    with pytest.raises(error, match=match) as info:
        client.list_ideas_json(query)  # type: ignore[arg-type]
    assert isinstance(info.value, appnorth.AppNorthError) and info.value.message
    admin.assert_nothing_sent()


def test_bad_keyword_filters_are_refused(client: appnorth.Client, admin: Admin) -> None:
    with pytest.raises(appnorth.InvalidArgumentError):
        client.list_ideas(limit=101)
    with pytest.raises(appnorth.InvalidJSONError):
        client.list_ideas(limit=True)  # type: ignore[arg-type]
    with pytest.raises(appnorth.InvalidArgumentError):
        client.list_ideas(status="someday")
    admin.assert_nothing_sent()
