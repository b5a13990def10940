"""The cycle memo in ``kai scheduler``, against a real API server (kai as its ServiceAccount).

A scheduler rechecks the jobs that cannot run every schedule period. On a cluster where nothing changed, that
cycle hands back the last one's decisions instead of running the actions again (kai.scheduler.memo; its
property test shows the decisions are the same with and without it). Here: pods too large for every node wait,
the periodic cycles that follow are repeats, and a new node that can take them ends the repeats at once.

No kubelet runs: pods stay Pending once bound, which is all the scheduler reads of them here.
"""

from __future__ import annotations

from lightkube import Client

from kai.k8s.envtest import ControlPlane
from tests.k8s.sched import InProcess, options, wait_for
from tests.k8s.test_scheduler import bound, gpu_pod


def test_cycles_on_an_unchanged_cluster_are_repeats_and_a_change_ends_them(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    nodes("memo-small", gpus=2)
    for i in range(3):
        admin.create(gpu_pod(f"big-{i}", ns, gpus=4))  # larger than any node: they wait
    with InProcess(options(scheduler_cluster)) as s:
        sched = s.scheduler
        # the first cycles see the pods, group them and write their statuses; then nothing changes
        wait_for(lambda: sum(c.repeated for c in sched.cycles) >= 3, "three periodic cycles repeated")
        assert not bound(admin, ns)
        before = sched.cycles_run
        nodes("memo-large", gpus=12)  # the change: a node that takes all three
        wait_for(lambda: len(bound(admin, ns)) == 3, "the three pods bound on the new node")

        def binding() -> list:
            return [c for c in list(sched.cycles) if c.index >= before and c.binds]

        # a cycle is recorded when it ends, after its status writes, which can come after the binds are seen
        wait_for(lambda: sum(c.binds for c in binding()) == 3, "the cycles that bound them to end")
        assert not any(c.repeated for c in binding())  # the cycles that bound them ran the actions
