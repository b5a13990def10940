"""Queue access control (kai's, beyond KAI): which namespaces may name a Queue.

Without it, any tenant can label pods with another team's queue and spend that team's quota. A Queue
opts in with the annotation ``kai.scheduler/allowed-namespaces``: a comma-separated list of namespace
names or glob patterns (``team-a, team-a-*``). A pod or PodGroup in namespace N may use queue Q only if
N matches the rule of Q and of every ancestor of Q that has one (a department's rule binds its teams).
A Queue without the annotation admits every namespace, as KAI does: the rule set is off by default.

Rules: pure functions over parsed Queues; the admission webhook refuses at create, and the snapshot
leaves a job in a refused queue out of the cycle with the same words, so the rule holds even when the
webhook is down or not installed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Protocol

from kai.api import constants as C
from kai.api.errors import ManifestError


class QueueRule(Protocol):
    """What the rule reads of a Queue (kai.api.objects.Queue, which parses the annotation with this module)."""

    parent: str
    allowed_namespaces: tuple[str, ...] | None


_PATTERN = re.compile(r"^[a-z0-9*?]([-a-z0-9*?]{0,61}[a-z0-9*?])?$")
FIELD = f"metadata.annotations.{C.ANNOTATION_QUEUE_ALLOWED_NAMESPACES}"


def parse_allowed_namespaces(value: str | None) -> tuple[str, ...] | None:
    """The patterns of the annotation's *value* (None: no rule). ManifestError naming the annotation for
    an empty list or an entry that is not a namespace name or glob pattern."""
    if value is None:
        return None
    items = tuple(s.strip() for s in value.split(","))
    if not any(items):
        raise ManifestError("lists no namespace (remove the annotation to admit every namespace)", field=FIELD)
    for item in items:
        if not _PATTERN.match(item):
            raise ManifestError(
                f"{item!r} is not a namespace name or a glob pattern of one (e.g. team-a, team-a-*)", field=FIELD
            )
    return items


def admits(patterns: tuple[str, ...], namespace: str) -> bool:
    return any(fnmatch.fnmatchcase(namespace, p) for p in patterns)


def access_denied(queues: Mapping[str, QueueRule], queue: str, namespace: str) -> str:
    """Why *namespace* may not use *queue* (its own or an ancestor's rule), or "" when it may. A queue
    missing from *queues* is not this module's business (the caller reports it)."""
    seen: set[str] = set()
    name = queue
    while name and name in queues and name not in seen:
        seen.add(name)
        q = queues[name]
        if q.allowed_namespaces is not None and not admits(q.allowed_namespaces, namespace):
            via = "" if name == queue else f" (a rule of its ancestor {name!r})"
            return (
                f"namespace {namespace!r} may not use queue {queue!r}{via}: "
                f"{C.ANNOTATION_QUEUE_ALLOWED_NAMESPACES} is {', '.join(q.allowed_namespaces)!r}"
            )
        name = q.parent
    return ""
