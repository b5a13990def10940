"""dynamicresources: Dynamic Resource Allocation with structured parameters (KAI's plugin of that name, which runs
kube-scheduler's DynamicResources allocator).

A pod's ResourceClaims are a stateful node rule (``node_filter``; ``kai.scheduler.podrules._dra``): a node fits
if it has free devices for every unallocated claim's requests (class and CEL selectors, counts, allocation mode
All), and matches the node selector of every allocated one. Devices are chosen as pods are placed, kept for
the rest of the cycle (gangs see each other's choices; a rollback gives them back), and carried by the Bind
decision, so both backends write ``status.allocation`` and ``reservedFor`` before the pod is bound. Devices of
claims whose pods are all being evicted are free for pipelined preemptors, so reclaim and preempt can free
devices. GPU devices count as GPUs in queue accounting (``kai.scheduler.dra``, at snapshot time).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kai.scheduler.framework import Arg, NodeRule, Plugin
from kai.scheduler.model import TaskInfo, TaskStatus
from kai.scheduler.plugins._args import integer
from kai.scheduler.podrules._counters import state_of
from kai.scheduler.podrules._dra import DeviceBook, DraRule, rule_key
from kai.scheduler.podrules._shared import shared
from kai.scheduler.session import Session


class DynamicResources(Plugin):
    name: ClassVar[str] = "dynamicresources"
    # KAI's size of its compiled-CEL cache. kai compiles each selector once when its object is parsed and keeps a
    # selector's answers per device for the snapshot, so the bound changes nothing (docs/differences.md).
    ARGS: ClassVar[Mapping[str, Arg]] = {"maxCelCacheEntries": integer}
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"maxCelCacheEntries": 10}

    def __init__(self, args: Mapping[str, Any] | None = None, *, where: str = "") -> None:
        super().__init__(args, where=where)
        self._book: DeviceBook | None = None
        self._rules: dict[Any, DraRule] = {}

    def stateful(self, ssn: Session) -> bool:
        return bool(ssn.snap.dra)  # no claim, template or device: nothing to allocate

    def _book_of(self, ssn: Session) -> DeviceBook:
        if self._book is None:
            self._book = DeviceBook(shared(ssn))
        return self._book

    def node_filter(self, ssn: Session, task: TaskInfo) -> NodeRule | None:
        pod = task.pod
        if not pod.resource_claims:
            return None
        book = self._book_of(ssn)
        queue = ssn.snap.jobs[task.job].queue_name
        key = rule_key(pod, queue)
        rule = self._rules.get(key)
        if rule is None:
            rule = self._rules[key] = DraRule(book, pod, queue)
        return rule

    def on_task_change(self, ssn: Session, task: TaskInfo, old_status: TaskStatus, old_node: int) -> None:
        if self._book is None or not task.pod.resource_claims:
            return
        new_node = ssn.node[task.index]
        self._book.changed(
            task,
            (old_node, state_of(old_status, old_node)),
            (new_node, state_of(ssn.status[task.index], new_node)),
        )
