"""Names from a profiled program, made safe for text outputs. Imports nothing (`psrec dump
PID` uses it and starts in a few milliseconds).

Function, file, thread and command-line names come from the target and are untrusted: a
control character (ESC starts a terminal escape sequence, BEL, BS, CR, DEL, C1) could change
what a terminal shows, or, a line break, split one line of a line-based output into two. The
bidi controls (marks, embeddings, overrides, isolates) and the Unicode line and paragraph
separators too: they would reorder or break what follows them on the line.
"""

from __future__ import annotations

__all__ = ["demangle", "printable"]

_ESCAPED = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x200E, 0x200F, 0x2028, 0x2029,
            *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_TABLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _ESCAPED}


def printable(text: str) -> str:
    """text with control characters escaped as \\xNN, and bidi controls and line separators
    as \\uNNNN (a backslash stays as it is)."""
    return text.translate(_TABLE)


def demangle(symbols: list[str]) -> list[str]:
    """Native function symbols as a debugger shows them: a mangled one (Itanium C++, `_Z`)
    demangled by the C++ runtime's own demangler (spec section 10, rule 3), any other as it
    is; all as they are where the native codec is not built."""
    try:
        from ._format import demangle as native
    except ImportError:
        return list(symbols)
    return native(list(symbols))
