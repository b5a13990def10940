"""Choosing a node for a task: dynamic fit and the node-order plugins' scores, vectorized over nodes.

Scores are the plugins' (``node_order_terms``: KAI's magnitudes, summed): nodeavailability +1000 when the
task fits on idle resources now; resourcetype +10 for a CPU-only task on a CPU-only node; nodeplacement
0..9: *binpack* ranks the node with the least free amount of the task's resource (GPU for GPU tasks, CPU
otherwise) highest, *spread* ranks by free/total; gpusharingorder +10000 where a shared GPU takes the
fraction. KAI normalizes binpack by the min and max over the fitting nodes; we scale by a fixed per-session
constant instead, which keeps the same order (monotone in the free amount, always below 10) and lets a
placement update one row instead of rescoring every node. To these add the per-signature scores of
``node_order`` plugins. Ties go to the lower row, i.e. the node name ascending. A ``node_choice`` plugin
(kai's GPU placement policies) may pick the node first; the Placer's own choice stands when it declines.

A task's stateful rules (``node_filter``: inter-pod affinity, topology spread, host ports, volumes) are not
part of the kept scores: they belong to the task, not to its (signature, request), and one placement can
change their answer on thousands of rows (a zone filling up). They are applied when the Placer answers for
a task that has any: one vectorized pass ANDs their masks into its rows and adds their scores, and a row a
rule allows only once the pods being released are gone (``now_mask``) is not "fits now" (no nodeavailability
bonus, and the task is pipelined there). A ``node_choice`` plugin sees the rules folded into ``fits_now``,
so a policy never picks a row a rule forbids.

Theory of operation: one Placer lives as long as its Session. It keeps, per
(scheduling signature, request), the score of every node, and remembers how far
into the Session's log of changed nodes (``Session.node_log``) those scores are
up to date. Before answering it rescores only the rows changed since: a few
rows with Python scalars (NumPy's per-call overhead dominates on one row), many
rows with one vectorized pass. Any change through a Statement, including a
rollback, lands in the log, so no caller has to tell the Placer anything.
Placing and pipelining only take resources, so a row where the task could not
go (score -inf) stays so unless an eviction or a rollback changed it since
(``Session.node_freed``): the row-by-row pass skips such rows. With allocate
filling the cluster, about half the changed rows are of that kind.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from kai.scheduler.framework import Choice, NodeRules
from kai.scheduler.gpusharing import fit_one, fit_rows, fit_rows_single, one_device_room
from kai.scheduler.model import CPU, GPU, GpuShare, TaskInfo
from kai.scheduler.session import Session

_SCALAR_ROWS = 24  # below this many changed rows, rescoring row by row in Python is cheaper
_NEG_INF = -np.inf  # a global's load, not an attribute read and a negation, per unfit row
_NONE: frozenset[int] = frozenset()


@dataclass(slots=True)
class _Candidates:
    request: np.ndarray  # (n_res,)
    cols: np.ndarray  # resource columns the task requests
    static: np.ndarray  # (n,) bool
    fits_now: np.ndarray  # (n,) bool
    fits_later: np.ndarray  # (n,) bool: fits on idle + releasing (``_score_rows``' intermediate; not kept per row)
    score: np.ndarray  # (n,) float, -inf where the task cannot go
    synced: int  # position in Session.node_log up to which the rows are current
    # the same facts as Python scalars, for the row-by-row path
    req_cols: list[tuple[int, int]]  # (column, amount) of each requested resource
    col: int  # the resource the placement strategy ranks by
    gpu_task: bool
    static_list: list[bool]
    # the node-order plugins' kernel weights (ScoreTerms): fits now, CPU-only node, binpack, spread, shared fit
    w_now: float
    w_cpu: float
    w_binpack: float
    w_spread: float
    w_shared: float
    extra: np.ndarray | None  # (n,) float: node_order plugins' scores for the signature, None if none
    share: GpuShare | None = None  # a fractional request: per-GPU fit on top of the node columns
    need: list[int] | None = None  # one-device share: the units it takes on each node's GPUs
    best: int = -1  # the row best_node picks (highest score, lowest row on ties); -1 until asked, or unknown
    consts: tuple = ()  # what ``Placer._score_row_list`` reads, in its order (set by ``Placer._candidates``)


@dataclass(slots=True)
class _Ruled:
    """A candidates cache with one task's stateful rules applied (see ``Placer._ruled_state``)."""

    c: _Candidates
    rules: NodeRules
    score: np.ndarray  # (n,) float: c.score with the rules' masks and scores, -inf where the task cannot go
    fits_now: np.ndarray  # (n,) bool: c.fits_now where the rules allow the task now
    synced: int  # position in Session.node_log up to which the rows are current
    seen: list[int]  # per rule, how much of its log is applied
    best: int = -1


