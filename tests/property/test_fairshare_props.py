"""Invariants of kai.scheduler.fairshare.compute_fair_share over random queue trees.

Trees have depth <= 3; quotas, limits, weights, requests and totals are small integers so
that ties (equal siblings, exact fits) are common.  The invariants follow KAI's rules,
including its one surprise: when the quotas of a sibling set ask for more than the parent
has, the deserved phase stands as is and the siblings may sum past the parent.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kai.scheduler.fairshare import UNLIMITED, QueueShareInput, compute_fair_share

EPS = 1e-9
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def table(rows: int, low: int, high: int) -> st.SearchStrategy[np.ndarray]:
    """(rows, 3) float64 of integers in [low, high]; negatives read as -1 (unlimited)."""
    return hnp.arrays(np.int64, (rows, 3), elements=st.integers(low, high)).map(
        lambda a: np.where(a < 0, UNLIMITED, a.astype(np.float64))
    )


# Draws are whole tables, not one value at a time: hypothesis spends most of its time per draw.
def quotas(rows: int) -> st.SearchStrategy[np.ndarray]:
    return table(rows, -1, 6)  # 1 in 8 unlimited


def limits(rows: int) -> st.SearchStrategy[np.ndarray]:
    return table(rows, -6, 12)  # about 1 in 3 unlimited


def weights(rows: int) -> st.SearchStrategy[np.ndarray]:
    return table(rows, 0, 3)


def requests(rows: int) -> st.SearchStrategy[np.ndarray]:
    return table(rows, 0, 12)


def totals() -> st.SearchStrategy[np.ndarray]:
    return table(1, 0, 40).map(lambda a: a[0])


@dataclass(frozen=True)
class Case:
    queues: list[QueueShareInput]
    total: np.ndarray
    k_value: float


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A random forest of depth <= 3 with random quotas, limits, weights and requests."""
    shapes: list[tuple[str, str | None]] = []

    def grow(parent: str | None, depth: int) -> None:
        name = f"q{len(shapes)}"
        shapes.append((name, parent))
        if depth < 3:
            for _ in range(draw(st.integers(0, 3))):
                grow(name, depth + 1)

    for _ in range(draw(st.integers(1, 4))):
        grow(None, 1)

    n = len(shapes)
    ages = draw(st.permutations(range(n)))
    priorities = draw(st.lists(st.sampled_from([50, 100, 150]), min_size=n, max_size=n))
    deserved, limit, weight, request = draw(quotas(n)), draw(limits(n)), draw(weights(n)), draw(requests(n))
    usage = None
    if draw(st.booleans()):
        usage = draw(hnp.arrays(np.float64, (n, 3), elements=st.sampled_from([0.0, 0.1, 0.25, 0.5])))
    queues = [
        QueueShareInput(
            name=name,
            parent=parent,
            priority=priorities[i],
            age_rank=ages[i],
            deserved=deserved[i],
            limit=limit[i],
            over_quota_weight=weight[i],
            request=request[i],  # ignored for non-leaves
            usage=None if usage is None else usage[i],
        )
        for i, (name, parent) in enumerate(shapes)
    ]
    return Case(queues, draw(totals()), draw(st.sampled_from([0.0, 1.0, 2.0])))


@st.composite
def equal_siblings(draw: st.DrawFn) -> Case:
    """Top-level siblings identical except for their weights (and ages)."""
    n = draw(st.integers(2, 5))
    deserved, lim, request = draw(quotas(1))[0], draw(limits(1))[0], draw(requests(1))[0]
    priority = draw(st.sampled_from([50, 100]))
    ages = draw(st.permutations(range(n)))
    weight = draw(weights(n))
    queues = [QueueShareInput(f"q{i}", None, priority, ages[i], deserved, lim, weight[i], request) for i in range(n)]
    # Sometimes add a different queue, so that some buckets need more than one round.
    if draw(st.booleans()):
        queues.append(
            QueueShareInput(
                "other",
                None,
                priority,
                n,
                draw(quotas(1))[0],
                draw(limits(1))[0],
                draw(weights(1))[0],
                draw(requests(1))[0],
            )
        )
    return Case(queues, draw(totals()), draw(st.sampled_from([0.0, 1.0])))


# ---------------------------------------------------------------------------------------------
# Reference bookkeeping the properties need (requests propagated, sibling sets and amounts)


