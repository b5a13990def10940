"""CEL device selectors (``selectors[].cel.expression`` of DeviceClasses and ResourceClaim requests), evaluated with
cel-python (a maintained, pure-Python CEL implementation).

Rules:

* an expression is compiled when its object is parsed: one that does not compile refuses the object, with an
  error naming the field (``compile_selector``);
* the variable is ``device`` as in Kubernetes: ``device.driver``, ``device.attributes[domain][name]``,
  ``device.capacity[domain][name]`` (a quantity: ``compareTo``, ``isGreaterThan``, ``isLessThan``,
  ``asInteger``, ``asApproximateFloat``, ``sign``, ``isInteger``; ``quantity("40Gi")`` makes one). A
  ``version`` attribute is a string (Kubernetes' ``semver`` functions are not offered);
* evaluation never raises (``CelSelector.matches``): a runtime error (a missing attribute, a result that is
  not a bool) is "does not match", as a device kube-scheduler cannot evaluate is not allocated;
* device attributes never change, so a selector's answer per device is computed once and cached
  (``kai.scheduler.dra`` asks once per (expression, device), at snapshot time, never in the placement loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes

from kai.api.errors import ManifestError
from kai.api.quantity import parse_quantity

_ENV = celpy.Environment()


class Quantity:
    """A Kubernetes quantity inside CEL (compared through its methods, as Kubernetes' CEL library offers)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value


def _q(x: Any) -> Fraction:
    if isinstance(x, Quantity):
        return x.value
    raise TypeError(f"not a quantity: {x!r}")


def _cmp(a: Any, b: Any) -> int:
    x, y = _q(a), _q(b)
    return (x > y) - (x < y)


FUNCTIONS = {
    "quantity": lambda s: Quantity(parse_quantity(str(s))),
    "compareTo": lambda a, b: celtypes.IntType(_cmp(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_cmp(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_cmp(a, b) < 0),
    "asInteger": lambda a: celtypes.IntType(int(_q(a))),
    "asApproximateFloat": lambda a: celtypes.DoubleType(float(_q(a))),
    "sign": lambda a: celtypes.IntType((_q(a) > 0) - (_q(a) < 0)),
    "isInteger": lambda a: celtypes.BoolType(_q(a).denominator == 1),
}


@dataclass(frozen=True, slots=True)
class CelSelector:
    """A compiled selector. Equal and hashed by its expression (shapes of requests are keyed by it)."""

    expression: str
    program: Any = field(compare=False, hash=False, repr=False)

    def matches(self, device: Any) -> bool:
        """Whether *device* (``device_value``) satisfies the expression; False on any evaluation error."""
        try:
            got = self.program.evaluate({"device": device})
        except Exception:
            return False
        return isinstance(got, celtypes.BoolType) and bool(got)


def compile_selector(expression: str, path: str) -> CelSelector:
    """Compile *expression*; a ManifestError naming *path* if it is not CEL."""
    try:
        ast = _ENV.compile(expression)
        program = _ENV.program(ast, functions=FUNCTIONS)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ManifestError(f"CEL expression does not compile: {first}", field=path) from e
    return CelSelector(expression, program)


def _value(v: int | bool | str) -> Any:
    if isinstance(v, bool):
        return celtypes.BoolType(v)
    if isinstance(v, int):
        return celtypes.IntType(v)
    return celtypes.StringType(v)


def _by_domain(items: dict[str, Any], convert: Any) -> Any:
    out: dict[str, dict[str, Any]] = {}
    for qualified, v in items.items():
        domain, _, name = qualified.rpartition("/")
        out.setdefault(domain, {})[name] = convert(v)
    return celtypes.MapType(
        {
            celtypes.StringType(d): celtypes.MapType({celtypes.StringType(k): x for k, x in names.items()})
            for d, names in out.items()
        }
    )


def device_value(driver: str, attributes: dict[str, int | bool | str], capacity: dict[str, Fraction]) -> Any:
    """The ``device`` variable for one device (attributes and capacity keyed by qualified ``domain/name``)."""
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): _by_domain(attributes, _value),
            celtypes.StringType("capacity"): _by_domain(capacity, Quantity),
        }
    )