_RULED_KEPT = 64  # rule-applied caches kept (least recently used dropped): a task shape's pods come together


class Placer:
    """Best node for a task, kept current with the Session's changes (see the module docstring)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._cache: dict[tuple[int, bytes], _Candidates] = {}
        alloc = ssn.snap.nodes.allocatable
        self._cpu_only_node = alloc[:, GPU] == 0
        self._cpu_only_list = self._cpu_only_node.tolist()
        self._alloc_cols = {c: alloc[:, c].tolist() for c in (CPU, GPU)}
        self._scale = {c: float(ssn.score_scale[c]) for c in (CPU, GPU)}
        self._cap = ssn.snap.gpus.cap.tolist()
        # per changed row, facts every cache's rescoring reads (see _score_row_list); dropped when the row changes again
        self._facts: dict[int, list] = {}  # row -> [idle row, (releasing CPU, GPU), one-device room (None: unread)]
        self._facts_synced = 0  # position in Session.node_log up to which _facts is current
        self._extras: dict[int, np.ndarray | None] = {}  # signature -> node_order plugins' scores
        self._choices: dict[int, Choice] = {}  # 2 * row + fits now -> its Choice (no GPUs chosen)
        self._choose = ssn.hooks.has_node_choice  # a node_choice plugin (kai's GPU policies) picks first
        self._ruled_on = ssn.hooks.has_node_filter  # some plugin may give tasks stateful rules this Session
        self._ruled: OrderedDict[tuple[int, ...], _Ruled] = OrderedDict()

    def _score_rows(self, c: _Candidates, rows: np.ndarray | slice) -> None:
        ssn = self.ssn
        idle = ssn.idle[rows]
        free_later = idle + ssn.releasing[rows]
        cols = c.cols
        c.fits_now[rows] = (idle[:, cols] >= c.request[cols]).all(axis=1)
        c.fits_later[rows] = (free_later[:, cols] >= c.request[cols]).all(axis=1)
        col = c.col
        alloc = ssn.snap.nodes.allocatable[rows, col]
        free = np.maximum(free_later[:, col], 0)  # KAI's NonAllocatedResource: idle plus releasing
        placement = 0.0
        if c.w_binpack:
            placement = placement + c.w_binpack * np.where(alloc > 0, 9.0 * (1.0 - free / ssn.score_scale[col]), 0.0)
        if c.w_spread:
            placement = placement + c.w_spread * np.where(alloc > 0, 9.0 * free / np.maximum(alloc, 1), 0.0)
        if c.share is not None:
            g = ssn.snap.gpus
            if c.share.devices == 1:
                if isinstance(rows, slice):
                    max_now, max_later = np.array(ssn.group_max_now), np.array(ssn.group_max_later)
                else:
                    max_now = np.array([ssn.group_max_now[r] for r in rows.tolist()], dtype=np.int64)
                    max_later = np.array([ssn.group_max_later[r] for r in rows.tolist()], dtype=np.int64)
                now, later, shared = fit_rows_single(
                    c.share, g.cap[rows], max_now, max_later, idle[:, GPU], ssn.releasing[rows, GPU]
                )
            else:
                slots = ssn.gpu_arrays(None if isinstance(rows, slice) else rows.tolist())
                now, later, shared = fit_rows(c.share, g.cap[rows], *slots, idle[:, GPU], ssn.releasing[rows, GPU])
            c.fits_now[rows] &= now
            c.fits_later[rows] &= later
            if c.w_shared:  # gpusharingorder: a node with a shared GPU the portion fits on comes first
                placement = placement + c.w_shared * shared
        score = c.w_now * c.fits_now[rows] + placement
        if not c.gpu_task and c.w_cpu:
            score = score + c.w_cpu * self._cpu_only_node[rows]
        allowed = c.static[rows] & c.fits_later[rows]
        if c.extra is not None:
            score = score + c.extra[rows]
        c.score[rows] = np.where(allowed, score, -np.inf)
        c.best = -1

    def _score_row_list(self, c: _Candidates, rows: Iterable[int], gained: AbstractSet[int]) -> None:
        """``_score_rows`` row by row in Python floats: the same operations in the same order, so equal results.

        One call for all the changed rows, with the lookups hoisted out of the loop (``_Candidates.consts``,
        one tuple read per call): allocate rescores one to four rows per placement in each of several caches,
        40,000 placements a big cycle, and the per-row attribute reads were a good part of it. *gained*: the
        rows that may have gained resources (``Session.node_freed``); any other changed row has only lost some,
        so where the task could not go it still cannot.

        Per changed row, what every cache's rescoring reads (the idle row as Python ints, releasing CPU and
        GPU) is read from NumPy once, by the first cache to rescore the row since it changed, and kept in
        ``_facts``; the largest one-device portion the row takes now, later and on a group, which only a
        shared-GPU cache needs (``gpusharing.one_device_room``), is added by the first such cache."""
        ssn = self.ssn
        log = ssn.node_log
        facts = self._facts
        if self._facts_synced < len(log):  # drop the facts of rows changed since they were read
            for row in log[self._facts_synced :]:
                facts.pop(row, None)
            self._facts_synced = len(log)
        releasing_rows = ssn.releasing
        (
            static, fits_now, scores, req_cols, share, needs, col, gpu_task, w_now, w_cpu, w_binpack, w_spread,
            w_shared, extra, plain_binpack, alloc_col, scale, rel_i, cpu_only, cap,
        ) = c.consts  # fmt: skip
        best = c.best  # kept current through the rescoring when it can be (best_node then needs no argmax)
        best_score = scores.item(best) if best >= 0 else 0.0
        for row in rows:
            if not static[row] or (row not in gained and scores.item(row) == _NEG_INF):
                continue  # statically excluded, or it could not take the task and has only lost resources since
            f = facts.get(row)
            if f is None:  # the first cache to rescore this row since it changed reads it for all the others
                f = facts[row] = [
                    ssn.idle[row].tolist(),
                    (releasing_rows.item(row, CPU), releasing_rows.item(row, GPU)),
                    None,  # the largest one-device portion that fits: filled by the first shared-GPU cache that asks
                ]
            idle, rel_cg, room = f
            now = later = True
            for k, need in req_cols:
                if idle[k] < need:
                    now = False
                    if idle[k] + releasing_rows.item(row, k) < need:
                        later = False
                        break
            shared = False
            if later and share is not None:
                if needs is not None:  # one device: the node's largest free group decides (fit_rows_single's counts)
                    if room is None:
                        room = f[2] = one_device_room(
                            cap[row], ssn.group_max_now[row], ssn.group_max_later[row], idle[GPU], rel_cg[1]
                        )
                    need = needs[row]
                    now = now and need <= room[0]
                    later = need <= room[1]
                    shared = need <= room[2]
                else:
                    free_now, free_later = ssn.group_free(row)
                    g_now, g_later, shared = fit_one(share, cap[row], free_now, free_later, idle[GPU], rel_cg[1])
                    now = now and g_now
                    later = g_later
            fits_now[row] = now  # (fits_later is the vector path's scratch: nothing reads it for one row)
            if later:
                alloc = alloc_col[row]
                if alloc > 0:
                    free = idle[col] + rel_cg[rel_i]  # idle plus releasing, as KAI
                    if free < 0:
                        free = 0
                    if plain_binpack:  # the default weights: the arithmetic of the general case, fewer steps
                        placement = 9.0 * (1.0 - free / scale)
                    else:
                        placement = 0.0
                        if w_binpack:
                            placement = placement + w_binpack * (9.0 * (1.0 - free / scale))
                        if w_spread:
                            placement = placement + w_spread * (9.0 * free / max(alloc, 1))
                else:
                    placement = 0.0
                if shared and w_shared:
                    placement += w_shared
                score = w_now * now + placement
                if not gpu_task and w_cpu:
                    score = score + w_cpu * cpu_only[row]
                if extra is not None:
                    score = score + extra.item(row)
            else:
                score = _NEG_INF
            scores[row] = score
            if best >= 0:  # any other row scores at most best_score, and comes after best if equal
                if row == best:
                    if score < best_score:
                        best = -1  # the best row lost ground: best_node looks at every row again
                    else:
                        best_score = score
                elif score > best_score or (score == best_score and row < best):
                    best, best_score = row, score
        c.best = best

    def _candidates(self, task: TaskInfo) -> _Candidates:
        ssn = self.ssn
        key = (task.signature, task.request.tobytes())  # the signature includes any GPU share
        c = self._cache.get(key)
        log = ssn.node_log
        if c is None:
            n = ssn.snap.nodes.n
            static = ssn.static_fit(task).mask
            gpu_task = bool(task.request[GPU] > 0)
            request = ssn.node_request(task)
            cols = np.flatnonzero(request)
            share = task.share
            hooks = ssn.hooks
            terms = hooks.node_order_terms(ssn, task)
            c = _Candidates(
                request=request,
                cols=cols,
                static=static,
                fits_now=np.zeros(n, dtype=bool),
                fits_later=np.zeros(n, dtype=bool),
                score=np.full(n, -np.inf),
                synced=len(log),
                req_cols=[(int(k), int(request[k])) for k in cols],
                col=GPU if gpu_task else CPU,
                gpu_task=gpu_task,
                static_list=static.tolist(),
                w_now=terms.fits_now,
                w_cpu=terms.cpu_node,
                w_binpack=terms.binpack,
                w_spread=terms.spread,
                w_shared=terms.shared_fit,
                extra=self._extra(task),
                share=share,
                need=share.units_array(ssn.snap.gpus.cap).tolist() if share and share.devices == 1 else None,
            )
            c.consts = self._row_consts(c)
            self._score_rows(c, slice(None))
            self._cache[key] = c
        elif c.synced < len(log):
            changed = set(log[c.synced :])  # binpack keeps changing the same few nodes
            if len(changed) <= _SCALAR_ROWS:
                freed = ssn.node_freed  # positions in the log, ascending; usually none during allocate
                if freed and freed[-1] >= c.synced:
                    gained: AbstractSet[int] = {log[p] for p in freed[bisect_left(freed, c.synced) :]}
                else:
                    gained = _NONE
                c.synced = len(log)
                self._score_row_list(c, changed, gained)
            else:
                c.synced = len(log)
                self._score_rows(c, np.array(sorted(changed), dtype=np.intp))
        return c

    def _row_consts(self, c: _Candidates) -> tuple:
        """What ``_score_row_list`` reads of *c* and of the Placer, gathered once per cache (see there)."""
        col = c.col
        return (
            c.static_list, c.fits_now, c.score, c.req_cols, c.share, c.need, col, c.gpu_task, c.w_now, c.w_cpu,
            c.w_binpack, c.w_spread, c.w_shared, c.extra,
            c.w_binpack == 1.0 and not c.w_spread,  # plain binpack: 0.0 + 1.0 * x == x, the same floats
            self._alloc_cols[col], self._scale[col],
            1 if col == GPU else 0,  # the ranked column's place in a row's (releasing CPU, GPU) facts
            self._cpu_only_list, self._cap,
        )  # fmt: skip

    def _extra(self, task: TaskInfo) -> np.ndarray | None:
        """The node_order plugins' scores for *task*'s scheduling signature (cached: a signature shares them)."""
        sig = task.signature
        if sig not in self._extras:
            self._extras[sig] = self.ssn.hooks.node_order(self.ssn, self.ssn.snap.signature_pods[sig])
        return self._extras[sig]

    def best_node(
        self, task: TaskInfo, allowed: np.ndarray | None = None, bonus: np.ndarray | None = None
    ) -> Choice | None:
        """Where *task* goes: the best node row, whether it fits on idle resources now, and for a shared pod
        the GPU slots a node_choice plugin picked (else the Session picks them); None if no node can take it.

        *allowed* (n_nodes,) bool restricts the choice to a set of nodes (a topology domain); *bonus*
        (n_nodes,) float is added to the scores (topology's node preference). Neither changes the cache."""
        c = self._candidates(task)
        kept: _Candidates | _Ruled = c
        if self._ruled_on:  # a task with stateful rules: the kept scores with its rules applied
            rules = self.ssn.hooks.node_rules(self.ssn, task)
            if rules:
                kept = self._ruled_state(c, rules)
        if self._choose:  # a node_choice plugin picks among the nodes that fit now (rules folded in); else...
            chosen = self.ssn.hooks.node_choice(self.ssn, task, c.static, kept.fits_now, allowed, bonus)
            if chosen is not None:
                return chosen
        score = kept.score
        if score.size == 0:
            return None
        if bonus is None and allowed is None:
            row = kept.best
            if row < 0:
                row = kept.best = int(score.argmax())
        else:
            if bonus is not None:
                score = score + bonus
            if allowed is not None:
                score = np.where(allowed, score, -np.inf)
            row = int(score.argmax())
        if score.item(row) == _NEG_INF:
            return None
        key = 2 * row + kept.fits_now.item(row)
        choice = self._choices.get(key)
        if choice is None:  # one per (row, now) for the Session: allocate asks 50,000 times in a big cycle
            choice = self._choices[key] = Choice(row, key & 1 == 1)
        return choice

    def _ruled_state(self, c: _Candidates, rules: NodeRules) -> _Ruled:
        """The kept scores of *c* with *rules* applied, brought up to date: rows changed in the Session's log
        since, and rows the rules' own logs say changed (a rule without a log is applied whole each time)."""
        key = (id(c), *map(id, rules.rules))
        r = self._ruled.get(key)
        log = self.ssn.node_log
        for rule in rules.rules:  # rules bring themselves up to date as they are read
            rule.mask()
            rule.scores()
        if r is None:
            r = _Ruled(c, rules, np.full(len(c.score), -np.inf), np.zeros(len(c.score), dtype=bool), len(log), [])
            r.seen = [len(getattr(rule, "log", ())) for rule in rules.rules]
            self._apply_rules(r, None)
            self._ruled[key] = r
            if len(self._ruled) > _RULED_KEPT:
                self._ruled.popitem(last=False)
            return r
        self._ruled.move_to_end(key)
        parts: list[np.ndarray] = []
        whole = False
        if r.synced < len(log):
            parts.append(np.fromiter(set(log[r.synced :]), dtype=np.int64))
            r.synced = len(log)
        for i, rule in enumerate(rules.rules):
            rule_log = getattr(rule, "log", None)
            if rule_log is None:
                whole = True
                continue
            for entry in rule_log[r.seen[i] :]:
                if entry is None:
                    whole = True
                else:
                    parts.append(entry)
            r.seen[i] = len(rule_log)
        if not whole and parts:
            rows = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))
            whole = len(rows) > len(r.score) // 4
        if whole:
            self._apply_rules(r, None)
        elif parts and rows.size:
            self._apply_rules(r, rows)
        return r

    def _apply_rules(self, r: _Ruled, rows: np.ndarray | None) -> None:
        c, rules = r.c, r.rules
        at = slice(None) if rows is None else rows
        mask, now = rules.mask(), rules.now_mask()
        base = c.score[at]
        fits = c.fits_now[at]
        if mask is not None:
            m = mask[at]
            base = np.where(m, base, -np.inf)
            fits = fits & m
        if now is not None:
            w = now[at]
            if c.w_now:  # fits on idle resources, but a rule says not while releases run: no fits-now bonus
                base = base - c.w_now * (fits & ~w)
            fits = fits & w
        extra = rules.scores()
        if extra is not None:
            base = base + extra[at]
        r.score[at] = base
        r.fits_now[at] = fits
        if rows is None or r.best < 0:
            r.best = -1
            return
        best = r.best
        if best in rows:  # the best row changed: look at every row again (ties go to the lower row)
            r.best = -1
            return
        i = int(base.argmax())
        top, row = base.item(i), int(rows[i])
        best_score = r.score.item(best)
        if top > best_score or (top == best_score and row < best):
            r.best = row