def tree_facts(case: Case, shares: dict[str, np.ndarray]):
    """Yield (amount, names) per sibling set, plus the propagated requestable per queue."""
    by_name = {q.name: q for q in case.queues}
    kids: dict[str | None, list[str]] = {}
    for q in case.queues:
        kids.setdefault(q.parent, []).append(q.name)

    request: dict[str, np.ndarray] = {}

    def propagate(name: str) -> np.ndarray:
        children = kids.get(name, [])
        request[name] = sum((propagate(c) for c in children), np.zeros(3)) if children else by_name[name].request
        return request[name]

    for root in kids.get(None, []):
        propagate(root)
    requestable = {
        n: np.where(by_name[n].limit != UNLIMITED, np.minimum(by_name[n].limit, request[n]), request[n])
        for n in by_name
    }
    groups = [(case.total, kids.get(None, []))]
    groups += [(shares[p], c) for p, c in kids.items() if p is not None]
    return groups, requestable, request


def deserved_phase(amount: np.ndarray, q: QueueShareInput, requestable: np.ndarray) -> np.ndarray:
    return np.minimum(np.where(q.deserved == UNLIMITED, amount, q.deserved), requestable)


# ---------------------------------------------------------------------------------------------
# Properties


@SETTINGS
@given(cases())
def test_siblings_fit_in_parent_unless_quotas_oversubscribe(case: Case):
    """(a) and (b): the division never creates resources, and quota (up to request) is honoured."""
    shares = compute_fair_share(case.queues, case.total, case.k_value)
    by_name = {q.name: q for q in case.queues}
    groups, requestable, _ = tree_facts(case, shares)
    for amount, names in groups:
        base = np.stack([deserved_phase(amount, by_name[n], requestable[n]) for n in names])
        got = np.stack([shares[n] for n in names])
        fits = base.sum(axis=0) <= amount + EPS
        # (a) the siblings' shares sum to at most what they divide (the top level: total) ...
        assert np.all(got.sum(axis=0)[fits] <= amount[fits] + EPS)
        # (b) ... and each gets at least min(deserved, requestable).
        assert np.all(got[:, fits] >= base[:, fits] - EPS)
        # KAI: oversubscribed quotas skip the over-quota phase; the deserved phase stands.
        np.testing.assert_array_equal(got[:, ~fits], base[:, ~fits])


@SETTINGS
@given(cases())
def test_no_queue_exceeds_its_requestable(case: Case):
    """(d) a fair share never passes the limit or the (propagated) request."""
    shares = compute_fair_share(case.queues, case.total, case.k_value)
    _, requestable, request = tree_facts(case, shares)
    for q in case.queues:
        assert np.all(shares[q.name] >= 0)
        assert np.all(shares[q.name] <= requestable[q.name] + EPS)
        assert np.all(shares[q.name] <= request[q.name] + EPS)
        limited = q.limit != UNLIMITED
        assert np.all(shares[q.name][limited] <= q.limit[limited] + EPS)


@SETTINGS
@given(cases())
def test_larger_weight_never_gets_less_among_equal_siblings_in_trees(case: Case):
    """(c) over whole trees: equal siblings (quota, request, limit, priority, usage) ordered by weight."""
    shares = compute_fair_share(case.queues, case.total, case.k_value)
    by_name = {q.name: q for q in case.queues}
    groups, _, request = tree_facts(case, shares)
    for _, names in groups:
        check_weight_monotone([by_name[n] for n in names], shares, request)


@SETTINGS
@given(equal_siblings())
def test_larger_weight_never_gets_less_among_equal_siblings(case: Case):
    """(c) on sibling sets built to be equal in everything but weight."""
    shares = compute_fair_share(case.queues, case.total, case.k_value)
    request = {q.name: q.request for q in case.queues}
    check_weight_monotone(case.queues, shares, request)


def check_weight_monotone(
    siblings: list[QueueShareInput], shares: dict[str, np.ndarray], request: dict[str, np.ndarray]
) -> None:
    def usage(q: QueueShareInput) -> np.ndarray:
        return np.zeros(3) if q.usage is None else q.usage

    for a in siblings:
        for b in siblings:
            if a.priority != b.priority:
                continue
            same = (
                (a.deserved == b.deserved)
                & (a.limit == b.limit)
                & (request[a.name] == request[b.name])
                & (usage(a) == usage(b))
            )
            heavier = same & (a.over_quota_weight > b.over_quota_weight)
            assert np.all(shares[a.name][heavier] >= shares[b.name][heavier] - EPS), (a.name, b.name)


@SETTINGS
@given(cases(), st.randoms(use_true_random=False))
def test_result_is_deterministic(case: Case, rnd: random.Random):
    """(e) same input, same output, whatever order the queues arrive in."""
    first = compute_fair_share(case.queues, case.total, case.k_value)
    again = compute_fair_share(case.queues, case.total, case.k_value)
    shuffled = list(case.queues)
    rnd.shuffle(shuffled)
    reordered = compute_fair_share(shuffled, case.total, case.k_value)
    assert first.keys() == again.keys() == reordered.keys() == {q.name for q in case.queues}
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
        np.testing.assert_array_equal(first[name], reordered[name])
