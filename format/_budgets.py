"""What reading a whole file may cost (spec section 9.3), from its size, and PSREC_BUDGET,
which scales the budgets for a file the user trusts."""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import _constants as C
from .errors import FormatError

__all__ = ["BUDGET_ENV", "Budgets"]

BUDGET_ENV = "PSREC_BUDGET"
_UNLIMITED = (1 << 64) - 1


@dataclass(frozen=True)
class Budgets:
    """What reading a whole file may cost, from its size (spec section 9.3): uncompressed
    bytes of DATA chunks, stack-trie nodes and thread refs. PSREC_BUDGET scales them for a
    file the user trusts: a factor (10: ten times each) or `unlimited`."""

    data_raw: int
    nodes: int
    threads: int
    factor: float | None  # PSREC_BUDGET's factor; None: unlimited

    @classmethod
    def of(cls, size: int) -> Budgets:
        factor = _budget_factor(os.environ.get(BUDGET_ENV))
        b = cls(0, 0, 0, factor)
        return cls(b.scaled(C.DATA_RAW_BASE + C.DATA_RAW_PER_BYTE * size),
                   b.scaled(C.TRIE_BASE + C.TRIE_PER_BYTE * size),
                   b.scaled(C.THREADS_BASE + size // C.THREAD_BYTES), factor)

    def scaled(self, n: int) -> int:
        """A budget of n, as PSREC_BUDGET scales it."""
        return _UNLIMITED if self.factor is None else min(_UNLIMITED, int(n * self.factor))


def _budget_factor(value: str | None) -> float | None:
    """PSREC_BUDGET as a factor of the budgets (1 when unset), or None for no budget."""
    if value is None or not value.strip():
        return 1.0
    if value.strip().lower() == "unlimited":
        return None
    try:
        factor = float(value)
    except ValueError:
        factor = 0.0
    if not 1 <= factor < float("inf"):
        raise FormatError(f"{BUDGET_ENV}={value!r} is not a budget factor",
                          help=f"give a number of 1 or more ({BUDGET_ENV}=10 reads ten times "
                               "past each budget) or 'unlimited'")
    return factor
