"""The config's typed names: :class:`ConfigSource`, :class:`FetchStatus`
and :data:`ConfigListener`, re-exported by :mod:`appnorth.config` and
:mod:`appnorth`.

They live apart because they need :mod:`typing`, whose import alone is
about a sixth of ``import appnorth``: this module is imported the first
time one of them is used (``config.source``, or the name itself).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional

from . import _lib, errors

__all__ = ["ConfigListener", "ConfigSource", "ConfigStatus", "ConfigStatusListener", "FetchStatus"]

#: A listener: ``fn(config, changed_keys, tier)``. ``config`` is the new
#: effective config (parsed), ``changed_keys`` the top-level keys added,
#: removed or changed, ``tier`` a CONFIG_TIER_* value.
ConfigListener = Callable[[Dict[str, Any], List[str], int], Any]


class ConfigSource(NamedTuple):
    """Where the effective config came from."""

    #: CONFIG_TIER_REMOTE, _CACHED, _BUNDLED or _DEFAULT.
    tier: _lib.ConfigTier
    #: When it was last fetched or confirmed by the server, wall milliseconds
    #: since the epoch; 0 for the bundled and default tiers.
    fetched_ms: int


class FetchStatus(NamedTuple):
    """The outcome of the latest exchange with the config endpoints."""

    #: None after a success (a 304 included) or before any exchange; else the
    #: failure as an exception instance (not raised), e.g. InvalidJSONError
    #: for a rejected payload, NetworkError, ServerError (``http_status``).
    error: Optional[errors.AppNorthError]
    #: When that exchange ended, wall milliseconds; 0 if none happened yet.
    time_ms: int


class ConfigStatus(NamedTuple):
    """The config's data-source status (``appnorth_config_status``)."""

    #: CONFIG_STATE_INITIALIZING, _VALID, _INTERRUPTED, _OFFLINE or _OFF.
    state: _lib.ConfigState
    #: When that state began, wall milliseconds since the epoch.
    since_ms: int
    #: The last failure as an exception instance (not raised), kept after a
    #: recovery; None before the first.
    last_error: Optional[errors.AppNorthError]
    #: When it happened, wall milliseconds; 0 before the first.
    last_error_ms: int


#: A status listener: ``fn(status)`` with a :class:`ConfigStatus`.
ConfigStatusListener = Callable[[ConfigStatus], Any]


# Where users find them (repr, pickle, documentation).
ConfigSource.__module__ = FetchStatus.__module__ = ConfigStatus.__module__ = "appnorth.config"
