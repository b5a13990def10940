"""One cycle's output (kai.scheduler.cycle.run_cycle / close_session): the Decisions, events, PodGroup conditions and
Queue statuses a backend applies, for each kind of outcome. (A job or action that raises is left out of the cycle:
test_isolation.)"""

from __future__ import annotations

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import UNSCHEDULABLE_CONDITION, run_cycle
from kai.scheduler.decisions import Bind, CycleResult, Event, Pipeline, PodRef
from tests.unit.builders import NOW, job_docs, node, pod, podgroup, queue, snapshot_of

QUEUES = [queue("dept"), queue("team", "dept", gpu=(1, -1, 1))]
ALLOCATE = SchedulerConf(actions=("allocate",))


def conditions(result: CycleResult) -> dict[str, list[tuple[str, str]]]:
    return {s.name: [(c.reason, c.message) for c in s.conditions] for s in result.podgroups if s.conditions}


def events_of(result: CycleResult, obj: str) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in result.events if e.object == obj]


def test_binds_whole_and_shared_pods_with_their_gpu_groups() -> None:
    docs = [node("n0", gpu=2), *QUEUES, *job_docs("whole", "team", 1), *job_docs("shared", "team", 1, fraction="0.5")]
    result = run_cycle(snapshot_of(docs), ALLOCATE)
    assert result.binds == [
        Bind(PodRef("default", "whole-0"), "n0", "whole", ()),
        Bind(PodRef("default", "shared-0"), "n0", "shared", ("n0-gpu0",)),
    ]
    assert events_of(result, "Pod/default/whole-0") == [
        ("Normal", "Scheduled", "Successfully assigned pod default/whole-0 to node n0")
    ]
    assert result.pipelines == [] and result.evictions == [] and conditions(result) == {}


def test_a_pod_placed_on_what_is_being_released_is_pipelined() -> None:
    docs = [
        node("n0", gpu=2),
        *QUEUES,
        *job_docs("leaving", "team", 1, on="n0", gpu=2, releasing=True),
        *job_docs("next", "team", 1, gpu=2),
    ]
    result = run_cycle(snapshot_of(docs), ALLOCATE)
    assert result.binds == []
    assert result.pipelines == [Pipeline(PodRef("default", "next-0"), "n0", "next", (), nominated=False)]
    assert events_of(result, "Pod/default/next-0") == [
        ("Normal", "Pipelined", "Pod default/next-0 was pipelined to node n0")
    ]


def test_why_jobs_wait() -> None:
    """Not ready (a gated pod does not count), a missing queue, invalid GPU-sharing annotations: each its condition
    on the PodGroup, its event, and invalid pods a Warning event each."""
    gated = pod("gang-2", "gang")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    both = pod("bad-0", "bad", fraction="0.5")
    both["metadata"]["annotations"]["gpu-memory"] = "10"
    docs = [
        node("n0", gpu=2),
        *QUEUES,
        podgroup("gang", "team", min_member=3),
        pod("gang-0", "gang"),
        pod("gang-1", "gang"),
        gated,
        *job_docs("lost", "nowhere", 1),
        podgroup("bad", "team", min_member=2),
        both,
        pod("bad-1", "bad", fraction="1.5"),
    ]
    result = run_cycle(snapshot_of(docs), ALLOCATE)
    not_ready = "Job is not ready for scheduling. Waiting for 3 pods, currently 2 exist, 1 are gated"
    invalid = (
        "Pod default/bad-0 has an invalid GPU request: metadata.annotations.gpu-memory: cannot request both GPU and "
        "GPU memory (gpu-fraction is set too) (and 1 more pods)"
    )
    assert conditions(result) == {
        "gang": [("NotReady", not_ready)],
        "lost": [("QueueDoesNotExist", "Queue 'nowhere' does not exist")],
        "bad": [("Unschedulable", invalid)],
    }
    assert {s.conditions[0].type for s in result.podgroups if s.conditions} == {UNSCHEDULABLE_CONDITION}
    assert events_of(result, "PodGroup/default/gang") == [("Normal", "NotReady", not_ready)]
    assert events_of(result, "PodGroup/default/lost") == [
        ("Warning", "Unschedulable", "Queue 'nowhere' does not exist")
    ]
    assert events_of(result, "Pod/default/bad-1") == [
        (
            "Warning",
            "InvalidGpuRequest",
            "metadata.annotations.gpu-fraction: '1.5' must be a number between 0 and 1 (exclusive), e.g. \"0.5\"",
        )
    ]
    assert result.binds == []


