"""The proportion plugin's fair share (kai.scheduler.plugins.proportion; docs/reference/kai-behaviour.md §4.4.1-2) as
the Session gets it: from queue manifests and pods to fair shares in queue base units. KAI's worked examples run
end to end (the division itself is tested in test_fairshare); the rest checks what the plugin adds: units,
requests of leaf queues only (ready jobs only), GPU fractions, time-based usage with kValue."""

from __future__ import annotations

from typing import Any

import pytest

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.model import MILLI
from kai.scheduler.session import Session
from tests.unit.builders import job_docs, node, pod, podgroup, qi, queue, session_of


def gpu_fair(ssn: Session, *names: str) -> list[float]:
    return [float(ssn.queues.fair_share[qi(ssn.snap, n)][0]) / MILLI for n in names]


def two_teams(gpus: int, requests: tuple[int, int], quotas=(2, 2), weights=(1, 2)) -> list[dict[str, Any]]:
    """team-a and team-b under dept with GPU quotas and weights, each asking for *requests* GPUs (pending)."""
    docs = [
        node("n0", gpu=gpus, cpu="64"),
        queue("dept"),
        queue("team-a", "dept", gpu=(quotas[0], -1, weights[0])),
        queue("team-b", "dept", gpu=(quotas[1], -1, weights[1])),
    ]
    for team, want in zip(("team-a", "team-b"), requests, strict=True):
        if want:
            docs += job_docs(f"{team}-job", team, 1, gpu=want)
    return docs


@pytest.mark.parametrize(
    ("gpus", "requests", "quotas", "weights", "fair"),
    [
        (10, (8, 6), (2, 2), (1, 2), [4, 6]),  # KAI's worked examples
        (10, (4, 7), (2, 2), (1, 2), [4, 6]),
        (12, (10, 7), (2, 2), (1, 2), [5, 7]),
        (3, (3, 3), (0, 0), (1, 1), [2, 1]),  # equal queues: the leftover GPU goes to the older queue
    ],
)
def test_kai_worked_examples(
    gpus: int, requests: tuple[int, int], quotas: tuple[int, int], weights: tuple[int, int], fair: list[int]
) -> None:
    ssn = session_of(two_teams(gpus, requests, quotas, weights))
    assert gpu_fair(ssn, "team-a", "team-b") == fair
    assert gpu_fair(ssn, "dept") == [gpus]


def test_units_cpu_in_millicores_memory_in_bytes() -> None:
    docs = [
        node("n0", cpu="16", memory="64Gi"),
        queue("dept"),
        queue("team", "dept", cpu=(2000, -1, 0), memory=(1000, -1, 0)),  # quotas: 2 cores, 1000 MB
        *job_docs("j", "team", 1, gpu=0, cpu="3", memory="2G"),
    ]
    ssn = session_of(docs)
    fair = ssn.queues.fair_share[qi(ssn.snap, "team")].tolist()
    assert fair[1:] == [2000.0, 1_000_000_000.0]  # weight 0: no over-quota, so exactly the quotas


def test_fractions_are_requested_and_shared_as_fractions() -> None:
    docs = [
        node("n0", gpu=1),
        queue("dept"),
        queue("team-a", "dept", gpu=(0, -1, 1)),
        queue("team-b", "dept", gpu=(0, -1, 1)),
        *job_docs("a", "team-a", 1, fraction="0.3"),
        *job_docs("b", "team-b", 1, fraction="0.5", devices=2),  # asks for 1 GPU in all
    ]
    ssn = session_of(docs)
    assert ssn.queues.req[qi(ssn.snap, "team-a")][0] == 300
    assert ssn.queues.req[qi(ssn.snap, "team-b")][0] == 1000
    # the over-quota phase hands out whole GPUs: the one GPU goes to the older queue, whose 0.3 uses part of it
    a, b = gpu_fair(ssn, "team-a", "team-b")
    assert a + b <= 1 and a == pytest.approx(0.3)


def test_an_unready_job_requests_nothing() -> None:
    """A gang with fewer live pods than its minMember is not ready: its pending pods add no request, so its queue's
    fair share stays 0 (KAI's FilterUnready)."""
    docs = [
        node("n0", gpu=4),
        queue("dept"),
        queue("team-a", "dept", gpu=(0, -1, 1)),
        queue("team-b", "dept", gpu=(0, -1, 1)),
        podgroup("unready", "team-a", min_member=3),
        pod("unready-0", "unready"),
        pod("unready-1", "unready"),
        *job_docs("ready", "team-b", 1, gpu=2),
    ]
    ssn = session_of(docs)
    assert [ssn.queues.req[qi(ssn.snap, q)][0] for q in ("team-a", "team-b")] == [0, 2000]
    assert gpu_fair(ssn, "team-a", "team-b") == [0, 2]


@pytest.mark.parametrize(("k", "fair"), [(0.0, [4, 4]), (0.5, [2, 6]), (1.0, [0, 8])])
def test_time_based_usage_weighs_with_k_value(k: float, fair: list[int]) -> None:
    """Equal queues asking for all 8 GPUs; team-a used the whole cluster lately, team-b nothing. kValue 0 ignores
    usage; the larger k, the less team-a gets over its quota: shareWeight = max(0, nW + k(nW - usage)) is
    0.5 + k(0.5 - 1) for team-a and 0.5 + 0.5k for team-b."""
    docs = two_teams(8, (8, 8), quotas=(0, 0), weights=(1, 1))
    usage = {"team-a": (1.0, 0.0, 0.0), "team-b": (0.0, 0.0, 0.0), "dept": (0.5, 0.0, 0.0)}
    conf = SchedulerConf().with_plugin("proportion", kValue=k)
    assert gpu_fair(session_of(docs, conf, queue_usage=usage), "team-a", "team-b") == fair
