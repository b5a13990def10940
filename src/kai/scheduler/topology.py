"""Topology domains from node labels, and the domains a (sub)group may be placed in (kai-behaviour §6).

Rules: NumPy over nodes, no Python loop over nodes per task. A Topology's
domains are built once per session (``topology_index``); everything else is a
function of a domain table and the session's free-resource arrays.

Theory of operation.

* Domains. ``spec.levels`` run from the highest level to the lowest. A node
  belongs to a topology when it carries every level's label. Its domain at
  level l is the tuple of its label values at levels 0..l (KAI's
  ``calcDomainId``: two racks named ``r1`` in different blocks are different
  domains), numbered per level: ``domain[l]`` is an (n_nodes,) int array,
  -1 for nodes outside the topology. The root holds every member node.
* Constraint. ``requiredTopologyLevel`` and ``preferredTopologyLevel`` name a
  level by nodeLabel or alias. The levels tried run from the preferred level
  (else the required one) up to the required level (else the root), lowest
  first.
* Candidates. For the pods to place, each node's room is how many copies of
  the largest pod request fit on its idle plus releasing resources (KAI's
  ``AllocatablePods``); a domain qualifies when its nodes hold all the pods.
  Allocate tries each candidate inside a Statement, lowest level first, and
  within a level in KAI's bin-packing order of the tree (``sortTree``): the
  domains under one parent go most packed first (the larger share of their
  free resources the pods would take, dominant resource; then the domain
  name), and a level lists the children of its parents in the parents' order.
  So a rack under the most packed spine comes before a fuller rack under an
  emptier spine (KAI's 'Bin Packing - Pack Top-Most domain first').
* Node order inside a candidate above the preferred level (KAI's
  ``calculateNodeScores``): the preferred-level domains of the nodes the
  (sub)group may use, in that same tree order, give their nodes
  ``TOPOLOGY_SCORE * floor(10 * (i + 1) / n)`` for the i-th of n, so the pods
  fill the *last* domain of the packing order first (the emptiest, on a tie
  the last by name) and spill over in reverse order. The bonus outweighs the
  Placer's own scores, as KAI's topology score outweighs node availability.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from kai.api.objects import Topology, TopologyConstraint
from kai.scheduler.model import GPU, MILLI

TOPOLOGY_SCORE = 100_000.0
ROOT = -1  # level index of the root domain


@dataclass(frozen=True, slots=True)
class TopologyTree:
    """One Topology's domains over the session's nodes."""

    name: str
    labels: tuple[str, ...]  # nodeLabel per level, highest first
    aliases: tuple[str, ...]
    domain: np.ndarray  # (n_levels, n_nodes) int64: domain number at each level, -1 outside the topology
    domain_names: tuple[tuple[str, ...], ...]  # per level: "zone-a/block-1/rack-3" per domain number
    member: np.ndarray  # (n_nodes,) bool: the node carries every level's label
    # per level: each domain's position among the level's domain names sorted (the tie-break of the tree order)
    name_rank: tuple[np.ndarray, ...] = ()
    # per level l >= 1: where each level l - 1 domain's children start among level l's domains (domains are
    # numbered in (parent, labels) order, so a parent's children are consecutive); level 0's entry is unused
    child_start: tuple[np.ndarray, ...] = ()
    # the domains of all levels in one numbering, level 0's first (``offset[l] + d``): per level l, the
    # (l + 1, n_dom) numbers of each domain's ancestors at levels 0..l (itself last), and per number its name rank
    offset: tuple[int, ...] = ()
    ancestors: tuple[np.ndarray, ...] = ()
    all_name_rank: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def level(self, name: str) -> int | None:
        """Index of the level named *name* (nodeLabel or alias), None if there is none."""
        for i, (label, alias) in enumerate(zip(self.labels, self.aliases)):
            if name in (label, alias):
                return i
        return None

    def level_name(self, level: int) -> str:
        if level == ROOT:
            return "topology"
        return self.aliases[level] or self.labels[level]

    def domain_name(self, level: int, d: int) -> str:
        return self.name if level == ROOT else self.domain_names[level][d]


def build_tree(topology: Topology, node_labels: tuple[dict[str, str], ...]) -> TopologyTree:
    """Number the domains of *topology* over nodes with *node_labels* (rows in node order)."""
    n = len(node_labels)
    levels = topology.levels
    member = np.ones(n, dtype=bool)
    domain = np.full((len(levels), n), -1, dtype=np.int64)
    names: list[tuple[str, ...]] = []
    parents: list[np.ndarray] = []
    values = [np.array([lb.get(lv.node_label) or "" for lb in node_labels], dtype=object) for lv in levels]
    for v in values:
        member &= v != ""
    key = np.zeros(n, dtype=np.int64)
    for li, v in enumerate(values):
        codes = np.zeros(n, dtype=np.int64)
        if member.any():
            _, inv = np.unique(v[member].astype(str), return_inverse=True)
            codes[member] = inv
        combined = key * (n + 1) + codes  # key < n and codes < n, so pairs stay distinct
        ids = np.full(n, -1, dtype=np.int64)
        level_names: tuple[str, ...] = ()
        if member.any():
            _, first, inv = np.unique(combined[member], return_index=True, return_inverse=True)
            ids[member] = inv
            rows = np.flatnonzero(member)[first]
            level_names = tuple("/".join(str(values[k][r]) for k in range(li + 1)) for r in rows)
        domain[li] = ids
        names.append(level_names)
        parent = np.zeros(len(level_names), dtype=np.int64)
        if li:
            parent[ids[member]] = domain[li - 1][member]
        parents.append(parent)
        key = np.where(ids >= 0, ids, 0)
    name_rank = tuple(_name_rank(level_names) for level_names in names)
    offset = np.cumsum([0, *(len(level_names) for level_names in names)]).tolist()[:-1]
    ancestors: list[np.ndarray] = []
    for li, parent in enumerate(parents):
        own = offset[li] + np.arange(len(parent), dtype=np.int64)
        ancestors.append(own[None, :] if li == 0 else np.vstack([ancestors[-1][:, parent], own]))
    return TopologyTree(
        name=topology.meta.name,
        labels=tuple(lv.node_label for lv in levels),
        aliases=tuple(lv.alias for lv in levels),
        domain=domain,
        domain_names=tuple(names),
        member=member,
        name_rank=name_rank,
        child_start=tuple(
            np.searchsorted(p, np.arange(len(names[li - 1]))) if li else p for li, p in enumerate(parents)
        ),
        offset=tuple(offset),
        ancestors=tuple(ancestors),
        all_name_rank=np.concatenate(name_rank) if name_rank else np.zeros(0, dtype=np.int64),
    )


def _name_rank(names: tuple[str, ...]) -> np.ndarray:
    """Each name's position in *names* sorted (Python's string order), as an int64 array."""
    rank = np.empty(len(names), dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return rank


class TopologyError(ValueError):
    """A constraint that names a missing Topology or level: the job cannot be placed as written."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """A (sub)group's topology constraint, resolved against its tree."""

    tree: TopologyTree
    required: int | None  # level index
    preferred: int | None

    def levels(self) -> list[int]:
        """Levels to try, lowest (most specific) first; ROOT when nothing is required."""
        lo = self.preferred if self.preferred is not None else self.required
        hi = self.required if self.required is not None else ROOT
        assert lo is not None
        return list(range(lo, hi - 1, -1))