def test_each_reason_is_said_beside_jobs_with_nothing_to_say() -> None:
    """A missing queue, and a gang seen stale for the first time, each beside a job that runs whole and has
    nothing to say (close_session says nothing of such a job without reading its pods): the one condition, the
    stale stamp to write, and nothing for the others. The stale gang is ready (its second pod waits) and, with
    no allocate in the cycle, has no failure to report: the stamp is the only thing said of it."""
    docs = [
        node("n0", gpu=2),
        *QUEUES,
        *job_docs("lost", "nowhere", 1),
        *job_docs("whole", "team", 1, on="n0"),
        *job_docs("short", "team", 2, on=["n0", None]),  # one of its two pods holds a GPU
    ]
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("stalegangeviction",)))
    assert conditions(result) == {"lost": [("QueueDoesNotExist", "Queue 'nowhere' does not exist")]}
    stamps = {s.name: (s.stale_since, s.stale_changed) for s in result.podgroups}
    assert stamps == {"lost": (None, False), "whole": (None, False), "short": (NOW, True)}


def test_a_job_that_got_some_pods_has_no_condition_but_an_event() -> None:
    """An elastic job placed in part: the PodGroup is not marked unschedulable, the rest's reason is an event."""
    docs = [node("n0", gpu=2), *QUEUES, *job_docs("elastic", "team", 3, min_member=1)]
    result = run_cycle(snapshot_of(docs), ALLOCATE)
    assert len(result.binds) == 2
    assert conditions(result) == {}
    ((kind, reason, message),) = events_of(result, "PodGroup/default/elastic")
    assert (kind, reason) == ("Warning", "Unschedulable") and "1 node lacks free GPUs (need 1, most free 0)" in message


def test_evictions_carry_the_action_and_its_reason() -> None:
    docs = [
        node("n0", gpu=2),
        *QUEUES,
        *job_docs("low", "team", 2, on="n0", min_member=1),
        *job_docs("high", "team", 1, priority_class="inference"),
    ]
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("preempt",)))
    (evict,) = result.evictions
    assert (evict.pod, evict.podgroup, evict.action) == (PodRef("default", "low-1"), "low", "preempt")
    assert evict.reason == (
        "Pod default/low-1 was preempted by higher priority workload default/high (priority 125 over 50, queue team)"
    )
    assert Event("PodGroup/default/low", "Normal", "Evict", evict.reason) in result.events
    assert [p.pod.name for p in result.pipelines] == ["high-0"] and result.pipelines[0].nominated


def test_queue_statuses_in_api_units() -> None:
    """GPUs as GPUs (fractions kept), CPU in millicores, memory in bytes; -1 stays -1; parents by name."""
    docs = [
        node("n0", gpu=2),
        *QUEUES,
        *job_docs("whole", "team", 1, on="n0"),
        *job_docs("shared", "team", 1, on="n0", fraction="0.5", gpu_groups=("n0-gpu1",), priority_class="build"),
    ]
    result = run_cycle(snapshot_of(docs), ALLOCATE)
    team = next(q for q in result.queues if q.name == "team")
    assert team.parent == "dept"
    assert team.allocated == {"gpu": 1.5, "cpu": 2000.0, "memory": 2 * 1024**3}
    assert team.allocated_non_preemptible == {"gpu": 0.5, "cpu": 1000.0, "memory": 1024**3}
    assert team.deserved == {"gpu": 1.0, "cpu": -1.0, "memory": -1.0}
    assert team.limit == {"gpu": -1.0, "cpu": -1.0, "memory": -1.0}
    assert team.fair_share["gpu"] == 1.5
    assert next(q for q in result.queues if q.name == "dept").parent == ""


def test_conditions_say_the_node_pool_with_scheduling_backoff_1() -> None:
    pg = podgroup("j", "team")
    pg["spec"]["schedulingBackoff"] = 1
    result = run_cycle(snapshot_of([node("n0", gpu=1), *QUEUES, pg, pod("j-0", "j", gpu=2)]), ALLOCATE)
    ((_, message),) = conditions(result)["j"]
    assert message.startswith("Node-Pool 'default': Unable to schedule pod: 1 node lacks free GPUs")


def test_a_cycle_leaves_nothing_for_the_cyclic_collector() -> None:
    """run_cycle dissolves its Session (a reference cycle: its Placer and plugins point back at it) before the
    collector resumes, so the journal and per-task lists are freed at once instead of by the next collection;
    all five actions run, with evictions, pipelining and shared GPUs in play."""
    import gc

    docs = [
        node("n0", gpu=2),
        node("n1", gpu=2),
        *QUEUES,
        *job_docs("leaving", "team", 1, on="n0", gpu=2, releasing=True),
        *job_docs("shared", "team", 2, fraction="0.5", on="n1"),
        *job_docs("next", "team", 2, gpu=1),
    ]
    snap = snapshot_of(docs)
    gc.collect()
    result = run_cycle(snap, SchedulerConf())
    assert result.binds or result.pipelines  # the cycle did place something
    assert gc.collect() == 0
