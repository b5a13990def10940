"""consolidation: move running preemptible pods to other nodes so a pending job fits. Nobody is killed.

Only pending preemptible jobs are preemptors, and only when the cluster has
enough idle + releasing GPUs for them overall: moving pods never creates
capacity, it only gathers it on one node. A scenario is accepted only if every
victim is re-placed (pipelined on its new node), and at most
``max_consolidation_preemptees`` pods move for one job (kai-behaviour §4.2).

A move is an eviction that the pod's controller answers with a new pod, which waits pipelined on its new
node. A pod no controller owns has nobody to make it again: on a real cluster (``Snapshot.bare_pods_return``
False) its move would kill it, and a gang of such pods would be left bound in part for good. Jobs with such
pods are not moved there (KAI moves them; docs/differences.md).
"""

from __future__ import annotations

from kai.scheduler.actions.evicting import EvictingAction, preemptible_jobs
from kai.scheduler.actions.solver import Scenario, can_move
from kai.scheduler.explain import fmt_amount
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.session import Session


class Consolidation(EvictingAction):
    name = "consolidation"
    all_must_move = True
    evictions_free_capacity = False  # moved pods keep what their queues hold

    def execute(self, ssn: Session) -> None:
        if ssn.conf.max_consolidation_preemptees == 0:
            return
        super().execute(ssn)

    def nothing_to_do(self, ssn: Session, candidates: list[JobInfo]) -> str | None:
        no_free_gpu = _free_gpus(ssn) == 0
        if no_free_gpu and all(t.qreq[0] > 0 for job in candidates for t in ssn.pending_tasks(job)):
            return "no GPU is idle or being released; moving pods cannot make room"
        return super().nothing_to_do(ssn, candidates)

    def is_preemptor(self, ssn: Session, job: JobInfo) -> bool:
        return job.preemptible

    def gate(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> str | None:
        free = _free_gpus(ssn)
        if req[0] > free:
            return (
                f"the cluster has {fmt_amount(0, free)} idle or releasing, the job needs {fmt_amount(0, req[0])}; "
                "moving pods cannot make more"
            )
        return None

    def victims(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> list[JobInfo]:
        snap = ssn.snap
        return [
            v
            for v in preemptible_jobs(ssn)
            if v.index != job.index and (evictable := ssn.evictable_tasks(v)) and can_move(snap, evictable)
        ]

    def move_cap(self, ssn: Session) -> int:
        return ssn.conf.max_consolidation_preemptees

    def validate(self, ssn: Session, scenario: Scenario) -> str | None:
        cap = ssn.conf.max_consolidation_preemptees
        if cap >= 0 and len(scenario.moved) > cap:
            return f"it would move {len(scenario.moved)} pods, more than max-consolidation-preemptees {cap}"
        return None

    def message(self, ssn: Session, scenario: Scenario, task: TaskInfo) -> str:
        return f"Pod {task.namespace}/{task.name} was preempted and rescheduled due to bin packing"


def _free_gpus(ssn: Session) -> int:
    """Idle plus releasing GPUs over the cluster (milli-GPU), what shared GPUs have left included: all
    that moving pods could gather (two half-used GPUs make one whole GPU once a fraction moves)."""
    return int(ssn.free_gpu_milli().sum())
