"""Bounds on the shape of a decoded document, checked at the edge before anything walks it.

Rules: every document kai reads from a file or the API server is checked once, here, for how deep it nests
and how many values it holds once YAML aliases are expanded. Two inputs motivate this (issue 14):

* a YAML *alias bomb* (``&a [x, x, ...]``, ``&b [*a, *a, ...]``, ...) loads in microseconds as a graph of shared
  lists, and then hangs whatever copies or serializes it (the embedded cluster copies a Job's pod template
  per pod);
* an owner whose CRD keeps unknown fields can nest thousands of levels deep, and the first recursive walk
  (``copy.deepcopy``, ``json.dumps``) raises RecursionError.

The check itself never recurses and visits each distinct container once (sizes of shared containers are
memoized), so it is linear in what was actually decoded.
"""

from __future__ import annotations

from typing import Any

from kai.api.errors import ManifestError

MAX_DEPTH = 100  # nesting levels; a Pod spec needs about 12, CRDs with free-form fields a few more
MAX_VALUES = 2_000_000  # values in one document with aliases expanded (a 50,000-pod v1 List is ~1.5M)
# GPUs one Node may advertise: the engine keeps per-GPU state as wide as the largest node (gpusharing.GpuTable),
# so 2^50 GPUs on one node would ask for TiBs; real nodes have 8 or 16
MAX_NODE_GPUS = 1024


def check_shape(doc: Any, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> None:
    """Raise ManifestError if *doc* nests deeper than *max_depth* or expands past *max_values* values.

    A recursive structure (YAML can make one: ``&a [*a]``) nests infinitely deep and is refused too."""
    done: dict[int, tuple[int, int]] = {}  # id(container) -> (values in it expanded, levels below and including it)
    stack: list[tuple[Any, int, bool]] = [(doc, 1, False)]  # iterative post-order: (container, depth, children done?)
    while stack:
        node, depth, children_done = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > max_depth:
            raise ManifestError(f"nests deeper than {max_depth} levels")
        seen = done.get(id(node))
        if seen is not None and not children_done:  # shared through an alias: known, but its depth here counts
            if depth + seen[1] - 1 > max_depth:
                raise ManifestError(f"nests deeper than {max_depth} levels")
            continue
        if not children_done:
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children if isinstance(c, (dict, list)))
            continue
        total, height = 1, 1
        for c in children:
            if isinstance(c, (dict, list)):
                size, h = done[id(c)]
                total += size
                height = max(height, h + 1)
            else:
                total += 1
        if total > max_values:
            raise ManifestError(
                f"holds more than {max_values:,} values once its YAML aliases are expanded (an alias bomb?)"
            )
        done[id(node)] = (total, height)
