"""Checks on the msgpack maps a file holds (METADATA, STATS, INDEX): msgpack's own limits,
from the payload's size, and the types spec section 2 gives the keys of METADATA and STATS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["METADATA_TYPES", "STATS_TYPES", "kind", "msgpack_limits", "typed"]


def kind(v: object) -> str:
    return "nil" if v is None else f"{'an' if type(v).__name__[0] in 'aeiou' else 'a'} " \
        f"{type(v).__name__}"


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# The types spec section 2 gives the keys of METADATA and STATS: (check, what it says).
_STR = (lambda v: isinstance(v, str), "a string")
_INT = (_is_int, "an integer")
_MAP = (lambda v: isinstance(v, dict), "a map")
METADATA_TYPES: dict[str, tuple[Any, str]] = {
    "psrec_version": _STR,
    "pid": _INT,
    "command": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                "a list of strings"),
    "python_version": _STR,
    "python_build": _MAP,
    "hostname": _STR,
    "interval_ns": _INT,
    "rate_hz": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "options": _MAP,
}
STATS_TYPES: dict[str, tuple[Any, str]] = {
    **{k: _INT for k in ("passes", "samples", "sample_errors", "missed_deadlines",
                         "duration_ns", "exit_code", "truncated_stacks")},
    "stopped_by": _STR,
}


def msgpack_limits(raw_length: int, max_array_len: int | None = None) -> dict[str, int]:
    """msgpack's own limits, so that a length in a map or array header cannot make it
    allocate more than the payload could fill."""
    n = raw_length if max_array_len is None else min(raw_length, max_array_len)
    return {"max_str_len": raw_length, "max_bin_len": raw_length, "max_ext_len": raw_length,
            "max_array_len": n, "max_map_len": raw_length // 2}


def typed(where: str, value: dict[Any, Any], types: dict[str, tuple[Any, str]],
          warn: Callable[[str], None]) -> dict[str, Any]:
    """The map without the keys whose values have another type than spec section 2
    gives them (an int where the command line belongs made `psrec info` fail), each
    named in a warning. Keys it does not list are kept as they are."""
    out: dict[str, Any] = {}
    for key, v in value.items():
        if not isinstance(key, str):
            warn(f"{where} holds a key that is not a string ({key!r:.40}); ignored")
            continue
        check = types.get(key)
        if check is not None and not check[0](v):
            warn(f"{where}: {key!r} is {kind(v)}, not {check[1]}; ignored")
            continue
        out[key] = v
    return out
