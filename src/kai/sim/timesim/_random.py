"""Distributions a Simulation document may name, parsed once and sampled from a seeded NumPy generator.

Rules: parsing is strict (every error names the field); sampling takes the caller's
``numpy.random.Generator`` and never touches global random state, so a seed fixes every draw.

Two families: *durations* (seconds: a fixed Go duration, ``exponential``, ``lognormal``, ``uniform``,
each optionally clamped by ``min``/``max``) and *counts* (a fixed integer or weighted ``choices``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kai.api.duration import parse_duration

Fail = Callable[[str, str], Exception]  # (field, message) -> the exception to raise


def seconds(value: Any, field: str, fail: Fail, *, positive: bool = False) -> float:
    """A Go duration string ('90s', '1h30m') as seconds; errors name *field*."""
    try:
        s = parse_duration(value)
    except ValueError as e:
        raise fail(field, str(e)) from None
    if s < 0 or (positive and s == 0):
        raise fail(field, f"{value!r} must be {'positive' if positive else 'non-negative'}")
    return s


@dataclass(frozen=True, slots=True)
class DurationDist:
    """Seconds drawn from a named law, clamped to [low, high]."""

    law: str  # fixed | exponential | lognormal | uniform
    a: float  # fixed: the value; exponential: mean; lognormal: median; uniform: min
    b: float = 0.0  # lognormal: sigma; uniform: max
    low: float = 0.0
    high: float = float("inf")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.law == "fixed":
            out = np.full(n, self.a)
        elif self.law == "exponential":
            out = rng.exponential(self.a, n)
        elif self.law == "lognormal":
            out = rng.lognormal(np.log(self.a), self.b, n)
        else:
            out = rng.uniform(self.a, self.b, n)
        return np.clip(out, self.low, self.high)

    @property
    def mean(self) -> float:
        """The law's mean before clamping (for documentation and sanity checks)."""
        if self.law in ("fixed", "exponential"):
            return self.a
        if self.law == "lognormal":
            return float(self.a * np.exp(self.b**2 / 2))
        return (self.a + self.b) / 2


_DURATION_LAWS = ("exponential", "lognormal", "uniform")


def parse_duration_dist(value: Any, field: str, fail: Fail) -> DurationDist:
    """``'30m'`` | ``{exponential: {mean: 1h}}`` | ``{lognormal: {median: 1h, sigma: 0.8}}`` |
    ``{uniform: {min: 10m, max: 2h}}``, each with optional ``min``/``max`` clamps beside the law."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return DurationDist("fixed", seconds(value, field, fail))
    if not isinstance(value, dict):
        raise fail(field, f"expected a duration (e.g. 30m) or one of {', '.join(_DURATION_LAWS)}")
    laws = [k for k in value if k in _DURATION_LAWS]
    unknown = [k for k in value if k not in (*_DURATION_LAWS, "min", "max")]
    if unknown:
        raise fail(f"{field}.{unknown[0]}", f"unknown key (expected one of {', '.join(_DURATION_LAWS)}, min, max)")
    if len(laws) != 1:
        raise fail(field, f"name exactly one law of {', '.join(_DURATION_LAWS)}")
    law = laws[0]
    args = value[law]
    at = f"{field}.{law}"
    if not isinstance(args, dict):
        raise fail(at, "expected a mapping")
    low = seconds(value["min"], f"{field}.min", fail) if "min" in value else 0.0
    high = seconds(value["max"], f"{field}.max", fail) if "max" in value else float("inf")
    if high < low:
        raise fail(f"{field}.max", "must not be below min")

    def need(key: str, *, positive: bool = True) -> float:
        if key not in args:
            raise fail(f"{at}.{key}", "is required")
        return seconds(args[key], f"{at}.{key}", fail, positive=positive)

    if law == "exponential":
        return DurationDist(law, need("mean"), low=low, high=high)
    if law == "lognormal":
        sigma = args.get("sigma")
        if isinstance(sigma, bool) or not isinstance(sigma, int | float) or sigma < 0:
            raise fail(f"{at}.sigma", f"expected a non-negative number, got {sigma!r}")
        return DurationDist(law, need("median"), float(sigma), low=low, high=high)
    lo, hi = need("min", positive=False), need("max", positive=False)
    if hi < lo:
        raise fail(f"{at}.max", "must not be below min")
    return DurationDist(law, lo, hi, low=low, high=high)


@dataclass(frozen=True, slots=True)
class CountDist:
    """Whole numbers drawn from weighted choices (one choice = a fixed number)."""

    choices: tuple[int, ...]
    weights: tuple[float, ...]  # normalized to sum 1

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if len(self.choices) == 1:
            return np.full(n, self.choices[0], dtype=np.int64)
        return rng.choice(np.array(self.choices, dtype=np.int64), size=n, p=np.array(self.weights))


def parse_count_dist(value: Any, field: str, fail: Fail, *, minimum: int = 1) -> CountDist:
    """``4`` | ``{choices: [1, 2, 4], weights: [3, 2, 1]}`` (weights default to equal)."""

    def whole(v: Any, at: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise fail(at, f"expected a whole number >= {minimum}, got {v!r}")
        return v

    if not isinstance(value, dict):
        return CountDist((whole(value, field),), (1.0,))
    unknown = [k for k in value if k not in ("choices", "weights")]
    if unknown:
        raise fail(f"{field}.{unknown[0]}", "unknown key (expected choices, weights)")
    raw = value.get("choices")
    if not isinstance(raw, list) or not raw:
        raise fail(f"{field}.choices", "expected a non-empty list of whole numbers")
    choices = tuple(whole(v, f"{field}.choices[{i}]") for i, v in enumerate(raw))
    weights_raw = value.get("weights", [1] * len(choices))
    if not isinstance(weights_raw, list) or len(weights_raw) != len(choices):
        raise fail(f"{field}.weights", f"expected a list of {len(choices)} numbers, one per choice")
    weights = []
    for i, w in enumerate(weights_raw):
        if isinstance(w, bool) or not isinstance(w, int | float) or w < 0:
            raise fail(f"{field}.weights[{i}]", f"expected a non-negative number, got {w!r}")
        weights.append(float(w))
    total = sum(weights)
    if total <= 0:
        raise fail(f"{field}.weights", "must not all be zero")
    return CountDist(choices, tuple(w / total for w in weights))
