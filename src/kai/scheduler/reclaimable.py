"""KAI's reclaim rules (proportion plugin, kai-behaviour §4.4.4), on the session's queue accounting.

All comparisons between a reclaimer and a victim use the *leveled* queues: the
two children of their lowest common ancestor, one on each side. So team-a in
dept-1 reclaiming from team-z in dept-2 is judged as dept-1 against dept-2.
Amounts are QRES base units (milli-GPU, millicores, bytes); -1 means unlimited.
"""

from __future__ import annotations

from kai.scheduler.explain import fmt_amount, qres_name
from kai.scheduler.model import Q_GPU, QRES_INDEXES, JobInfo
from kai.scheduler.ordering import INF, allocatable_shares, deserved_shares
from kai.scheduler.session import Session

_EPS = 1e-6  # fair shares are floats; allocations are integers


def leveled_queues(ssn: Session, reclaimer: int, victim: int) -> tuple[int, int]:
    """The children of the lowest common ancestor on the reclaimer's and on the victim's side."""
    a = ssn.queues.ancestors[reclaimer][::-1]
    b = ssn.queues.ancestors[victim][::-1]
    for x, y in zip(a, b):
        if x != y:
            return x, y
    return a[min(len(a), len(b)) - 1], b[min(len(a), len(b)) - 1]


