"""CEL device selectors (``selectors[].cel.expression`` of DeviceClasses and ResourceClaim requests), evaluated with
``common-expression-language`` (maintained Python bindings of a Rust CEL interpreter: about 6 µs an
evaluation, where the pure-Python cel-python took 7 ms, which made a 1,000-node cluster's first cycle take
minutes).

Rules:

* an expression is compiled when its object is parsed: one that does not compile refuses the object, with an
  error naming the field (``compile_selector``);
* the variable is ``device`` as in Kubernetes: ``device.driver``, ``device.attributes[domain][name]``,
  ``device.capacity[domain][name]``. A capacity is a quantity compared through Kubernetes' quantity methods
  (``compareTo``, ``isGreaterThan``, ``isLessThan``, ``asInteger``, ``asApproximateFloat``, ``sign``,
  ``isInteger``; ``quantity("40Gi")`` makes one); inside it is a number in base units (an int when whole), so
  only those methods mean what they mean in Kubernetes. A ``version`` attribute is a string (Kubernetes'
  ``semver`` functions are not offered);
* evaluation never raises (``CelSelector.matches``): a runtime error (a missing attribute, a result that is
  not a bool) is "does not match", as a device kube-scheduler cannot evaluate is not allocated;
* device attributes never change, so an answer is kept per (expression, device value) for the process
  (``_ANSWERS``, bounded): devices that look alike are evaluated once, and a cluster's later cycles evaluate
  nothing again. ``kai.scheduler.dra`` asks at snapshot time, never in the placement loop.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kai.api.errors import ManifestError
from kai.api.quantity import parse_quantity

MAX_ANSWERS = 1_000_000  # (expression, device value) answers kept; all forgotten at once past this
_ANSWERS: dict[tuple[str, Hashable], bool] = {}


def _number(value: Fraction) -> int | float:
    return int(value) if value.denominator == 1 else float(value)


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _integer(a: Any) -> int:
    if a != int(a):
        raise ValueError(f"quantity {a} is not an integer")
    return int(a)


FUNCTIONS = {
    "quantity": lambda s: _number(parse_quantity(str(s))),
    "compareTo": _cmp,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "asInteger": _integer,
    "asApproximateFloat": float,
    "sign": lambda a: _cmp(a, 0),
    "isInteger": lambda a: a == int(a),
}


_LOCK = threading.Lock()  # a cel.Context is not thread-safe (the Kubernetes backend runs cycles in a worker thread)
_CONTEXT: Any = None  # made on first use, under _LOCK


def _cel() -> Any:
    """The ``cel`` package, imported on first use: its ``__init__`` imports its command line (typer, rich,
    prompt_toolkit), 0.13 s that every ``kai`` process paid at start-up although only DRA selectors need it."""
    import cel

    return cel


def _context() -> Any:
    """The shared evaluation context with Kubernetes' CEL functions; call under _LOCK."""
    global _CONTEXT
    if _CONTEXT is None:
        ctx = _cel().Context()
        for name, fn in FUNCTIONS.items():
            ctx.add_function(name, fn)
        _CONTEXT = ctx
    return _CONTEXT


@dataclass(frozen=True, slots=True)
class DeviceValue:
    """One device as CEL sees it, and the key of what it looks like (its driver, attributes and capacity)."""

    key: Hashable
    value: dict[str, Any] = field(compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class CelSelector:
    """A compiled selector. Equal and hashed by its expression (shapes of requests are keyed by it)."""

    expression: str
    program: Any = field(compare=False, hash=False, repr=False)

    def matches(self, device: DeviceValue) -> bool:
        """Whether *device* satisfies the expression; False on any evaluation error."""
        key = (self.expression, device.key)
        got = _ANSWERS.get(key)
        if got is None:
            try:
                with _LOCK:
                    ctx = _context()
                    ctx.add_variable("device", device.value)
                    result = self.program.execute(ctx)
            except Exception:  # a CEL runtime error means "no match", never a failed cycle
                result = None
            got = result is True
            if len(_ANSWERS) >= MAX_ANSWERS:
                _ANSWERS.clear()
            _ANSWERS[key] = got
        return got


_PROGRAMS: dict[str, Any] = {}  # expression -> compiled program (claims made from one template share theirs)


def compile_selector(expression: str, path: str) -> CelSelector:
    """Compile *expression*; a ManifestError naming *path* if it is not CEL."""
    program = _PROGRAMS.get(expression)
    if program is not None:
        return CelSelector(expression, program)
    try:
        program = _cel().compile(expression)
    except Exception as e:  # the bindings raise ValueError for syntax, others for the rest
        text = " ".join(str(e).split())
        raise ManifestError(f"CEL expression does not compile: {text[:300]}", field=path) from e
    if len(_PROGRAMS) >= MAX_ANSWERS:
        _PROGRAMS.clear()
    _PROGRAMS[expression] = program
    return CelSelector(expression, program)


def _by_domain(items: dict[str, Any], convert: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for qualified, v in items.items():
        domain, _, name = qualified.rpartition("/")
        out.setdefault(domain, {})[name] = convert(v)
    return out


def device_value(driver: str, attributes: dict[str, int | bool | str], capacity: dict[str, Fraction]) -> DeviceValue:
    """The ``device`` variable for one device (attributes and capacity keyed by qualified ``domain/name``)."""
    key = (driver, tuple(sorted(attributes.items())), tuple(sorted(capacity.items())))
    value = {
        "driver": driver,
        "attributes": _by_domain(attributes, lambda v: v),
        "capacity": _by_domain(capacity, _number),
    }
    return DeviceValue(key, value)
