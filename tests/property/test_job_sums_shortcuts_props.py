"""The cycle's passes that read a job's snapshot sums instead of its pods decide as the passes that read the pods.

* stalegangeviction checks a job this cycle did not touch from ``JobSums`` (``used``, ``succeeded``), and
  reads the pods only of stamped jobs, touched jobs and gangs with sub-groups (``stalegang._may_act``).
* allocate and the eviction actions consider only the jobs with a pending pod in the snapshot
  (``Session.waiting_jobs``).

Random clusters of gangs whose pods are pending, running, releasing or succeeded, with minMember above, at or
below what runs, some PodGroups already stamped stale (long ago or just now) and some with a grace period of
their own; teams near their quotas so reclaim and preempt touch jobs before stalegangeviction runs. Each cluster
runs four cycles twice, with the shortcuts and with both passes reading every job's pods, and every cycle's
binds, pipelines, evictions and PodGroup statuses (the stale stamps among them) must be equal.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from kai.api import constants as C
from kai.scheduler.actions import stalegang
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.decisions import CycleResult
from kai.scheduler.model import ACTIVE_USED, JobInfo
from kai.scheduler.session import Session
from tests.property.manifests import GpuBook, GpuRequest, gpu_pod, node_doc, podgroup_doc, queue_doc
from tests.property.test_eviction_props import SETTINGS, _cluster, _decisions

STAMPS = ["2025-12-31T23:50:00Z", "2025-12-31T23:59:59Z"]  # ten minutes stale (past any grace drawn), or a second


@st.composite
def gangs(draw: st.DrawFn) -> list[dict[str, Any]]:
    shape = [(f"node{i}", draw(st.sampled_from([2, 4, 8])), None) for i in range(draw(st.integers(2, 4)))]
    docs: list[dict[str, Any]] = [node_doc(name, gpus, memory) for name, gpus, memory in shape]
    docs.append(queue_doc("dept", None, -1, 1))
    teams = [f"team-{c}" for c in "ab"]
    total = sum(g for _, g, _ in shape)
    for t in teams:
        docs.append(queue_doc(t, "dept", draw(st.integers(0, total // 2)), draw(st.integers(1, 2))))
    book = GpuBook.of(shape)
    for j in range(draw(st.integers(2, 10))):
        name, size = f"job{j}", draw(st.integers(1, 3))
        pg = podgroup_doc(
            name,
            draw(st.sampled_from(teams)),
            draw(st.integers(1, size + 1)),  # at most one over its pods: never ready, or stale once one goes
            draw(st.sampled_from(["train", "build-preemptible", "inference"])),
            f"2025-12-31T20:{j:02d}:00Z",
        )
        annotations = {}
        if draw(st.integers(0, 3)) == 0:
            annotations[C.ANNOTATION_STALE_TIMESTAMP] = draw(st.sampled_from(STAMPS))
        if draw(st.integers(0, 3)) == 0:
            annotations[C.ANNOTATION_STALENESS_GRACE_PERIOD] = draw(st.sampled_from(["0s", "5s", "-1s", "2m"]))
        if annotations:
            pg["metadata"]["annotations"] = annotations
        docs.append(pg)
        for k in range(size):
            state = draw(st.sampled_from(["pending", "running", "running", "releasing", "succeeded"]))
            spot = book.place(draw, GpuRequest(whole=1)) if state != "pending" else None
            node = spot[0] if spot is not None else None
            pod = gpu_pod(
                f"{name}-{k}",
                GpuRequest(whole=1),
                annotations={"pod-group-name": name},
                node=node,
                releasing=state == "releasing",
            )
            if state == "succeeded" and node is not None:
                pod["status"]["phase"] = "Succeeded"
            docs.append(pod)
    return docs


def _reads_every_pod(ssn: Session, job: JobInfo, touched: set[int]) -> bool:
    """stalegangeviction's filter before the sums: any stamped job, and any job with a pod holding resources."""
    return job.podgroup.stale_since is not None or any(ssn.status[t] in ACTIVE_USED for t in job.tasks)


def _outcome(result: CycleResult) -> tuple:
    return (*_decisions(result), sorted(repr(p) for p in result.podgroups))


@SETTINGS
@given(docs=gangs())
def test_the_sums_decide_as_the_pods(docs: list[dict[str, Any]]) -> None:
    conf = SchedulerConf()
    shortcut, full = _cluster(docs), _cluster(docs)
    for _ in range(4):
        with ExitStack() as full_path:
            full_path.enter_context(mock.patch.object(stalegang, "_may_act", _reads_every_pod))
            full_path.enter_context(mock.patch.object(Session, "waiting_jobs", lambda ssn: list(ssn.snap.jobs)))
            expected = _outcome(full.run_cycle(conf))
        assert _outcome(shortcut.run_cycle(conf)) == expected


def test_a_touched_job_is_judged_by_its_pods_now() -> None:
    """A gang short of its minMember in the snapshot (one pod runs, one waits) whose waiting pod this cycle
    binds is whole by the time stalegangeviction runs: it is not stamped stale, though its snapshot sums say
    it is short."""
    docs: list[dict[str, Any]] = [node_doc("node0", 2, None), queue_doc("dept", None, -1, 1)]
    docs += [queue_doc("team-a", "dept", 2, 1), podgroup_doc("gang", "team-a", 2, "train", "2025-12-31T20:00:00Z")]
    docs.append(gpu_pod("gang-0", GpuRequest(whole=1), annotations={"pod-group-name": "gang"}, node="node0"))
    docs.append(gpu_pod("gang-1", GpuRequest(whole=1), annotations={"pod-group-name": "gang"}))
    cluster = _cluster(docs)
    (job,) = cluster.snapshot(SchedulerConf()).jobs
    assert job.sums is not None and job.sums.used == 1 < job.min_available  # short, as the snapshot saw it
    result = cluster.run_cycle(SchedulerConf())
    assert [(str(b.pod), b.node) for b in result.binds] == [("default/gang-1", "node0")]
    assert [p.stale_since for p in result.podgroups if p.name == "gang"] == [None]
