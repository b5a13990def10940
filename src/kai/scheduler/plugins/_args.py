"""Argument parsers shared by the built-in plugins: each takes what a SchedulingShard holds (KAI keeps plugin
arguments as strings) or what code passes, and raises ValueError with a message a user can act on."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kai.api.duration import parse_duration


def number(minimum: float = -math.inf) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a number")
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a number") from None
        if not math.isfinite(v) or v < minimum:
            raise ValueError(f"{value!r} must be a finite number >= {minimum:g}")
        return v

    return parse


def integer(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    try:
        return int(str(value))
    except ValueError:
        raise ValueError(f"{value!r} is not an integer") from None


def duration(value: Any) -> float:
    """Seconds, from a duration ("30s", "1h") or a number of seconds; not negative."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
    else:
        try:
            v = parse_duration(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a duration") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{value!r} must not be negative")
    return v


def one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
        return str(value)

    return parse
