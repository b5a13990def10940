"""Fair-share division over the queue tree (KAI's ``proportion/resource_division``).

Rules
-----
* Pure functions over NumPy arrays: no Session, no plugins, no clock, no randomness.
* Every resource vector is a ``(3,)`` float64 array with columns in ``RESOURCES`` order
  (GPUs, fractions allowed; millicores; bytes).  ``-1`` (``UNLIMITED``) is a sentinel in
  ``deserved`` and ``limit``.
* Resources are divided independently of each other, top-down: the top-level queues divide
  the cluster ``total``; the children of a queue divide that queue's fair share.
* The result is deterministic: siblings are visited sorted by name, and every tie is broken
  by ``age_rank`` and then by name (habit 14).

Division among one set of siblings that share ``amount`` (per resource)
-----------------------------------------------------------------------
1. ``requestable = min(limit, request)``, or ``request`` when the limit is ``-1``.  A parent's
   request is the sum of its children's, so a department asks for what its leaves ask for.
2. **Deserved phase.**  Each queue gets ``min(deserved, requestable)``, with ``deserved = -1``
   read as ``amount``.  Queue priority plays no part.  ``remaining = amount - sum``; if it is
   not positive there is no over-quota phase and the deserved-phase shares stand, *even if
   they add up to more than amount* (KAI lets quotas oversubscribe a cluster or a parent;
   see ``resource_division_test.go`` "gives deserved in over subscription").
3. **Over-quota phase**, one bucket per distinct ``priority``, highest first; each bucket
   sees whatever the buckets before it left.  In each round the bucket's *unsatisfied*
   queues (``request > fair_share`` and, if limited, ``limit > fair_share``) compete for
   the amount present at the start of the round:
   ``nW = w / sum(w)`` over queues with requestable left, ``shareWeight = max(0, nW +
   k * (nW - usage))`` and ``f = start * shareWeight / sum(shareWeight)``.  A queue whose
   remaining requestable fits in ``f`` receives all of it; any other queue receives
   ``floor(f)`` (in the resource's own unit) and remembers ``f - floor(f)``.  A queue with
   ``over_quota_weight == 0`` never receives anything here.  Another round runs only if some
   queue's remaining request was strictly below its ``f`` and resources remain.
4. **Leftover phase** (still per bucket, right after its rounds): the floored-away units
   go one at a time, ``min(1, remaining)`` each, to the queues with the largest remembered
   fraction, ties to the older queue (lower ``age_rank``) and then the lower name; each such
   queue receives at most one unit.  Whatever is still left passes to the next bucket; what
   no bucket takes stays undivided.

Theory of operation
-------------------
``compute_fair_share`` validates the tree, stacks the inputs into ``(n_queues, 3)`` arrays,
propagates requests from leaves to every ancestor, and walks the tree breadth-first so
that a parent's share is final before its children divide it.  ``_divide`` handles one
sibling set for all three resources at once: every step is an array operation over
``(n_siblings, 3)``, and each resource column carries its own "still going" flag, so the
columns finish their rounds independently while sharing the Python loop.  A round either
ends the bucket or satisfies at least one more queue, so a bucket runs at most
``n_siblings + 1`` rounds.  The leftover phase is one sorted pass per column (a cumulative
sum decides who still gets a unit), never a per-unit loop, so bytes of memory cost no more
than GPUs.

Deliberate choices (where we differ from, or pin down, the Go code)
-------------------------------------------------------------------
* Leftover units are capped by the queue's remaining requestable amount.  KAI gives
  ``min(1, remaining)`` unconditionally, which can push a queue past its request when
  requests are fractional (a queue short by 0.5 GPU receiving a whole GPU).  With whole
  numbers the two agree: an unsatisfied queue is then short by at least one unit.
* Round shares within a few ULPs of an integer are snapped to it, and remainders within a
  few ULPs of zero count as zero.  KAI sums weights in Go map order, so at those points its
  own result depends on iteration order; snapping makes ours independent of it.
* KAI breaks leftover ties by creation time and then by queue UID; we use ``age_rank`` and
  then name, which the caller derives from the same creation timestamps.
* A non-leaf queue's ``request`` input is ignored: its request is always the sum of its
  children's (jobs only live in leaf queues).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "RESOURCES",
    "UNLIMITED",
    "QueueShareInput",
    "compute_fair_share",
    "queue_allocatable_share",
]

RESOURCES = ("gpu", "cpu", "memory")  # column order of every (3,) array; units: GPUs, millicores, bytes
UNLIMITED = -1.0

_N_RES = len(RESOURCES)
# Relative tolerance for "is an integer" / "is zero": a few ULPs, so it only absorbs rounding
# noise (about 1e-14 of the amount: 1e-13 GPU on 10 GPUs, 0.01 byte on a terabyte).
_REL_TOL = 64 * float(np.finfo(np.float64).eps)


@dataclass(frozen=True, slots=True)
class QueueShareInput:
    """One queue's inputs to the division; every array is ``(3,)`` float64 in ``RESOURCES`` order."""

    name: str
    parent: str | None  # None = top-level queue
    priority: int  # queue spec.priority (default 100); higher buckets get over-quota first
    age_rank: int  # 0 = oldest queue; leftover ties go to the older queue, then the lower name
    deserved: np.ndarray  # (3,) quota; -1 = unlimited (takes the whole available amount)
    limit: np.ndarray  # (3,) -1 = no limit; 0 = hard cap of 0
    over_quota_weight: np.ndarray  # (3,) 0 = never receives over-quota
    request: np.ndarray  # (3,) leaf: allocated + pending; non-leaf: ignored (sum of children)
    usage: np.ndarray | None = None  # (3,) normalized historical usage; None = zeros


