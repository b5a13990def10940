"""Evicting a cycle's victims on a real API server: a victim gang goes whole, or is not touched.

The engine already keeps PodDisruptionBudgets in its choice of victims (``Session.disruption_guard``),
from the budgets' specs and the pods it sees. On a cluster the API server decides each eviction from
the budget's *status* (``disruptionsAllowed``, kept by the disruption controller), one pod at a time,
and answers 429 when it would break the budget. Evicting a gang's pods one by one could then leave it
half evicted: useless to its owner, its GPUs still held. So, per victim gang (theory of operation):

1. **Decide before the first eviction.** For every budget covering pods of the gang, the gang's pods
   under it must fit in what the budget's status allows now, less what earlier gangs of this cycle
   took. A pod under two budgets cannot be evicted at all (the Eviction API refuses it). If the gang
   does not fit, none of its pods is touched: an ``EvictionRefused`` Warning on the PodGroup names the
   budget, and the next cycle decides again.
2. **Covered pods first**, through the Eviction API, one after another (concurrent evictions under one
   budget race on its status). Then the gang's other pods are deleted (uid precondition), all at once.
3. **If the API server still refuses a covered pod** (another client's eviction took the allowance
   between the check and the request), or any eviction of the gang fails (a 5xx, a broken
   connection), the gang has lost pods and cannot run: it is marked broken (``Assumed.broken``), so the
   next cycles evict what is left of it at once (through the Eviction API where a budget covers it, as
   soon as the budget allows), instead of after the staleness grace.

A gang no budget covers is deleted pod by pod, concurrently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kai.api import constants as C
from kai.api.objects import Pod, object_ref
from kai.api.pdb import PodDisruptionBudget
from kai.k8s._api import ApiError
from kai.k8s._assume import Assumed, AssumedEviction, gone_since
from kai.k8s._metrics import Metrics
from kai.scheduler.decisions import Event, Evict
from kai.store import Key, Store

log = logging.getLogger("kai.k8s.evict")

Gather = Callable[[Iterable[Awaitable[None]]], Awaitable[None]]


class EvictionOutcome:
    """Counts for the cycle's log line, and the events to record."""

    def __init__(self) -> None:
        self.evicted = 0
        self.failed = 0
        self.events: list[Event] = []


