"""Module-level API and library loading (no server needed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import pytest

import appnorth
from appnorth import _lib
from appnorth_test_support import BINDING_DIR, HEADER


def _run_python(code: str, env_update: Dict[str, Optional[str]], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    for key, value in env_update.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=str(cwd),
                          capture_output=True, text=True, timeout=30)


# -- version and status names ------------------------------------------------

def test_version_is_the_header_version() -> None:
    header = HEADER.read_text()
    string_match = re.search(r'#define APPNORTH_VERSION_STRING "([^"]+)"', header)
    number_match = re.search(r"#define APPNORTH_VERSION_NUMBER (\d+)", header)
    assert string_match and number_match
    expected, number = string_match.group(1), int(number_match.group(1))
    assert appnorth.version() == expected
    assert appnorth.version_number() == number
    assert int(appnorth.version().split(".")[0]) == _lib.EXPECTED_MAJOR


def test_status_str_names_every_code() -> None:
    assert appnorth.status_str(appnorth.OK) == "ok"
    assert appnorth.status_str(appnorth.E_NETWORK) == "network error"
    assert appnorth.status_str(appnorth.E_WRONG_STATE) == "wrong state"
    codes = [value for name, value in vars(appnorth).items() if name == "OK" or name.startswith("E_")]
    names = {appnorth.status_str(code) for code in codes}
    assert len(names) == len(codes) and "unknown status" not in names, "every status has its own name"


def test_status_str_of_unknown_codes_is_static_text() -> None:
    assert appnorth.status_str(999) == "unknown status"
    assert appnorth.status_str(-1) == "unknown status"
    # Many calls: a static string that the binding must not free.
    for _ in range(1000):
        appnorth.status_str(5)


def test_status_str_refuses_values_ctypes_would_wrap() -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match="out of range"):
        appnorth.status_str(2 ** 32 + 5)
    with pytest.raises(TypeError):
        appnorth.status_str("5")  # type: ignore[arg-type]


def test_library_path_is_the_loaded_file() -> None:
    assert os.path.isfile(appnorth.LIBRARY_PATH)
    assert os.path.basename(appnorth.LIBRARY_PATH).startswith("libappnorth.so")
    assert appnorth.__version__


# -- the exception hierarchy --------------------------------------------------

@pytest.mark.parametrize("code,cls", [
    (appnorth.E_INVALID_ARGUMENT, appnorth.InvalidArgumentError),
    (appnorth.E_INVALID_JSON, appnorth.InvalidJSONError),
    (appnorth.E_INVALID_UTF8, appnorth.InvalidUTF8Error),
    (appnorth.E_TOO_LARGE, appnorth.TooLargeError),
    (appnorth.E_NETWORK, appnorth.NetworkError),
    (appnorth.E_VALIDATION, appnorth.ValidationError),
    (appnorth.E_AUTHENTICATION, appnorth.AuthenticationError),
    (appnorth.E_NOT_FOUND, appnorth.NotFoundError),
    (appnorth.E_CONFLICT, appnorth.ConflictError),
    (appnorth.E_SERVER, appnorth.ServerError),
    (appnorth.E_HTTP, appnorth.HTTPError),
    (appnorth.E_STORAGE, appnorth.StorageError),
    (appnorth.E_QUEUE_FULL, appnorth.QueueFullError),
    (appnorth.E_WRONG_STATE, appnorth.WrongStateError),
    (appnorth.E_INTERNAL, appnorth.InternalError),
    (appnorth.E_TIMEOUT, appnorth.TimeoutError),
])
def test_each_status_maps_to_its_exception(code: int, cls: type) -> None:
    error = appnorth.errors.make_error(code, "detail", 0)
    assert type(error) is cls
    assert isinstance(error, appnorth.AppNorthError)
    assert (error.code, error.http_status, error.message) == (code, 0, "detail")


def test_unknown_status_maps_to_the_base_class() -> None:
    error = appnorth.errors.make_error(77, "odd", 0)
    assert type(error) is appnorth.AppNorthError and error.code == 77


def test_argument_errors_are_value_errors() -> None:
    for cls in (appnorth.InvalidArgumentError, appnorth.InvalidJSONError,
                appnorth.InvalidUTF8Error, appnorth.TooLargeError):
        assert issubclass(cls, ValueError)
    assert issubclass(appnorth.WrongStateError, RuntimeError)
    assert issubclass(appnorth.TimeoutError, TimeoutError) and appnorth.TimeoutError is not TimeoutError


def test_error_text_states_the_http_status_once() -> None:
    error = appnorth.errors.make_error(appnorth.E_SERVER, "HTTP 503 injected", 503)
    assert str(error) == "HTTP 503 injected"
    assert "http_status=503" in repr(error)
    plain = appnorth.errors.make_error(appnorth.E_SERVER, "the server failed", 503)
    assert str(plain) == "the server failed (HTTP 503)"


def test_network_errors_are_connection_errors() -> None:
    assert issubclass(appnorth.NetworkError, ConnectionError)
    assert issubclass(appnorth.NetworkError, OSError)


def test_star_import_keeps_the_builtin_timeout_error() -> None:
    scope: dict = {}
    exec("from appnorth import *", scope)
    assert "TimeoutError" not in scope and scope["AppNorthTimeoutError"] is appnorth.TimeoutError
    assert issubclass(appnorth.AppNorthTimeoutError, TimeoutError)
    try:
        raise appnorth.errors.make_error(appnorth.E_TIMEOUT, "slow", 0)
    except TimeoutError as caught:
        assert isinstance(caught, appnorth.AppNorthError)


def test_enum_like_values_are_int_enums() -> None:
    import enum
    for cls in (appnorth.Status, appnorth.LogLevel, appnorth.Source, appnorth.NetworkType,
                appnorth.Consent, appnorth.ConfigTier):
        assert issubclass(cls, enum.IntEnum)
    assert appnorth.E_NETWORK is appnorth.Status.E_NETWORK and appnorth.E_NETWORK == 5
    assert appnorth.CONSENT_UNKNOWN is appnorth.Consent.UNKNOWN
    assert appnorth.errors.make_error(5, "x").code is appnorth.Status.E_NETWORK
    assert appnorth.errors.make_error(77, "x").code == 77


# -- loading --------------------------------------------------------------------

def _copy_package(dest_root: Path) -> Path:
    """A copy of the package three levels below dest_root (like
    <repo>/bindings/python/appnorth), so its repo-relative build paths point
    into dest_root, where there are no builds."""
    package = dest_root / "bindings" / "python" / "appnorth"
    shutil.copytree(BINDING_DIR / "appnorth", package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    return package


def test_library_env_var_pointing_nowhere_fails_with_instructions(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "libappnorth.so"
    result = _run_python("import appnorth", {"APPNORTH_LIBRARY": str(missing)}, tmp_path)
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert str(missing) in result.stderr
    assert "make wheel" in result.stderr and "APPNORTH_LIBRARY" in result.stderr


def test_no_library_anywhere_lists_only_the_places_tried(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)  # not a checkout: no include/appnorth.h above it
    (tmp_path / "dist" / "lib").mkdir(parents=True)
    shutil.copy(appnorth.LIBRARY_PATH, tmp_path / "dist" / "lib" / "libappnorth.so")
    result = _run_python("import appnorth", {"APPNORTH_LIBRARY": None, "LD_LIBRARY_PATH": None,
                                             "PYTHONPATH": str(package.parent)}, tmp_path)
    assert result.returncode != 0
    assert str(package / "libappnorth.so*") in result.stderr
    assert "libappnorth.so.0 (the system search path" in result.stderr
    assert str(tmp_path / "dist") not in result.stderr, "an installed package never looks into build folders"
    assert "make wheel" in result.stderr and "APPNORTH_LIBRARY" in result.stderr


def test_a_checkout_uses_its_build_folders(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "appnorth.h").write_text("/* marker */\n")
    (tmp_path / "dist" / "lib").mkdir(parents=True)
    shutil.copy(appnorth.LIBRARY_PATH, tmp_path / "dist" / "lib" / "libappnorth.so")
    result = _run_python("import appnorth; print(appnorth.LIBRARY_PATH)",
                         {"APPNORTH_LIBRARY": None, "LD_LIBRARY_PATH": None,
                          "PYTHONPATH": str(package.parent)}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "dist" / "lib" / "libappnorth.so")


def test_the_system_search_path_is_tried_by_soname(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)
    libdir = tmp_path / "system-lib"
    libdir.mkdir()
    shutil.copy(appnorth.LIBRARY_PATH, libdir / "libappnorth.so.0")
    result = _run_python("import appnorth; print(appnorth.LIBRARY_PATH)",
                         {"APPNORTH_LIBRARY": None, "LD_LIBRARY_PATH": str(libdir),
                          "PYTHONPATH": str(package.parent)}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(libdir / "libappnorth.so.0")


def test_library_env_var_may_name_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "custom"
    folder.mkdir()
    shutil.copy(appnorth.LIBRARY_PATH, folder / "libappnorth.so.0")
    result = _run_python("import appnorth; print(appnorth.LIBRARY_PATH)",
                         {"APPNORTH_LIBRARY": str(folder)}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(folder / "libappnorth.so.0")


def test_library_in_the_package_folder_is_found(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)
    shutil.copy(appnorth.LIBRARY_PATH, package / "libappnorth.so")
    result = _run_python("import appnorth; print(appnorth.LIBRARY_PATH); print(appnorth.version())",
                         {"APPNORTH_LIBRARY": None, "PYTHONPATH": str(package.parent)}, tmp_path)
    assert result.returncode == 0, result.stderr
    path, version = result.stdout.split()
    assert path == str(package / "libappnorth.so")
    assert version == appnorth.version()


def test_library_env_var_wins(tmp_path: Path) -> None:
    copy = tmp_path / "custom" / "libappnorth.so"
    copy.parent.mkdir()
    shutil.copy(appnorth.LIBRARY_PATH, copy)
    result = _run_python("import appnorth; print(appnorth.LIBRARY_PATH)",
                         {"APPNORTH_LIBRARY": str(copy)}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(copy)


def test_library_is_loaded_with_cdll_not_pydll() -> None:
    import ctypes

    assert type(_lib.DLL) is ctypes.CDLL
    assert _lib.DLL._func_flags_ == ctypes.CDLL._func_flags_  # GIL released during calls


# -- import cost ---------------------------------------------------------------

#: Modules ``import appnorth`` must not import: each is imported where first
#: needed (logging by a Client, json by the first JSON value, typing by the
#: config's typed names). Together they were a third of the import time
#: (bench/README.md, "Python `import appnorth`").
DEFERRED_MODULES = {"typing", "logging", "json", "re", "traceback", "warnings", "dataclasses", "inspect",
                    "tokenize", "textwrap", "pathlib", "appnorth._config_types"}

IMPORT_PROBE = """
import sys
before = set(sys.modules)
import appnorth
print(" ".join(sorted(set(sys.modules) - before)))
print(" ".join(sorted(vars(appnorth._lib.C))))
namespace = {}
exec("from appnorth import *", namespace)
print(all(name in namespace for name in appnorth.__all__ if name != "TimeoutError"))
print(issubclass(appnorth.ConfigSource, tuple), issubclass(appnorth.FetchStatus, tuple),
      appnorth.ConfigSource.__module__, "Callable" in repr(appnorth.ConfigListener))
"""


def test_import_defers_heavy_modules_and_function_bindings(tmp_path: Path) -> None:
    result = _run_python(IMPORT_PROBE, {}, tmp_path)
    assert result.returncode == 0, result.stderr
    imported, bound, star, typed = result.stdout.splitlines()
    assert not DEFERRED_MODULES & set(imported.split()), imported
    # Only the version check's function is bound at import; the rest on first use.
    assert set(bound.split()) <= {"appnorth_version"}, bound
    assert star == "True"
    assert typed == "True True appnorth.config True"


def test_config_typed_names_are_the_same_objects_everywhere() -> None:
    from appnorth import _config_types, config

    for name in ("ConfigSource", "FetchStatus", "ConfigListener"):
        assert getattr(appnorth, name) is getattr(config, name) is getattr(_config_types, name)
    with pytest.raises(AttributeError):
        appnorth.NoSuchName  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        config.NoSuchName  # type: ignore[attr-defined]
