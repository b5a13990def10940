"""Kubernetes resource quantities.

Rules (apimachinery's ``resource.Quantity``): a signed decimal number, an optional
exponent (``1e9``, ``1E3``) or one suffix: binary ``Ki Mi Gi Ti Pi Ei`` (powers of
1024) or decimal ``n u m k M G T P E`` (powers of 1000). Numbers in YAML may also
arrive as ints or floats.

kai keeps every amount as an exact integer in a base unit so that sums never
drift: CPU in millicores, everything else in whole units (bytes for memory,
counts for GPUs, pods and extended resources), rounded up the way kubelet rounds
a request (``ceil``).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)

# The largest amount kai accounts for in one quantity, in base units (bytes, millicores, counts): 2^50, about
# 1.1e15 (1 PiB of memory, 1.1e12 cores). Node and queue sums stay exact in int64 with room for 2^13 such
# amounts between two saturations (see kai.scheduler.snapshot). The API server accepts far larger quantities
# (``cpu: 1e16``); kai saturates them at this bound and the object parser reports the field (``Pod.oversize``).
MAX_AMOUNT = 2**50
MAX_TEXT = 64  # characters in a quantity string: longer is no quantity anyone writes (and bounds the parse)
_MAX_EXPONENT = 100  # |exponent| beyond which the value is surely above MAX_AMOUNT or rounds to the same unit


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of *value*; raises QuantityError for anything malformed."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    if len(value) > MAX_TEXT:
        raise QuantityError(f"{value[:20]!r}... is not a quantity (more than {MAX_TEXT} characters)")
    m = _QUANTITY.match(value.strip())
    if m is None:
        raise QuantityError(f"{value!r} is not a quantity (expected e.g. 500m, 2, 15Gi, 1G, 1e9)")
    number = Fraction(m.group("num"))
    if m.group("exp"):
        # bounded: 10**(10**9) would take the parser minutes; past the bound the result is the same after
        # saturation (large) or rounding up (small)
        exponent = max(-_MAX_EXPONENT, min(_MAX_EXPONENT, int(m.group("exp")[1:])))
        return number * Fraction(10) ** exponent
    return number * _SUFFIX[m.group("suffix") or ""]


def to_milli(value: str | int | float) -> int:
    """Millicores (or milli-units), rounded up: ``"500m"`` → 500, ``2`` → 2000."""
    if isinstance(value, str):
        return _milli_of_text(value)
    return math.ceil(parse_quantity(value) * 1000)


def to_units(value: str | int | float) -> int:
    """Whole units rounded up: ``"15Gi"`` → 16106127360, ``"1e9"`` → 10**9."""
    if isinstance(value, str):
        return _units_of_text(value)
    return math.ceil(parse_quantity(value))


# Pods repeat a handful of quantities ("1", "500m", "2Gi") thousands of times, and the API server sends
# them as strings: the conversions of strings are memoized (an error is raised again each time).
@functools.lru_cache(maxsize=4096)
def _milli_of_text(value: str) -> int:
    return math.ceil(parse_quantity(value) * 1000)


@functools.lru_cache(maxsize=4096)
def _units_of_text(value: str) -> int:
    return math.ceil(parse_quantity(value))


def format_bytes(n: float) -> str:
    """Human-readable bytes for messages (binary units, as kubectl shows memory)."""
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if abs(n) >= size:
            v = n / size
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{n:.0f}"
