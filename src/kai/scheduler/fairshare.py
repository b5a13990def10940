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
   queues (``request > fair_share`` and, if limited, ``limit > fair_share``; that is,
   requestable left) compete for the amount present at the start of the round:
   ``nW = w / sum(w)`` over those queues, ``shareWeight = max(0, nW +
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
propagates requests from leaves to every ancestor, and then divides level by level from the
roots, so a parent's share is final before its children divide it.  All sibling sets of
one level are divided side by side (``_divide_level``): members sit contiguously per set,
per-set sums are ``np.add.reduceat``, and every (set, resource) pair carries its own
remaining amount and its own "another round" flag.  The Python loops therefore run
``levels x buckets x rounds`` times, however many queues and sets there are.  A round
either ends a pair's bucket or satisfies at least one more queue, so a bucket runs at most
``n_siblings + 1`` rounds.  The leftover phase is one sorted pass over every (set,
resource) pot (a cumulative sum, restarted per pot, decides who still gets a unit), never a
per-unit loop, so bytes of memory cost no more than GPUs.

Deliberate choices (where we differ from, or pin down, the Go code)
-------------------------------------------------------------------
* Leftover units are capped by the queue's remaining requestable amount.  KAI gives
  ``min(1, remaining)`` unconditionally, which can push a queue past its request when
  requests are fractional (a queue short by 0.5 GPU receiving a whole GPU).  With whole
  numbers the two agree: an unsatisfied queue is then short by at least one unit.
* Rounding noise is not allowed to decide anything.  "A few ULPs" below means 64 machine
  epsilons of the amount being divided.  Round shares that close to an integer are snapped
  to it; a remaining amount or a still-wanted amount that close to zero counts as zero;
  remembered fractions that close to each other are a tie (decided by age, then name).
  KAI sums share weights in Go map order, so at exactly these points its own result varies
  from run to run (e.g. whether ``5 < 5.000000000000001`` starts another round); we
  follow exact arithmetic instead.
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

    # Sorting by name first makes every child list, and so every sibling set, name-ordered.
    by_name = sorted(range(n), key=lambda i: queues[i].name)
    name_rank = np.empty(n, dtype=np.int64)
    name_rank[by_name] = np.arange(n)
    children: list[list[int]] = [[] for _ in range(n)]
    parent_of = [-1] * n
    roots: list[int] = []
    for i in by_name:
        parent = queues[i].parent
        if parent is None:
            roots.append(i)
        elif parent not in index:
            raise ValueError(f"queue {queues[i].name!r} has parent {parent!r}, which does not exist")
        else:
            parent_of[i] = index[parent]
            children[parent_of[i]].append(i)

    # Sibling sets level by level from the roots; whatever is never reached sits on a cycle.
    levels: list[list[list[int]]] = []
    frontier = [roots] if roots else []
    reached = 0
    while frontier:
        levels.append(frontier)
        reached += sum(len(g) for g in frontier)
        frontier = [children[i] for group in frontier for i in group if children[i]]
    if reached < n:
        raise ValueError(_describe_cycle(queues, parent_of, levels))

    deserved = _stack(queues, "deserved")
    limit = _stack(queues, "limit")
    weight = _stack(queues, "over_quota_weight")
    usage = _stack(queues, "usage")
    leaf = np.array([not kids for kids in children], dtype=bool)
    # Jobs live in leaves; a parent asks for what its subtree asks for (KAI propagates
    # Request up to every ancestor).  Deepest level first, so children are final.
    request = np.where(leaf[:, None], _stack(queues, "request"), 0.0)
    for level in reversed(levels[1:]):
        for group in level:
            request[parent_of[group[0]]] += request[group].sum(axis=0)

    age_rank = np.array([q.age_rank for q in queues], dtype=np.int64)
    # Over-quota bucket of each queue among its siblings: 0 = its set's highest priority.
    bucket = np.zeros(n, dtype=np.int64)
    for level in levels:
        for group in level:
            prios = sorted({queues[i].priority for i in group}, reverse=True)
            if len(prios) > 1:
                rank = {p: r for r, p in enumerate(prios)}
                bucket[group] = [rank[queues[i].priority] for i in group]

    fair_share = np.zeros((n, _N_RES))
    for depth, level in enumerate(levels):
        idx = np.fromiter((i for group in level for i in group), dtype=np.int64)
        sizes = np.fromiter((len(group) for group in level), dtype=np.int64, count=len(level))
        if depth == 0:
            amount = total_arr[None, :].copy()
        else:
            amount = fair_share[[parent_of[group[0]] for group in level]]
        fair_share[idx] = _divide_level(
            _Level(
                amount=amount,
                group=np.repeat(np.arange(len(level)), sizes),
                starts=np.concatenate(([0], np.cumsum(sizes)[:-1])),
                bucket=bucket[idx],
                deserved=deserved[idx],
                limit=limit[idx],
                weight=weight[idx],
                request=request[idx],
                usage=usage[idx],
                age_rank=age_rank[idx],
                name_rank=name_rank[idx],
            ),
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
# One level of the tree: every sibling set at that depth, divided side by side


@dataclass(frozen=True, slots=True)
class _Level:
    """The sibling sets of one tree depth, members contiguous per set (``m`` queues, ``G`` sets)."""

    amount: np.ndarray  # (G, 3) what each set divides
    group: np.ndarray  # (m,) set of each member, non-decreasing
    starts: np.ndarray  # (G,) first member of each set (sets are never empty)
    bucket: np.ndarray  # (m,) priority bucket within the set, 0 = highest priority
    deserved: np.ndarray  # (m, 3)
    limit: np.ndarray  # (m, 3)
    weight: np.ndarray  # (m, 3)
    request: np.ndarray  # (m, 3) propagated
    usage: np.ndarray  # (m, 3)
    age_rank: np.ndarray  # (m,)
    name_rank: np.ndarray  # (m,)

    def per_set(self, x: np.ndarray) -> np.ndarray:
        """Sum of an (m, 3) member array over each set: (G, 3)."""
        return np.add.reduceat(x, self.starts, axis=0)


def _divide_level(lv: _Level, k_value: float) -> np.ndarray:
    """Fair shares ``(m, 3)`` of every set of one level; steps 1-4 of the module docstring.

    Each (set, resource) pair is independent, so each carries its own remaining amount and
    its own "another round" flag; the Python loops only run as often as the slowest pair.
    """
    g = lv.group
    tol = _REL_TOL * np.maximum(1.0, np.abs(lv.amount))  # (G, 3)
    requestable = np.where(lv.limit != UNLIMITED, np.minimum(lv.limit, lv.request), lv.request)
    quota = np.where(lv.deserved == UNLIMITED, lv.amount[g], lv.deserved)
    share = np.minimum(quota, requestable)
    remaining = lv.amount - lv.per_set(share)
    # Not positive: no over-quota phase; the deserved phase stands even past the amount.
    remaining = np.where(remaining > tol, remaining, 0.0)

    for b in range(int(lv.bucket.max()) + 1):
        if not (remaining > 0).any():
            break
        in_bucket = (lv.bucket == b)[:, None] & (remaining[g] > 0)  # (m, 3)
        leftover, has_leftover = _rounds(lv, share, remaining, in_bucket, requestable, k_value, tol)
        _hand_out_leftovers(lv, share, remaining, leftover, has_leftover, requestable, tol)
    return share


def _rounds(
    lv: _Level,
    share: np.ndarray,  # (m, 3) updated in place
    remaining: np.ndarray,  # (G, 3) updated in place
    in_bucket: np.ndarray,  # (m, 3) members of the current bucket, in sets with something left
    requestable: np.ndarray,  # (m, 3)
    k_value: float,
    tol: np.ndarray,  # (G, 3)
) -> tuple[np.ndarray, np.ndarray]:
    """KAI's ``divideUpToFairShare`` for one bucket of every set, all resources at once.

    Returns the remembered fractional leftovers ``(m, 3)`` and which of them are live (a
    queue that later receives its whole remaining request forgets its leftover, as KAI
    deletes it from ``remainingRequested``).
    """
    g = lv.group
    leftover = np.zeros_like(share)
    has_leftover = np.zeros(share.shape, dtype=bool)
    tol_m = tol[g]  # (m, 3) each member's set tolerance
    weighted = lv.weight != 0
    going = remaining > 0  # (G, 3) "run another round" per set and resource
    while going.any():
        start = remaining.copy()
        # KAI getRemainingRequested; a few ULPs of "still wanted" is rounding noise, not a want.
        still_wanted = requestable - share
        still_wanted = np.where(still_wanted > tol_m, still_wanted, 0.0)
        # KAI's "not satisfied" (request > fairShare, and limit > fairShare unless unlimited)
        # is exactly "min(limit, request) > fairShare", i.e. something still wanted.
        unsatisfied = in_bucket & (still_wanted > 0)
        total_weight = lv.per_set(np.where(unsatisfied, lv.weight, 0.0))
        n_weight = lv.weight / np.where(total_weight > 0, total_weight, 1.0)[g]
        share_weight = np.where(unsatisfied, np.maximum(0.0, n_weight + k_value * (n_weight - lv.usage)), 0.0)
        weight_sum = lv.per_set(share_weight)
        going &= (total_weight > 0) & (weight_sum > 0)
        if not going.any():
            break
        f = start[g] * (share_weight / np.where(weight_sum > 0, weight_sum, 1.0)[g])
        nearest = np.rint(f)
        f = np.where(np.abs(f - nearest) <= tol_m, nearest, f)

        eligible = unsatisfied & weighted & going[g]
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
        remaining -= lv.per_set(give)
        remaining[remaining <= tol] = 0.0
        # KAI: another round only if someone asked for strictly less than its round share,
        # i.e. resources went back to the pot.
        returned = lv.per_set((full & (still_wanted < f)).astype(np.float64)) > 0
        going &= returned & (remaining > 0)
    return leftover, has_leftover


def _hand_out_leftovers(
    lv: _Level,
    share: np.ndarray,  # (m, 3) updated in place
    remaining: np.ndarray,  # (G, 3) updated in place
    leftover: np.ndarray,  # (m, 3)
    has_leftover: np.ndarray,  # (m, 3)
    requestable: np.ndarray,  # (m, 3)
    tol: np.ndarray,  # (G, 3)
) -> None:
    """KAI's ``divideRemainingResource``: one unit each, largest remembered fraction first.

    One sorted pass over every (set, resource) pot at once: within a pot, everyone before
    it runs dry takes a full unit, so a queue's grant is ``clip(pot - earlier grants, 0,
    unit)``, with "earlier grants" a cumulative sum restarted at each pot.
    """
    g = lv.group
    member, col = np.nonzero(has_leftover & (remaining[g] > 0))
    if not member.size:
        return
    n_sets = remaining.shape[0]
    pot = col * n_sets + g[member]  # (set, resource) pair; indexes remaining.T.ravel()
    frac = leftover[member, col]
    # Largest fraction first.  Fractions within a few ULPs of each other are a tie (they
    # differ only by rounding), which goes to the older queue, then the lower name.
    order = np.lexsort((-frac, pot))
    member, col, pot, frac = member[order], col[order], pot[order], frac[order]
    new_tie = np.ones(member.size, dtype=bool)
    new_tie[1:] = (pot[1:] != pot[:-1]) | (frac[:-1] - frac[1:] > tol[g[member[1:]], col[1:]])
    order = np.lexsort((lv.name_rank[member], lv.age_rank[member], np.cumsum(new_tie)))
    member, col, pot = member[order], col[order], pot[order]  # pots stay sorted

    unit = np.minimum(1.0, np.maximum(requestable[member, col] - share[member, col], 0.0))
    granted_before = np.cumsum(unit) - unit
    granted_before -= granted_before[np.searchsorted(pot, pot)]  # restart at each pot
    pot_tol = tol.T.ravel()
    give = np.clip(remaining.T.ravel()[pot] - granted_before, 0.0, unit)
    give[give <= pot_tol[pot]] = 0.0
    share[member, col] += give  # (member, col) pairs are unique
    left = remaining.T.ravel() - np.bincount(pot, give, minlength=pot_tol.size)
    remaining[:] = np.where(left > pot_tol, left, 0.0).reshape(_N_RES, n_sets).T


# --------------------------------------------------------------------------------------------
# Input checks


def _vector(value: np.ndarray, where: str) -> np.ndarray:
    """``value`` as a (3,) float64 array, or ValueError saying whose it is."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (_N_RES,):
        raise ValueError(f"{where} must have shape ({_N_RES},) in {RESOURCES} order, got {arr.shape}")
    return arr


def _describe_cycle(queues: Sequence[QueueShareInput], parent_of: list[int], levels: list[list[list[int]]]) -> str:
    """Name a parent cycle among the queues the level walk never reached."""
    reached = {i for level in levels for group in level for i in group}
    first = min((i for i in range(len(queues)) if i not in reached), key=lambda i: queues[i].name)
    seen: list[int] = []
    i = first
    while i not in seen:  # every unreached queue has a parent, so this walk must loop
        seen.append(i)
        i = parent_of[i]
    cycle = [*seen[seen.index(i) :], i]
    names = " -> ".join(queues[j].name for j in cycle)
    return f"queue {queues[i].name!r} is on a parent cycle: {names}"


def _stack(queues: Sequence[QueueShareInput], field: str) -> np.ndarray:
    """One field of every queue as an (n, 3) float64 array (``usage`` None reads as zeros).

    The fast path stacks everything at once; only if that fails is each queue checked, to
    name the culprit.
    """
    values = [getattr(q, field) for q in queues]
    if field == "usage":
        values = [np.zeros(_N_RES) if v is None else v for v in values]
    try:
        arr = np.array(values, dtype=np.float64)
    except ValueError:  # ragged shapes
        arr = None
    if arr is None or arr.shape != (len(queues), _N_RES):
        for q, v in zip(queues, values):
            _vector(v, f"queue {q.name!r}: {field}")
        if arr is None:
            raise ValueError(f"{field} must have shape ({_N_RES},) for every queue")
    return arr.reshape(len(queues), _N_RES)