class GangEvictor:
    """Sends one cycle's evictions (module docstring). ``api`` is the cycle's (fenced) writer."""

    def __init__(
        self,
        api: Any,
        store: Store,
        pdb_statuses: dict[Key, Any],
        assumed: Assumed,
        metrics: Metrics,
        *,
        pdb_api_version: str,
        decided_on: Mapping[Key, Pod],
    ) -> None:
        self.api = api
        self.store = store
        self.pdb_statuses = pdb_statuses
        self.assumed = assumed
        self.metrics = metrics
        self.pdb_api_version = pdb_api_version
        self.decided_on = decided_on  # the snapshot's pods by key
        self.out = EvictionOutcome()

    async def run(self, evictions: list[Evict], gather: Gather) -> EvictionOutcome:
        gangs: dict[Key, list[tuple[Evict, Pod]]] = {}
        for e in evictions:
            key = (e.pod.namespace, e.pod.name)
            pod = self.store.get("Pod", key)
            if gone_since(key, pod, self.decided_on):
                continue  # gone, or made again under the same name since the snapshot
            gangs.setdefault((e.pod.namespace, e.podgroup), []).append((e, pod))
        pdbs = self.store.list("PodDisruptionBudget")
        left = {(p.meta.namespace or "", p.meta.name): self._allowed(p) for p in pdbs}
        going: list[tuple[Key, list[tuple[Evict, Pod, Key | None]]]] = []
        for gang, members in gangs.items():
            under = [(e, pod, self._budgets(pod, pdbs)) for e, pod in members]
            if any(b for _, _, b in under):
                refusal = self._refusal(gang, under, left)
                if refusal is not None:
                    self._held_back(gang, members[0][0], refusal)
                    continue
                for _, _, b in under:
                    if b:
                        left[b[0]] -= 1
            going.append((gang, [(e, pod, b[0] if b else None) for e, pod, b in under]))
        await gather(self._gang(gang, members, gather) for gang, members in going)
        return self.out

    # ---- deciding ----------------------------------------------------------------------------

    def _allowed(self, pdb: PodDisruptionBudget) -> int:
        """Disruptions the API server would allow now: the status the disruption controller wrote."""
        st = self.pdb_statuses.get((pdb.meta.namespace or "", pdb.meta.name))
        if not isinstance(st, dict):
            return 0  # no status yet: the API server refuses every eviction under it
        value = st.get("disruptionsAllowed", 0)
        return value if isinstance(value, int) else 0

    @staticmethod
    def _budgets(pod: Pod, pdbs: list[PodDisruptionBudget]) -> list[Key]:
        ns = pod.meta.namespace or ""
        return [(ns, p.meta.name) for p in pdbs if (p.meta.namespace or "") == ns and p.selects(pod.meta.labels)]

    @staticmethod
    def _refusal(gang: Key, under: list[tuple[Evict, Pod, list[Key]]], left: dict[Key, int]) -> str | None:
        """Why the gang cannot be evicted whole now, or None."""
        need: dict[Key, int] = {}
        for _, pod, budgets in under:
            if len(budgets) > 1:
                names = ", ".join(f"{ns}/{n}" for ns, n in budgets)
                return (
                    f"pod {pod.meta.name} is covered by several PodDisruptionBudgets ({names}), "
                    "which the Eviction API refuses"
                )
            if budgets:
                need[budgets[0]] = need.get(budgets[0], 0) + 1
        for b, k in need.items():
            if k > left.get(b, 0):
                allowed = max(left.get(b, 0), 0)
                return (
                    f"PodDisruptionBudget {b[0]}/{b[1]} allows {allowed} more disruption{'' if allowed == 1 else 's'} "
                    f"now and the gang has {k} of its pods"
                )
        return None

    def _held_back(self, gang: Key, first: Evict, why: str) -> None:
        message = f"Eviction of gang {gang[0]}/{gang[1]} ({first.action}) held back, no pod touched: {why}"
        self.out.events.append(Event(object_ref("PodGroup", gang[0], gang[1]), "Warning", "EvictionRefused", message))
        self.metrics.api_errors.labels("evict-held").inc()
        log.info("gang eviction held back", extra={"podgroup": f"{gang[0]}/{gang[1]}", "why": why})

    # ---- sending -------------------------------------------------------------------------------

    async def _gang(self, gang: Key, members: list[tuple[Evict, Pod, Key | None]], gather: Gather) -> None:
        """Covered pods one by one through the Eviction API, then the rest together. A gang some of
        whose pods went and some did not is broken: the next cycle evicts what is left at once."""
        went: list[bool] = []
        for e, pod, budget in members:
            if budget is not None:
                went.append(await self._evict(e, pod))
                if not went[-1]:
                    break
        covered_ok = all(went)

        async def delete(e: Evict, pod: Pod) -> None:
            went.append(await self._delete(e, pod))

        await gather(delete(e, pod) for e, pod, budget in members if budget is None)
        if (any(went) and not all(went)) or not covered_ok:
            self.assumed.broken[gang] = time.monotonic()
            if not covered_ok:
                why = "the API server refused a pod its PodDisruptionBudget covers"
            else:
                why = f"{went.count(False)} of {len(members)} evictions failed"
            message = (
                f"Gang {gang[0]}/{gang[1]} was evicted in part ({why}); what is left of it is evicted at once, "
                "as soon as the API server lets it"
            )
            self.out.events.append(
                Event(object_ref("PodGroup", gang[0], gang[1]), "Warning", "EvictionRefused", message)
            )

    async def _evict(self, e: Evict, pod: Pod) -> bool:
        """Through the Eviction API; True when the pod is going (or gone)."""
        body = {
            "apiVersion": self.pdb_api_version,
            "kind": "Eviction",
            "metadata": {"name": e.pod.name, "namespace": e.pod.namespace},
            "deleteOptions": _delete_options(pod),
        }
        return await self._send(e, pod, "POST", f"{_pod_path(e)}/eviction", body)

    async def _delete(self, e: Evict, pod: Pod) -> bool:
        return await self._send(e, pod, "DELETE", _pod_path(e), _delete_options(pod))

    async def _send(self, e: Evict, pod: Pod, method: str, path: str, body: dict[str, Any]) -> bool:
        try:
            await self.api.request(method, path, body=body)
        except ApiError as err:
            if err.code in (404, 409):  # gone already, or a new pod under the same name
                return True
            self.out.failed += 1
            self.metrics.api_errors.labels("evict").inc()
            reason = "EvictionRefused" if err.code == 429 else "EvictionFailed"
            self.out.events.append(
                Event(f"Pod/{e.pod}", "Warning", reason, f"Eviction of pod {e.pod} ({e.action}): {err}")
            )
            return False
        key = (e.pod.namespace, e.pod.name)
        self.assumed.evictions[key] = AssumedEviction(pod.meta.uid, time.monotonic())
        pg = self.store.get("PodGroup", (e.pod.namespace, e.podgroup))
        self.metrics.count_eviction(
            e.podgroup,
            pg.meta.uid if pg is not None else "",
            pod.meta.labels.get(C.LABEL_NODE_POOL, "default"),
            e.action,
        )
        self.out.evicted += 1
        return True


def _pod_path(e: Evict) -> str:
    return f"/api/v1/namespaces/{e.pod.namespace}/pods/{e.pod.name}"


def _delete_options(pod: Pod) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.meta.uid}}
