"""The binding covers include/appnorth.h: every exported function has an
entry in the declaration table with the right number of arguments, and the
constants agree with the header."""

from __future__ import annotations

import re
from typing import Dict, List

import pytest

import appnorth
from appnorth import _lib
from appnorth_test_support import HEADER


def _header_code() -> str:
    """The header without comments and preprocessor lines."""
    text = HEADER.read_text(encoding="utf-8")
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _header_functions() -> Dict[str, List[str]]:
    """{name: [parameter declarations]} for every APPNORTH_API function."""
    functions: Dict[str, List[str]] = {}
    pattern = re.compile(r"APPNORTH_API\b[^;{}()]*?\b(appnorth_\w+)\s*\(([^;]*?)\)\s*;", re.S)
    for match in pattern.finditer(_header_code()):
        params = " ".join(match.group(2).split())
        functions[match.group(1)] = [] if params in ("", "void") else [p.strip() for p in params.split(",")]
    return functions


def _header_enums() -> Dict[str, int]:
    return {name: int(value) for name, value in
            re.findall(r"\bAPPNORTH_(\w+)\s*=\s*(-?\d+)", _header_code())}


def _header_defines() -> Dict[str, str]:
    text = HEADER.read_text(encoding="utf-8")
    return dict(re.findall(r"^\s*#\s*define\s+APPNORTH_(\w+)[ \t]+([^\n]+?)\s*$", text, flags=re.M))


def test_header_is_found_and_parsed() -> None:
    functions = _header_functions()
    assert "appnorth_version" in functions
    assert "appnorth_client_list_ideas" in functions
    assert len(functions) >= 10


def test_every_header_function_is_declared_in_the_binding() -> None:
    declared = {d.name for d in _lib.DECLARATIONS}
    missing = sorted(set(_header_functions()) - declared)
    assert not missing, "appnorth._lib.DECLARATIONS has no entry for: " + ", ".join(missing)


def test_the_binding_declares_nothing_the_header_lacks() -> None:
    stale = sorted({d.name for d in _lib.DECLARATIONS} - set(_header_functions()))
    assert not stale, "declared in the binding but not in the header: " + ", ".join(stale)