def compute_fair_share(
    queues: Sequence[QueueShareInput], total: np.ndarray, k_value: float = 1.0
) -> dict[str, np.ndarray]:
    """Fair share per queue name, for every queue in the tree.

    ``total`` is the ``(3,)`` amount the top-level queues divide.  ``k_value`` is the
    proportion plugin's ``kValue``: how strongly historical usage shrinks a queue's
    over-quota share (0 = ignore usage).

    Returns a fresh ``(3,)`` float64 array per queue, owned by the caller.  Raises
    ``ValueError`` naming the queue for a duplicate name, a missing parent, a parent cycle
    or a resource vector of the wrong shape; the API layer should have caught these
    already, but a bad tree must never turn into a silently wrong share.
    """
    total_arr = _vector(total, "total")
    n = len(queues)
    index: dict[str, int] = {}
    for i, q in enumerate(queues):
        if q.name in index:
            raise ValueError(f"queue {q.name!r} appears more than once")
        index[q.name] = i

    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for i, q in enumerate(queues):
        if q.parent is None:
            roots.append(i)
        elif q.parent not in index:
            raise ValueError(f"queue {q.name!r} has parent {q.parent!r}, which does not exist")
        else:
            children[index[q.parent]].append(i)

    # Name ranks give every sibling set a stable visiting order and the final tie-break.
    name_rank = np.empty(n, dtype=np.int64)
    name_rank[sorted(range(n), key=lambda i: queues[i].name)] = np.arange(n)
    for kids in children:
        kids.sort(key=lambda i: name_rank[i])
    roots.sort(key=lambda i: name_rank[i])

    # Breadth-first order from the roots; whatever is not reached sits on a parent cycle.
    order: list[int] = list(roots)
    for i in order:  # the list grows while we walk it
        order.extend(children[i])
    if len(order) < n:
        reached = set(order)
        stuck = sorted(queues[i].name for i in range(n) if i not in reached)
        raise ValueError(f"queue {stuck[0]!r} is on a parent cycle (queues involved: {', '.join(stuck)})")

    deserved = np.stack([_vector(q.deserved, q.name, "deserved") for q in queues]) if n else _empty()
    limit = np.stack([_vector(q.limit, q.name, "limit") for q in queues]) if n else _empty()
    weight = np.stack([_vector(q.over_quota_weight, q.name, "over_quota_weight") for q in queues]) if n else _empty()
    usage = (
        np.stack([np.zeros(_N_RES) if q.usage is None else _vector(q.usage, q.name, "usage") for q in queues])
        if n
        else _empty()
    )
    request = np.zeros((n, _N_RES))
    for i, q in enumerate(queues):
        own = _vector(q.request, q.name, "request")
        if not children[i]:
            request[i] = own
    # Leaves' requests flow up to every ancestor (KAI propagates Request up the tree).
    for i in reversed(order):
        parent = queues[i].parent
        if parent is not None:
            request[index[parent]] += request[i]

    priority = np.array([q.priority for q in queues], dtype=np.int64)
    age_rank = np.array([q.age_rank for q in queues], dtype=np.int64)

    fair_share = np.zeros((n, _N_RES))
    groups: list[tuple[np.ndarray, list[int]]] = [(total_arr, roots)]
    groups += [(fair_share[i], children[i]) for i in order if children[i]]
    # fair_share[i] is a view, so a parent's row is final (set by an earlier group) when read.
    for amount, members in groups:
        if not members:
            continue
        idx = np.asarray(members, dtype=np.int64)
        fair_share[idx] = _divide(
            amount.copy(),
            deserved[idx],
            limit[idx],
            weight[idx],
            request[idx],
            usage[idx],
            priority[idx],
            age_rank[idx],
            name_rank[idx],
            float(k_value),
        )
    return {q.name: fair_share[i].copy() for i, q in enumerate(queues)}


