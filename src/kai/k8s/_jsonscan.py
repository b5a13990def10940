"""An iterative JSON scanner for answers the C decoders refuse because they nest too deep.

msgspec and Python's json module recurse once per nesting level and raise RecursionError at about a
thousand levels; the API server accepts objects nested up to 10,000 levels in fields a CRD leaves free
(``x-kubernetes-preserve-unknown-fields``). One such object in a list would fail the whole list, and
with it every cycle. This module finds the items of a list and the metadata of an object without
recursion, so the informer can decode the others normally and report the one it cannot read.

Rules: used only after the fast decode failed (a regular expression walk over every string and
bracket is ~50x slower than msgspec); it assumes the bytes are JSON the API server produced.
"""

from __future__ import annotations

import re

_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.DOTALL)
_OPEN = frozenset(b"{[")
_CLOSE = frozenset(b"}]")


def max_depth(data: bytes, limit: int) -> int:
    """The nesting depth of *data*, counting stops once it passes *limit* (then limit + 1)."""
    depth = deepest = 0
    for m in _TOKENS.finditer(data):
        c = data[m.start()]
        if c in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif c in _CLOSE:
            depth -= 1
    return deepest


def _members(data: bytes, depth_of_members: int) -> list[tuple[bytes, int, int]]:
    """(key, start, end) of each member value of the object at depth *depth_of_members* - 1 that is an
    object or an array (the only values the callers look for)."""
    out = []
    depth = 0
    last_key = b""
    start = -1
    for m in _TOKENS.finditer(data):
        c = data[m.start()]
        if c == 0x22:  # a string
            if depth == depth_of_members - 1:
                last_key = m.group()[1:-1]
            continue
        if c in _OPEN:
            depth += 1
            if depth == depth_of_members:
                start = m.start()
        else:
            if depth == depth_of_members and start >= 0:
                out.append((last_key, start, m.end()))
                start = -1
            depth -= 1
    return out


def member(data: bytes, key: bytes) -> bytes | None:
    """The value of the top-level member *key* (an object or array), or None."""
    for k, s, e in _members(data, 2):
        if k == key:
            return data[s:e]
    return None


def list_items(data: bytes) -> tuple[bytes, list[bytes]]:
    """The ``metadata`` object and the items of a Kubernetes list answer (each item's bytes)."""
    meta = b"{}"
    items_at: tuple[int, int] | None = None
    for k, s, e in _members(data, 2):
        if k == b"metadata":
            meta = data[s:e]
        elif k == b"items":
            items_at = (s, e)
    if items_at is None:
        return meta, []
    body = data[items_at[0] : items_at[1]]
    return meta, [body[s:e] for _, s, e in _members(body, 2)]
