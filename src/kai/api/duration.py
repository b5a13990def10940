"""Go ``time.Duration`` strings as Kubernetes writes them (``30s``, ``1m30s``, ``-1s``, ``500ms``)."""

from __future__ import annotations

import re

_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str | int | float) -> float:
    """Seconds. Raises ValueError for anything Go's ParseDuration would reject."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValueError(f"{text!r} is not a duration (expected e.g. 30s, 1m30s, 2h)")
    if isinstance(text, (int, float)):
        if text == 0:
            return 0.0
        raise ValueError(f"{text!r} is not a duration: give a unit, e.g. {text}s")
    s = text.strip()
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"{text!r} is not a duration (expected e.g. 30s, 1m30s, 2h)")
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's time.Duration.String() for whole and fractional seconds: 90 -> '1m30s', 600 -> '10m0s'."""
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs:g}s" if secs != int(secs) else f"{int(secs)}s"
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{sec_text}"
    if minutes:
        return f"{sign}{int(minutes)}m{sec_text}"
    return f"{sign}{sec_text}"