def resolve(tc: TopologyConstraint | None, trees: TopologyIndex, who: str) -> Constraint | None:
    """The constraint of *who* ("podgroup ns/name" or "subgroup x of ns/name"); None when it asks for nothing.

    Raises TopologyError with KAI's words for a missing Topology or level."""
    if tc is None or not (tc.required_level or tc.preferred_level):
        return None  # a topology name without a level asks for nothing (as in KAI)
    if not tc.topology:
        raise TopologyError(
            f"topology constraint error: {who} sets a topology level but names no topology "
            "(topologyConstraint.topology or the kai.scheduler/topology annotation)"
        )
    tree = trees.get(tc.topology)
    if tree is None:
        raise TopologyError(f"Requested topology {tc.topology} does not exist (topology constraint of {who})")
    found: dict[str, int | None] = {}
    for kind, name in (("required", tc.required_level), ("preferred", tc.preferred_level)):
        if not name:
            found[kind] = None
            continue
        level = tree.level(name)
        if level is None:
            raise TopologyError(
                f"topology constraint error: {who} specified '{name}' as the {kind} topology constraint level, "
                f"but the topology tree '{tree.name}' does not contain a level with this name"
            )
        found[kind] = level
    req, pref = found["required"], found["preferred"]
    if req is not None and pref is not None and pref < req:
        raise TopologyError(
            f"topology constraint error: {who} prefers level '{tc.preferred_level}', which is above its required "
            f"level '{tc.required_level}' in topology '{tree.name}'"
        )
    return Constraint(tree, req, pref)