def queue_allocatable_share(deserved: np.ndarray, fair_share: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """How much a queue may hold: ``max(deserved, fair_share)`` capped by ``limit``.

    Mirrors KAI's ``ResourceShare.GetAllocatableShare``: an unlimited quota (deserved -1)
    makes the limit the answer, and where the limit is unlimited too the result is
    ``np.inf`` (KAI returns -1 there and every caller special-cases it; ``inf`` compares
    correctly instead).  Vectorised: any broadcastable shapes, usually ``(3,)`` or
    ``(n, 3)``.
    """
    d = np.asarray(deserved, dtype=np.float64)
    f = np.asarray(fair_share, dtype=np.float64)
    lim = np.asarray(limit, dtype=np.float64)
    limited = lim != UNLIMITED
    share = np.maximum(d, f)
    share = np.where(limited, np.minimum(lim, share), share)
    unlimited_quota = np.where(limited, lim, np.inf)
    return np.where(d == UNLIMITED, unlimited_quota, share)


# --------------------------------------------------------------------------------------------
# One sibling set


def _divide(
    amount: np.ndarray,  # (3,) what the siblings share
    deserved: np.ndarray,  # (m, 3)
    limit: np.ndarray,  # (m, 3)
    weight: np.ndarray,  # (m, 3)
    request: np.ndarray,  # (m, 3) propagated
    usage: np.ndarray,  # (m, 3)
    priority: np.ndarray,  # (m,)
    age_rank: np.ndarray,  # (m,)
    name_rank: np.ndarray,  # (m,)
    k_value: float,
) -> np.ndarray:
    """Fair shares ``(m, 3)`` of one sibling set; steps 1-4 of the module docstring."""
    tol = _REL_TOL * np.maximum(1.0, np.abs(amount))  # (3,)
    requestable = np.where(limit != UNLIMITED, np.minimum(limit, request), request)
    quota = np.where(deserved == UNLIMITED, amount, deserved)
    share = np.minimum(quota, requestable)
    remaining = amount - share.sum(axis=0)
    remaining = np.where(remaining > tol, remaining, 0.0)
    if not (remaining > 0).any():
        return share

    for prio in np.unique(priority)[::-1]:  # highest priority bucket first
        if not (remaining > 0).any():
            break
        members = np.flatnonzero(priority == prio)
        sub = share[members]
        leftover, has_leftover = _rounds(
            sub,
            remaining,
            requestable[members],
            request[members],
            limit[members],
            weight[members],
            usage[members],
            k_value,
            tol,
        )
        _hand_out_leftovers(
            sub, remaining, leftover, has_leftover, requestable[members], age_rank[members], name_rank[members], tol
        )
        share[members] = sub
    return share


def _rounds(
    share: np.ndarray,  # (b, 3) updated in place
    remaining: np.ndarray,  # (3,) updated in place
    requestable: np.ndarray,
    request: np.ndarray,
    limit: np.ndarray,
    weight: np.ndarray,
    usage: np.ndarray,
    k_value: float,
    tol: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """KAI's ``divideUpToFairShare`` for one priority bucket, all resource columns at once.

    Returns the remembered fractional leftovers ``(b, 3)`` and which of them are live (a
    queue that later receives its whole remaining request forgets its leftover, as KAI
    deletes it from ``remainingRequested``).
    """
    leftover = np.zeros_like(share)
    has_leftover = np.zeros(share.shape, dtype=bool)
    going = remaining > 0  # (3,) per-column "run another round"
    while going.any():
        start = remaining.copy()
        still_wanted = np.maximum(requestable - share, 0.0)  # KAI getRemainingRequested
        unsatisfied = (request > share) & ((limit == UNLIMITED) | (limit > share))
        total_weight = np.where(still_wanted > 0, weight, 0.0).sum(axis=0)
        safe_total = np.where(total_weight > 0, total_weight, 1.0)
        n_weight = weight / safe_total
        share_weight = np.where(unsatisfied, np.maximum(0.0, n_weight + k_value * (n_weight - usage)), 0.0)
        weight_sum = share_weight.sum(axis=0)
        going &= (total_weight > 0) & (weight_sum > 0)
        if not going.any():
            break
        f = start * (share_weight / np.where(weight_sum > 0, weight_sum, 1.0))
        nearest = np.rint(f)
        f = np.where(np.abs(f - nearest) <= tol, nearest, f)

        eligible = unsatisfied & (weight != 0) & going
        full = eligible & (still_wanted <= f)
        partial = eligible & ~full
        floored = np.floor(f)
        give = np.where(full, still_wanted, np.where(partial, floored, 0.0))
        fraction = f - floored
        remember = partial & (fraction > 0)
        leftover[remember] = fraction[remember]
        has_leftover |= remember
        has_leftover &= ~full

        share += give
        remaining -= give.sum(axis=0)
        remaining[remaining <= tol] = 0.0
        # KAI: another round only if someone asked for strictly less than its round share,
        # i.e. resources were returned to the pot.
        going &= (full & (still_wanted < f)).any(axis=0) & (remaining > 0)
    return leftover, has_leftover


def _hand_out_leftovers(
    share: np.ndarray,  # (b, 3) updated in place
    remaining: np.ndarray,  # (3,) updated in place
    leftover: np.ndarray,
    has_leftover: np.ndarray,
    requestable: np.ndarray,
    age_rank: np.ndarray,
    name_rank: np.ndarray,
    tol: np.ndarray,
) -> None:
    """KAI's ``divideRemainingResource``: one unit each, largest remembered fraction first.

    Done as one sorted pass per column: everyone before the pot runs dry takes its full
    unit, so a queue's grant is ``clip(remaining - sum of earlier grants, 0, its unit)``.
    """
    for col in range(_N_RES):
        if remaining[col] <= 0 or not has_leftover[:, col].any():
            continue
        cand = np.flatnonzero(has_leftover[:, col])
        order = np.lexsort((name_rank[cand], age_rank[cand], -leftover[cand, col]))
        cand = cand[order]
        unit = np.minimum(1.0, np.maximum(requestable[cand, col] - share[cand, col], 0.0))
        before = np.cumsum(unit) - unit
        give = np.clip(remaining[col] - before, 0.0, unit)
        give[give <= tol[col]] = 0.0
        share[cand, col] += give
        left = remaining[col] - give.sum()
        remaining[col] = left if left > tol[col] else 0.0


# --------------------------------------------------------------------------------------------
# Input checks


def _vector(value: np.ndarray, queue: str, field: str | None = None) -> np.ndarray:
    """``value`` as a (3,) float64 array, or ValueError naming the queue and field."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (_N_RES,):
        where = queue if field is None else f"queue {queue!r}: {field}"
        raise ValueError(f"{where} must have shape ({_N_RES},) in {RESOURCES} order, got {arr.shape}")
    return arr


def _empty() -> np.ndarray:
    return np.zeros((0, _N_RES))