class ReclaimRules:
    """Reclaim checks for one session (the fair shares and quotas they read are fixed for it)."""

    def __init__(self, ssn: Session, saturation_multiplier: float = 1.0) -> None:
        self.ssn = ssn
        self.saturation_multiplier = saturation_multiplier  # KAI's relcaimerSaturationMultiplier
        self.fair = ssn.queues.fair_share.tolist()
        self.deserved = deserved_shares(ssn)
        self.allocatable = allocatable_shares(ssn)
        self._leveled: dict[tuple[int, int], tuple[int, int]] = {}

    def leveled(self, reclaimer: int, victim: int) -> tuple[int, int]:
        """``leveled_queues``, kept per pair: the tree is fixed for the Session, and every reclaimer's victim
        listing asks for each candidate job."""
        got = self._leveled.get((reclaimer, victim))
        if got is None:
            got = self._leveled[reclaimer, victim] = leveled_queues(self.ssn, reclaimer, victim)
        return got

    def name(self, qi: int) -> str:
        return self.ssn.snap.queues[qi].name

    # --- the gate on the reclaimer ---------------------------------------------------------------------

    def cannot_reclaim(self, job: JobInfo, req: tuple[int, int, int]) -> str | None:
        """Why *job* may not reclaim (None if it may): its queue would go above its fair share. (A
        non-preemptible job's quota is checked before, by capacity.check_capacity.)"""
        qs = self.ssn.queues
        qi = job.queue
        alloc = qs.alloc[qi]
        for r in QRES_INDEXES:
            if req[r] > 0 and alloc[r] + req[r] > self.fair[qi][r] + _EPS:
                return (
                    f"queue {self.name(qi)} would exceed its fair share of {qres_name(r)}: "
                    f"{fmt_amount(r, alloc[r])} allocated + {fmt_amount(r, req[r])} requested > "
                    f"fair share {fmt_amount(r, self.fair[qi][r])}"
                )
        return None

    # --- which jobs may lose pods ---------------------------------------------------------------------

    def victim_allowed(self, reclaimer: JobInfo, req: tuple[int, int, int], victim: JobInfo) -> bool:
        """KAI's ReclaimVictimFilter: above its share (if the reclaimer is above quota) or above quota."""
        qs = self.ssn.queues
        rq, vq = self.leveled(reclaimer.queue, victim.queue)
        r_alloc, v_alloc = qs.alloc[rq], qs.alloc[vq]
        deserved_r, deserved_v = self.deserved[rq], self.deserved[vq]
        # plain loops over the three resources: every candidate victim of every reclaimer comes here, and
        # generator expressions cost twice as much
        for r in QRES_INDEXES:
            if r_alloc[r] + req[r] > deserved_r[r]:  # the reclaimer is over quota with the job
                fair_v = self.fair[vq]
                return any(v_alloc[k] > max(deserved_v[k], fair_v[k]) + _EPS for k in QRES_INDEXES)
        above = below = False
        for r in QRES_INDEXES:
            if req[r] > 0:
                d = deserved_v[r]
                if v_alloc[r] > d:
                    above = True
                elif v_alloc[r] < d and d != INF:  # an unlimited quota (-1) is no floor to be below
                    below = True
        return above or not below

    # --- the scenario validator -----------------------------------------------------------------------

    def reject(
        self,
        job: JobInfo,
        req: tuple[int, int, int],
        victims: list[tuple[int, tuple[int, int, int]]],
        before: list[list[int]],
    ) -> str | None:
        """KAI's Reclaimable strategies per victim, then the reclaimer stays below its siblings.

        *victims*: (victim queue, resources it really loses) per evicted unit, in victim order;
        *before*: queue allocations before the scenario. The session holds the state after it.
        """
        ssn = self.ssn
        qs = ssn.queues
        remaining = [row[:] for row in before]
        for vleaf, lost in victims:
            rq, vq = self.leveled(job.queue, vleaf)
            rem = remaining[vq]
            maintain_fair_share = not all(rem[r] <= self.allocatable[vq][r] + _EPS for r in QRES_INDEXES)
            guarantee_quota = all(before[rq][r] + req[r] <= self.deserved[rq][r] for r in QRES_INDEXES) and not all(
                rem[r] <= self.deserved[vq][r] for r in QRES_INDEXES
            )
            if not (maintain_fair_share or guarantee_quota):
                g = Q_GPU
                return (
                    f"queue {self.name(vq)} is not above its fair share: it uses {fmt_amount(g, rem[g])} "
                    f"with fair share {fmt_amount(g, self.fair[vq][g])} and quota {_quota(self.deserved[vq][g])}"
                )
            for a in qs.ancestors[vleaf]:
                row = remaining[a]
                for r in QRES_INDEXES:
                    row[r] -= lost[r]
        return self._saturation(job, req, victims) or self._non_preemptible_quota(job)

    def _saturation(self, job: JobInfo, req: tuple[int, int, int], victims: list[tuple[int, tuple]]) -> str | None:
        """At every level the reclaimer must not end up more saturated (allocated / fair share) than a
        sibling it took from, times the multiplier."""
        ssn = self.ssn
        qs = ssn.queues
        queues = ssn.snap.queues
        m = self.saturation_multiplier
        touched = {a for vleaf, _ in victims for a in qs.ancestors[vleaf]}
        requested = [r for r in QRES_INDEXES if req[r] > 0]
        for x in qs.ancestors[job.queue]:
            parent = queues[x].parent
            siblings = queues[parent].children if parent >= 0 else [q.index for q in queues if q.parent < 0]
            for s in siblings:
                if s == x or s not in touched:
                    continue
                for r in requested:
                    ratio_r = _ratio(qs.alloc[x][r], self.fair[x][r])
                    ratio_s = _ratio(qs.alloc[s][r], self.fair[s][r])
                    if ratio_r > 1 and self.fair[s][r] > 0 and ratio_r * m >= ratio_s:
                        # with a multiplier, say so: "1.25x ... not less than 1.75x" alone reads as false
                        times = f" ({ratio_r * m:.2f}x with the saturation multiplier {m:g})" if m != 1 else ""
                        return (
                            f"queue {self.name(x)} would use {ratio_r:.2f}x its fair share of {qres_name(r)}{times}, "
                            f"not less than {self.name(s)} ({ratio_s:.2f}x)"
                        )
        return None

    def _non_preemptible_quota(self, job: JobInfo) -> str | None:
        if job.preemptible:
            return None
        qs = self.ssn.queues
        for a in qs.ancestors[job.queue]:
            for r in QRES_INDEXES:
                if qs.alloc_np[a][r] > self.deserved[a][r]:
                    return f"queue {self.name(a)} would hold more non-preemptible {qres_name(r)} than its quota"
        return None

    def describe(self, qi: int, alloc: list[int]) -> str:
        """'<queue> uses 6 GPUs with a quota of 2, fair-share of 4 and queue priority of 100.' (KAI's words)."""
        q = self.ssn.snap.queues[qi]
        return (
            f"{q.name} uses {fmt_amount(Q_GPU, alloc[Q_GPU])} with a quota of {_quota(self.deserved[qi][Q_GPU])}, "
            f"fair-share of {fmt_amount(Q_GPU, self.fair[qi][Q_GPU])} and queue priority of {q.priority}."
        )


def _quota(value: float) -> str:
    return "unlimited" if value == INF else fmt_amount(Q_GPU, value)


def _ratio(alloc: float, fair: float) -> float:
    if fair <= 0:
        return INF if alloc > 0 else 0.0
    return alloc / fair