@dataclass(slots=True)
class Candidate:
    level: int
    index: int  # domain number at *level* (0 for the root)
    mask: np.ndarray  # (n_nodes,) bool: the nodes the pods may use
    bonus: np.ndarray | None  # (n_nodes,) float node preference, None = no preference


@dataclass(slots=True)
class Candidates:
    """The domains to try, in order, and what to say when none of them works."""

    constraint: Constraint
    count: int
    gpus: float  # GPUs the pods request in all
    items: list[tuple[int, int]] = field(default_factory=list)  # (level, domain)
    room: dict[int, np.ndarray] = field(default_factory=dict)  # level -> pods each domain holds
    free_gpu: dict[int, np.ndarray] = field(default_factory=dict)  # level -> free milli-GPUs per domain
    allowed: np.ndarray | None = None
    preferred_score: np.ndarray | None = None  # (n_nodes,) KAI's node score by preferred-level domain

    def __iter__(self) -> Iterator[Candidate]:
        con = self.constraint
        tree = con.tree
        assert self.allowed is not None
        for level, d in self.items:
            mask = self.allowed if level == ROOT else self.allowed & (tree.domain[level] == d)
            yield Candidate(level, d, mask, self._bonus(mask, level))

    def _bonus(self, mask: np.ndarray, level: int) -> np.ndarray | None:
        pref = self.constraint.preferred
        if pref is None or level == pref or self.preferred_score is None:
            return None
        return np.where(mask, self.preferred_score, 0.0)

    def failure(self, tried: int, why: str) -> str:
        """Why no candidate worked: 'no rack of topology t has 16 free GPUs; the best has 8'."""
        con = self.constraint
        tree = con.tree
        top = con.levels()[-1]
        what = tree.level_name(top)
        if tried:
            return (
                f"topology {tree.name}: no {what} could take all {self.count} pods ({tried} tried, each with room "
                f"by resource count): {why}"
            )
        if top == ROOT:
            room = int(self.room[ROOT].sum()) if ROOT in self.room else 0
            return f"the nodes of topology {tree.name} have room for {room} of the {self.count} pods" + (
                f" ({_gpus(self.free_gpu[ROOT].sum())} free GPUs, {_gpus(self.gpus * MILLI)} needed)"
                if self.gpus and ROOT in self.free_gpu
                else ""
            )
        room = self.room.get(top)
        if room is None or room.size == 0:
            return f"no {what} of topology {tree.name} has nodes the pods may use"
        best = int(np.argmax(room))
        if self.gpus:
            free = self.free_gpu[top]
            bestg = int(np.argmax(free))
            return (
                f"no {what} of topology {tree.name} has {_gpus(self.gpus * MILLI)} free GPUs; the best has "
                f"{_gpus(free[bestg])} ({tree.domain_name(top, bestg)}, room for {int(room[bestg])} of the "
                f"{self.count} pods)"
            )
        return (
            f"no {what} of topology {tree.name} has room for {self.count} pods; the best has room for "
            f"{int(room[best])} ({tree.domain_name(top, best)})"
        )


def _gpus(milli: float) -> str:
    v = float(milli) / MILLI
    return f"{v:g}"


