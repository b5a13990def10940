"""Small readers of decoded manifests: each raises ManifestError(field=...) so the message names the field.

Shared by every parser in ``kai.api`` (objects, pod scheduling rules, storage kinds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from kai.api.duration import parse_duration
from kai.api.errors import ManifestError

# ---------------------------------------------------------------------------------------------


def _map(obj: Any, path: str) -> dict[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ManifestError(f"expected a mapping, got {type(obj).__name__}", field=path)
    return obj


def _list(obj: Any, path: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ManifestError(f"expected a list, got {type(obj).__name__}", field=path)
    return obj


def _str(obj: Any, path: str, default: str = "") -> str:
    if obj is None:
        return default
    if isinstance(obj, (dict, list)):
        raise ManifestError(f"expected a string, got {type(obj).__name__}", field=path)
    return str(obj)


def _items(obj: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The mappings of a list, each with its path (``path[i]``)."""
    for i, item in enumerate(_list(obj, path)):
        p = f"{path}[{i}]"
        yield p, _map(item, p)


def _required(obj: Any, path: str) -> str:
    """A string that must be there and not be empty."""
    value = _str(obj, path)
    if not value:
        raise ManifestError("is required", field=path)
    return value


def _str_map(obj: Any, path: str) -> dict[str, str]:
    """A map of strings (labels, annotations, a node selector). One of only strings, as every one off the API
    server is, is copied as it is: no field path is made for each entry unless an entry is not a string."""
    if type(obj) is dict:
        for k, v in obj.items():
            if type(k) is not str or type(v) is not str:
                break
        else:
            return dict(obj)
    return {str(k): _str(v, f"{path}.{k}") for k, v in _map(obj, path).items()}


MAX_NUMBER = 1e15  # the largest magnitude of a plain number kai reads (quotas, limits, weights, kValue)
INT32 = (-(2**31), 2**31 - 1)  # Kubernetes' int32 fields (minMember, priority, replicas)


def _number(obj: Any, path: str, default: float) -> float:
    """A finite number of magnitude at most MAX_NUMBER: NaN and infinity would poison every fair share."""
    if obj is None:
        return default
    if isinstance(obj, bool) or not isinstance(obj, (int, float, str)):
        raise ManifestError(f"{obj!r} is not a number", field=path)
    try:
        value = float(obj)
    except (ValueError, OverflowError):
        raise ManifestError(f"{str(obj)[:40]!r} is not a number", field=path) from None
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise ManifestError(f"{str(obj)[:40]!r} is not a finite number of magnitude up to {MAX_NUMBER:g}", field=path)
    return value


def _int(obj: Any, path: str, default: int | None, bounds: tuple[int, int] = INT32) -> int | None:
    """An integer within *bounds* (Kubernetes' int32 by default)."""
    if obj is None:
        return default
    if isinstance(obj, bool) or not isinstance(obj, (int, str)) or (isinstance(obj, str) and len(obj) > 40):
        raise ManifestError(f"{str(obj)[:40]!r} is not an integer", field=path)
    try:
        value = int(obj)
    except ValueError:
        raise ManifestError(f"{obj!r} is not an integer", field=path) from None
    if not bounds[0] <= value <= bounds[1]:
        raise ManifestError(f"{value} is out of range ({bounds[0]} to {bounds[1]})", field=path)
    return value


def _bool(obj: Any, path: str, default: bool) -> bool:
    if obj is None:
        return default
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, str) and obj.lower() in ("true", "false"):
        return obj.lower() == "true"
    raise ManifestError(f"{obj!r} is not a boolean", field=path)


def _duration(obj: Any, path: str) -> float | None:
    if obj is None:
        return None
    try:
        return parse_duration(obj)
    except ValueError as e:
        raise ManifestError(str(e), field=path) from None
