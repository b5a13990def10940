"""Unit tests for kai.api.duration: Go ``time.Duration`` strings as seconds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kai.api.duration import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("2h", 7200.0),
        ("500ms", 0.5),
        ("-1s", -1.0),
        ("+1s", 1.0),
        ("0", 0.0),
        ("-0", 0.0),
        ("0s", 0.0),
        ("1h2m3s", 3723.0),
        ("1.5h", 5400.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("100us", 1e-4),
        ("100µs", 1e-4),
        ("1000ns", 1e-6),
        ("2m", 120.0),
        ("1h0m0s", 3600.0),
        ("-1m30s", -90.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_integer_zero_from_yaml_is_zero() -> None:
    assert parse_duration(0) == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        "30",
        "1x",
        "",
        "s",
        "-",
        "+",
        "1",
        "1m30",
        "m30s",
        "1 s",
        "1d",
        "1.2.3s",
        "30S",
        "abc",
        30,
        1.5,
        True,
        None,
        ["30s"],
    ],
)
def test_malformed_durations_raise(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)  # type: ignore[arg-type]


def test_inner_units_must_follow_each_number() -> None:
    # "1h30" has a unit-less tail; Go rejects it rather than guessing seconds
    with pytest.raises(ValueError):
        parse_duration("1h30")


def test_error_names_the_value() -> None:
    with pytest.raises(ValueError, match="1x"):
        parse_duration("1x")


@given(
    st.integers(min_value=0, max_value=99),
    st.integers(min_value=0, max_value=59),
    st.integers(min_value=0, max_value=59),
    st.booleans(),
)
def test_hms_composition(h: int, m: int, s: int, negative: bool) -> None:
    text = f"{'-' if negative else ''}{h}h{m}m{s}s"
    expected = (h * 3600 + m * 60 + s) * (-1 if negative else 1)
    assert parse_duration(text) == pytest.approx(expected)
