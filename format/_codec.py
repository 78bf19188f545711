"""The decoders a reader uses: the native codec (psrec.format._format) where it was built and
loads, else the reference decoder in Python (format/reference.py), with their errors; and what
is read of a DATA payload without either (its sequence number)."""

from __future__ import annotations

from typing import Any

from . import _constants as C
from .reference import RefBudgetError, RefDecodeError
from .reference import decode_defs as ref_decode_defs

try:
    from . import _format as native_codec

    HAVE_NATIVE = True
except ImportError:  # the native codec could not be built or loaded here
    HAVE_NATIVE = False

__all__ = ["HAVE_NATIVE", "BudgetError", "DecodeError", "chunk_seq", "decode_defs",
           "native_available", "over_budget"]


def native_available() -> bool:
    return HAVE_NATIVE


DecodeError: type[Exception] = native_codec.DecodeError if HAVE_NATIVE else RefDecodeError
BudgetError: type[Exception] = native_codec.BudgetError if HAVE_NATIVE else RefBudgetError


def over_budget(exc: Exception) -> tuple[str, int]:
    """The budget a decoder's BudgetError names ("stack-trie nodes 1048576"): what, value."""
    what, value = str(exc).rsplit(" ", 1)
    return what, int(value)


def decode_defs(payload: bytes, max_records: int) -> Any:
    if HAVE_NATIVE:
        return native_codec.decode_defs(payload, max_records)
    return ref_decode_defs(payload, max_records)


def chunk_seq(payload: bytes) -> int | None:
    """The sequence number in a DATA payload's BEGIN record (its first), if it has one."""
    if len(payload) < 3 or payload[0] != C.REC_BEGIN:
        return None
    pos, seq, shift = 2 if payload[1] < 0x80 else None, 0, 0
    if pos is None:  # a BEGIN record is short: its length takes one byte
        return None
    while pos < len(payload) and shift < 64:
        b = payload[pos]
        seq |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return seq
        shift += 7
    return None