def _packing(free: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Per domain, the dominant share of its free resources that *total* would take (larger = more packed).

    *free*: (n_dom, n_cols) the domains' free amounts of the columns *total* (n_cols,) asks for."""
    if not len(total):
        return np.zeros(len(free))
    r = np.divide(total, free, out=np.full(free.shape, 1000.0), where=free > 0)  # KAI: 1000 when it has none
    return np.maximum(r.max(axis=1), 0.0)


def candidates(
    con: Constraint,
    allowed: np.ndarray,
    free: np.ndarray,
    max_request: np.ndarray,
    total: np.ndarray,
    count: int,
    pinned: np.ndarray | None = None,
) -> Candidates:
    """Domains that can hold *count* pods (largest request *max_request*, all together *total*), in order.

    *allowed*: (n,) bool nodes the pods may use (static predicates, a parent's domain); *free*: (n, r) idle
    plus releasing; *pinned*: nodes where the (sub)group already runs pods: under a required level only the
    domains holding them count (KAI)."""
    tree = con.tree
    allowed = allowed & tree.member
    if pinned is not None and con.required is not None and pinned.any():
        ids = tree.domain[con.required]
        allowed = allowed & np.isin(ids, np.unique(ids[pinned & tree.member]))
    inside = allowed.nonzero()[0]  # (1-D: the method, without flatnonzero's ravel)
    free_inside = free[inside]
    cols = max_request.nonzero()[0]
    if len(cols):  # per allowed node, how many of the largest pod fit (at most *count*)
        k = np.minimum(np.min(np.maximum(free_inside[:, cols], 0) // max_request[cols], axis=1), count)
    else:
        k = np.full(len(inside), count, dtype=np.int64)
    out = Candidates(con, count, float(total[GPU]) / MILLI, allowed=allowed)
    depth = con.preferred if con.preferred is not None else con.required
    assert depth is not None
    order = _TreeOrder(tree, inside, free_inside, total, depth)
    for level in con.levels():
        if level == ROOT:
            room_all = int(k.sum())
            out.room[ROOT] = np.array([room_all])
            out.free_gpu[ROOT] = np.array([free_inside[:, GPU].clip(0).sum()])
            if room_all >= count:
                out.items.append((ROOT, 0))
            continue
        n_dom = len(tree.domain_names[level])
        inv = tree.domain[level][inside]
        room = np.bincount(inv, weights=k, minlength=n_dom).astype(np.int64)
        out.room[level] = room
        out.free_gpu[level] = np.bincount(
            inv, weights=np.maximum(free_inside[:, GPU], 0).astype(np.float64), minlength=n_dom
        )
        fit = (room >= count).nonzero()[0]
        if len(fit) > 1:  # one domain needs no order
            fit = fit[np.argsort(order.rank(level)[fit], kind="stable")]
        out.items += [(level, d) for d in fit.tolist()]
    if con.preferred is not None:
        ids = tree.domain[con.preferred]
        rank = order.rank(con.preferred)
        n_pref = int((rank >= 0).sum())
        if n_pref > 1:
            score = np.zeros(len(allowed))
            score[inside] = TOPOLOGY_SCORE * np.floor(10 * (rank[ids[inside]] + 1) / n_pref)
            out.preferred_score = score
    return out


class _TreeOrder:
    """Each domain's position in KAI's sorted tree (``sortTree``, read level by level as ``sortDomainInfos``
    does): siblings most packed first, then by name; a level follows its parents' order. So a level's order
    is that of the domains' paths compared level by level from the top (most packed, then name): one lexsort
    per level asked for, no level waiting on another's result.

    The allowed nodes' free amounts are summed per domain at *depth* (bincount, row by row), then up the tree
    child by child: the same sums as summing each level's nodes (whole numbers, exact in float64 below 2**53).
    Computed on the first ``rank`` call: a constraint whose levels hold one fitting domain each needs none."""

    def __init__(
        self, tree: TopologyTree, inside: np.ndarray, free_inside: np.ndarray, total: np.ndarray, depth: int
    ) -> None:
        self._args = (tree, inside, free_inside, total, depth)
        self._neg_ratio: np.ndarray | None = None  # per domain of every level (the tree's one numbering)
        self._nodes: list[np.ndarray] = []  # per level 0..depth: allowed nodes per domain

    def _neg_packing(self) -> np.ndarray:
        tree, inside, free_inside, total, depth = self._args
        cols = total.nonzero()[0]
        nc = len(cols)
        inv = tree.domain[depth][inside]
        n_dom = len(tree.domain_names[depth])
        # per domain, the needed columns summed and the allowed nodes counted (last column): one bincount per
        # column, each over the nodes in order (the same float sums as one bincount over interleaved bins,
        # without building the bins: 670 calls a subgroups cycle)
        sums = np.empty((n_dom, nc + 1))
        for j, c in enumerate(cols.tolist()):
            sums[:, j] = np.bincount(inv, weights=free_inside[:, c], minlength=n_dom)
        sums[:, nc] = np.bincount(inv, minlength=n_dom)
        per_level = [sums]
        for level in range(depth, 0, -1):
            starts = tree.child_start[level]
            sums = np.add.reduceat(sums, starts, axis=0) if len(starts) else sums[:0]
            per_level.append(sums)
        per_level.reverse()
        self._nodes = [s[:, nc] for s in per_level]
        return -_packing(np.concatenate(per_level)[:, :nc], total[cols])

    def rank(self, level: int) -> np.ndarray:
        """(n_dom,) each domain's position in the order of *level* (0..depth); -1 without allowed nodes."""
        if self._neg_ratio is None:
            self._neg_ratio = self._neg_packing()
        tree = self._args[0]
        nodes = self._nodes[level]
        doms = nodes.nonzero()[0]
        anc = tree.ancestors[level][::-1, doms]  # (level + 1, k): the domain itself first, its top-level one last
        # lexsort's keys, least significant first: name, packing at this level, then its parent's, ..., the top's
        keys = np.empty((2 * (level + 1), len(doms)))
        keys[0::2] = tree.all_name_rank[anc]
        keys[1::2] = self._neg_ratio[anc]
        rank = np.full(len(nodes), -1, dtype=np.int64)
        rank[doms[np.lexsort(keys)]] = np.arange(len(doms))
        return rank


class TopologyIndex:
    """The session's topology trees, by name, built on first use."""

    def __init__(self, topologies: tuple[Topology, ...], node_labels: tuple[dict[str, str], ...]) -> None:
        self._topologies = {t.meta.name: t for t in topologies}
        self._labels = node_labels
        self._trees: dict[str, TopologyTree] = {}
        self.resolved: dict[int, list | str] = {}  # job -> its gang nodes' resolved constraints, or the error

    def get(self, name: str) -> TopologyTree | None:
        tree = self._trees.get(name)
        if tree is None and name in self._topologies:
            tree = self._trees[name] = build_tree(self._topologies[name], self._labels)
        return tree


def topology_index(ssn) -> TopologyIndex:
    """The session's TopologyIndex, built on first use and kept in ``ssn.cache`` (snapshot-derived)."""
    idx = ssn.cache.get("topology")
    if idx is None:
        snap = ssn.snap
        idx = ssn.cache["topology"] = TopologyIndex(snap.topologies, snap.nodes.labels)
    return idx


def job_constraints_of(ssn, job) -> list[Constraint | None]:
    """Each gang node of *job* with its constraint resolved against the Session's topologies (cached per job);
    raises TopologyError naming the job (and subgroup) when a Topology or level is missing."""
    idx = topology_index(ssn)
    cached = idx.resolved.get(job.index)
    if cached is not None:
        if isinstance(cached, str):
            raise TopologyError(cached)
        return cached
    gang = job.gang
    assert gang is not None
    try:
        out = [
            resolve(g.constraint, idx, f"podgroup {job.ref}" if g.parent < 0 else f"subgroup {g.name} of {job.ref}")
            for g in gang.nodes
        ]
    except TopologyError as e:
        idx.resolved[job.index] = str(e)
        raise
    idx.resolved[job.index] = out
    return out