def test_declaration_table_has_one_entry_per_function() -> None:
    names = [d.name for d in _lib.DECLARATIONS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("decl", _lib.DECLARATIONS, ids=lambda d: d.name)
def test_declared_argument_count_matches_header(decl: _lib.Declaration) -> None:
    params = _header_functions().get(decl.name)
    if params is None:
        pytest.skip("not in the header (reported by another test)")
    assert len(decl.argtypes) == len(params), f"{decl.name}: header has ({', '.join(params)})"
    # Functions ending in `appnorth_error *err` are error-checked.
    if params and params[-1].replace(" ", "").endswith("appnorth_error*err"):
        assert decl.errcheck is _lib.check_status, f"{decl.name} takes err but has no status errcheck"
        assert decl.argtypes[-1] is _lib.ErrorPtr


def test_returned_strings_are_never_c_char_p() -> None:
    import ctypes

    for decl in _lib.DECLARATIONS:
        assert decl.restype is not ctypes.c_char_p, decl.name


def test_status_constants_match_header() -> None:
    enums = _header_enums()
    statuses = {name: value for name, value in enums.items() if name == "OK" or name.startswith("E_")}
    assert statuses, "no status codes found in the header"
    mismatched = {name: (value, getattr(appnorth, name, None)) for name, value in statuses.items()
                  if getattr(appnorth, name, None) != value}
    assert not mismatched, f"header value vs appnorth constant: {mismatched}"
    # And every status has its own exception class.
    for name, value in statuses.items():
        if value:
            cls = appnorth.errors.error_class(value)
            assert cls is not appnorth.AppNorthError, name
            assert cls.status_code == value


def test_every_exported_constant_is_in_all() -> None:
    names = set(_header_enums()) | (set(_header_defines()) - _SKIPPED_DEFINES - {"ERROR_MESSAGE_SIZE"})
    missing = sorted(names - set(appnorth.__all__))
    assert not missing, f"not in appnorth.__all__: {missing}"


def test_every_header_enum_constant_is_exported_with_its_value() -> None:
    enums = _header_enums()
    assert {"LOG_DEBUG", "LOG_ERROR", "CONFIG_TIER_DEFAULT", "CONFIG_TIER_REMOTE"} <= set(enums)
    wrong = {name: (value, getattr(appnorth, name, "missing")) for name, value in enums.items()
             if getattr(appnorth, name, None) != value}
    assert not wrong, f"header value vs appnorth constant: {wrong}"


_SKIPPED_DEFINES = {"H", "API", "VERSION_MAJOR", "VERSION_MINOR", "VERSION_PATCH",
                    "VERSION_STRING", "VERSION_NUMBER"}


def _eval_define(text: str) -> int:
    if not re.fullmatch(r"[0-9()*+\- ]+", text):
        raise ValueError(text)
    return int(eval(text, {"__builtins__": {}}))  # digits and operators only


def test_every_numeric_header_limit_is_exported_with_its_value() -> None:
    defines = {name: value for name, value in _header_defines().items() if name not in _SKIPPED_DEFINES}
    assert {"MAX_SCREENSHOT_BYTES", "CONFIG_DEFAULT_TTL_SECONDS", "CONFIG_DEFAULT_BACKOFF_MAX_MS"} <= set(defines)
    wrong = {}
    for name, text in defines.items():
        value = _eval_define(text)
        exported = getattr(appnorth, name, None) if name != "ERROR_MESSAGE_SIZE" else _lib.ERROR_MESSAGE_SIZE
        if exported != value:
            wrong[name] = (value, exported)
    assert not wrong, f"header value vs appnorth constant: {wrong}"


def test_library_exports_every_declared_function() -> None:
    """The Swift build checks the library against the header; a library
    from an older build simply lacks the newer functions. Those raise a
    clear error when called instead of breaking the import."""
    missing = _lib.missing_functions()
    for name in missing:
        with pytest.raises(appnorth.InternalError, match=f"does not export {name}"):
            getattr(_lib.C, name)()
    if missing:
        pytest.skip(f"{_lib.LIBRARY_PATH} lacks {len(missing)} declared functions "
                    f"(older build): {', '.join(sorted(missing))}")


@pytest.mark.parametrize("decl", _lib.DECLARATIONS, ids=lambda d: d.name)
def test_each_function_is_bound_from_its_declaration(decl: _lib.Declaration) -> None:
    """Functions are bound on first use, from the table entry and nothing
    else: argument types, result type and error check."""
    if decl.name in _lib.missing_functions():
        pytest.skip("not exported by this (older) build")
    func = getattr(_lib.C, decl.name)
    assert getattr(_lib.C, decl.name) is func, "bound once, then a plain attribute"
    assert list(func.argtypes) == list(decl.argtypes)
    assert func.restype is decl.restype
    assert getattr(func, "errcheck", None) is decl.errcheck


def test_undeclared_functions_are_not_reachable() -> None:
    """Only table entries are bound: a name the table lacks (even one the
    library exports) raises AttributeError instead of an untyped call."""
    with pytest.raises(AttributeError, match="not declared"):
        _lib.C.appnorth_no_such_function
    name = next(iter(sorted(_lib.DECLARED_NAMES)))
    saved = _lib.BY_NAME.pop(name)
    try:
        had = name in vars(_lib.C)
        vars(_lib.C).pop(name, None)
        with pytest.raises(AttributeError):
            getattr(_lib.C, name)
    finally:
        _lib.BY_NAME[name] = saved
        if had:
            getattr(_lib.C, name)


def test_error_struct_and_version_macros_match_header() -> None:
    defines = _header_defines()
    assert int(defines["ERROR_MESSAGE_SIZE"]) == _lib.ERROR_MESSAGE_SIZE
    assert _lib.appnorth_error.message.size == _lib.ERROR_MESSAGE_SIZE
    assert int(defines["VERSION_MAJOR"]) == _lib.EXPECTED_MAJOR
    major, minor, patch = (int(defines[f"VERSION_{part}"]) for part in ("MAJOR", "MINOR", "PATCH"))
    assert int(defines["VERSION_NUMBER"]) == major * 10000 + minor * 100 + patch
