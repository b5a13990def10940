"""Unit tests for kai.api.quantity: Kubernetes quantities as exact integers in base units.

Rules under test (apimachinery's ``resource.Quantity``): a signed decimal number with
an optional exponent or one binary/decimal suffix; YAML may hand over ints and floats;
``to_milli`` / ``to_units`` round up (``ceil``), as kubelet rounds a request.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kai.api.quantity import QuantityError, parse_quantity, to_milli, to_units

GI = 2**30


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("15Gi", Fraction(15 * GI)),
        ("1G", Fraction(10**9)),
        ("20G", Fraction(20 * 10**9)),
        ("1e9", Fraction(10**9)),
        ("1E3", Fraction(1000)),
        ("1e-3", Fraction(1, 1000)),
        ("1e+3", Fraction(1000)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.5Gi", Fraction(3 * GI, 2)),
        ("100Ki", Fraction(100 * 1024)),
        ("1Mi", Fraction(2**20)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),  # a bare E is the exa suffix, not an exponent
        ("10n", Fraction(10, 10**9)),
        ("10u", Fraction(10, 10**6)),
        ("+3", Fraction(3)),
        ("-1", Fraction(-1)),
        ("-500m", Fraction(-1, 2)),
        ("0", Fraction(0)),
    ],
)
def test_parse_quantity_strings(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


def test_parse_quantity_is_exact() -> None:
    # 0.1 + 0.2 drifts in binary floating point; quantities must not.
    assert parse_quantity("0.1") + parse_quantity("0.2") == parse_quantity("0.3")
    assert isinstance(parse_quantity("1.5Gi"), Fraction)


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("2", 2000),
        ("0.5", 500),
        (".5", 500),
        ("1e3", 1_000_000),
        ("100m", 100),
        ("1", 1000),
        ("250m", 250),
    ],
)
def test_to_milli(text: str, milli: int) -> None:
    assert to_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("2", 2),
        ("15Gi", 15 * GI),
        ("1G", 10**9),
        ("20G", 20 * 10**9),
        ("1e9", 10**9),
        ("1E3", 1000),
        ("1.5Gi", 3 * GI // 2),
        ("100Ki", 102_400),
        ("0", 0),
    ],
)
def test_to_units(text: str, units: int) -> None:
    assert to_units(text) == units
    assert isinstance(to_units(text), int)


def test_fractional_units_round_up() -> None:
    assert to_units("0.5") == 1
    assert to_units("500m") == 1
    assert to_units("1.0001") == 2
    assert to_units("1n") == 1
    assert to_milli("0.0001") == 1
    assert to_milli("1n") == 1
    assert to_milli("1.0001") == 1001


def test_exact_values_are_not_rounded() -> None:
    assert to_units("1.5Ki") == 1536
    assert to_milli("1500u") == 2  # 1.5 milli rounds up
    assert to_milli("1000u") == 1


def test_negative_quantities_parse_and_round_towards_positive() -> None:
    # A negative quantity is a number (callers decide whether it is allowed; -1 means "unlimited"
    # in some places); ceil rounds towards +inf.
    assert to_units("-1") == -1
    assert to_milli("-1") == -1000
    assert to_units("-0.5") == 0
    assert to_units(-1) == -1
    assert to_milli(-1) == -1000


@pytest.mark.parametrize(
    ("value", "milli", "units"),
    [
        (2, 2000, 2),
        (0, 0, 0),
        (0.5, 500, 1),
        (0.1, 100, 1),
        (1.5, 1500, 2),
        (10**9, 10**12, 10**9),
        (-1, -1000, -1),
    ],
)
def test_numbers_from_yaml(value: int | float, milli: int, units: int) -> None:
    assert to_milli(value) == milli
    assert to_units(value) == units


def test_yaml_scalars_round_trip_through_the_loader() -> None:
    doc = yaml.safe_load("{a: 2, b: 0.5, c: 500m, d: 15Gi, e: 1e9, f: 1.5}")
    assert isinstance(doc["a"], int)
    assert isinstance(doc["b"], float)
    assert to_milli(doc["a"]) == 2000
    assert to_milli(doc["b"]) == 500
    assert to_milli(doc["c"]) == 500
    assert to_units(doc["d"]) == 15 * GI
    assert to_units(doc["e"]) == 10**9
    assert to_milli(doc["f"]) == 1500


def test_float_is_read_by_its_decimal_text() -> None:
    # 0.1 as a binary float is slightly above 0.1; reading it as such would round 100.000...01 up to 101
    assert to_milli(0.1) == 100
    assert to_milli(0.7) == 700


@pytest.mark.parametrize(
    "bad",
    [
        "1.2.3",
        "abc",
        "5X",
        "",
        "1Gb",
        "Gi",
        "1 Gi",
        "1gi",
        "1KiB",
        "--1",
        "1e",
        "1e1.5",
        "1Ki1",
        "0x10",
        ".",
        "m",
        True,
        False,
        None,
        [1],
        {"a": 1},
        float("nan"),
        float("inf"),
    ],
)
def test_malformed_quantities_raise(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        to_milli(bad)  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        to_units(bad)  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)
    with pytest.raises(QuantityError, match=r"1\.2\.3"):
        parse_quantity("1.2.3")


@given(st.integers(min_value=0, max_value=10**12))
def test_integer_strings_and_ints_agree(n: int) -> None:
    assert to_units(str(n)) == to_units(n) == n
    assert to_milli(str(n)) == n * 1000
    assert to_milli(f"{n}m") == n


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["Ki", "Mi", "Gi", "k", "M", "G"]))
def test_suffixes_multiply(n: int, suffix: str) -> None:
    factor = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}[suffix]
    assert to_units(f"{n}{suffix}") == n * factor


@given(st.fractions(min_value=0, max_value=10**6, max_denominator=10**4))
def test_rounding_is_ceil(value: Fraction) -> None:
    text = f"{value.numerator / value.denominator:.6f}"
    exact = Fraction(text)
    units = to_units(text)
    assert units - 1 < exact <= units
    milli = to_milli(text)
    assert milli - 1 < exact * 1000 <= milli
