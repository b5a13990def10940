"""GPU sharing: fractional GPU requests and per-GPU accounting (kai-behaviour §5).

Requests are pod annotations (KAI's keys): ``gpu-fraction: "0.5"`` (a share of one GPU),
``gpu-memory: "2000"`` (MiB of one GPU), ``gpu-fraction-num-devices: "N"`` (the same portion
on each of N GPUs) and ``gpu-fraction-container-name``. ``parse_share`` turns them into a
``GpuShare`` or a message naming the annotation that is wrong.

Theory of operation. Accounting is by GPU memory, as KAI's: every GPU of node n holds
``cap[n]`` units, its ``nvidia.com/gpu.memory`` label in MiB times 1000 (1/1000 MiB units
keep f x memory exact for f in milli-GPU). A fraction f takes ``f x cap`` units of a GPU,
a gpu-memory request m takes ``m x 1000``. Each GPU a fractional pod sits on is a *GPU
group*: a slot g of its node, with

* ``idle[n, g]``  units free now,
* ``rel[n, g]``   units held by releasing pods (free later),
* ``pods[n, g]``  pods on it (every active status, releasing included),
* ``gone[n, g]``  of those, the releasing ones.

A slot with no pods is not a group: it is one of the node's whole GPUs, counted in the
node's GPU column (milli-GPU of whole GPUs, idle or releasing) like any other. The first
fraction on a GPU takes it out of that pool; a group whose pods are all releasing counts as
one releasing whole GPU (KAI's ReleasingSharedGPUs), and is no longer offered as a group.
Whole-GPU pods only ever take whole GPUs from the pool, so they never land on a shared GPU. Whole GPUs
are counted per node, not per device: which device a whole-GPU pod gets is the device plugin's choice at
start (as with KAI), and any free device serves; a device becomes the engine's business only when a
fraction makes it a group, and from then on it is tracked per slot until its last pod leaves.

Whether a request fits a node is one rule, ``portion_fits``: the devices it needs are found among the
groups with room for its portion and the node's whole free GPUs. The fit functions below differ only in
how they count those inputs (per node in Python, over many nodes in NumPy, from each node's largest group
for one device), so each stays as fast as the question it answers.

Choosing GPUs on a node (``choose``): the candidates are the groups the portion fits on and
one "whole GPU" candidate per GPU in the idle (then releasing) pool. A pod that binds now takes only
what is free now (kai: a pod that can bind now is not made to wait); a pipelined pod, bound only
once the releasing pods are gone, ranks the candidates as they will be then. The order is KAI's
GpuOrder: *gpupack* prefers the fullest group, a fresh GPU last; *gpuspread* a fresh GPU,
then the emptiest group; ties go to the lower slot. The first N candidates are taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.objects import Pod, parse_go_int
from kai.scheduler.model import MILLI, GpuShare


def _field(key: str) -> str:
    return f"metadata.annotations.{key}"


def parse_share(pod: Pod) -> tuple[GpuShare | None, str]:
    """(the pod's fractional request or None, an error naming the bad annotation or ""). The checks are
    KAI's admission checks (gpu_request_validator.go) plus the ones its scheduler makes on use."""
    ann = pod.meta.annotations
    frac = ann.get(C.ANNOTATION_GPU_FRACTION)
    mem = ann.get(C.ANNOTATION_GPU_MEMORY)
    num = ann.get(C.ANNOTATION_GPU_FRACTION_NUM_DEVICES)
    container = ann.get(C.ANNOTATION_GPU_FRACTION_CONTAINER_NAME, "")
    mps = ann.get(C.ANNOTATION_MPS)
    if frac is None and mem is None:
        if num is not None:
            return None, (
                f"{_field(C.ANNOTATION_GPU_FRACTION_NUM_DEVICES)}: {num!r} needs a {C.ANNOTATION_GPU_FRACTION} "
                f"or {C.ANNOTATION_GPU_MEMORY} annotation"
            )
        if mps is not None and mps.lower() == "true":
            return None, f"{_field(C.ANNOTATION_MPS)}: MPS is only supported with GPU fraction request"
        return None, ""
    if frac is not None and mem is not None:
        return None, (
            f"{_field(C.ANNOTATION_GPU_MEMORY)}: cannot request both GPU and GPU memory "
            f"({C.ANNOTATION_GPU_FRACTION} is set too)"
        )
    if pod.requests.get(C.RESOURCE_GPU, 0) > 0:
        key = C.ANNOTATION_GPU_FRACTION if frac is not None else C.ANNOTATION_GPU_MEMORY
        return None, f"{_field(key)}: cannot have both GPU fraction request and whole GPU resource request/limit"
    devices = 1
    if num is not None:
        n = parse_go_int(num.strip())
        if n is None or n < 1:
            return None, f"{_field(C.ANNOTATION_GPU_FRACTION_NUM_DEVICES)}: {num!r} must be an integer >= 1"
        devices = n
    names = (*pod.container_names, *pod.init_container_names)
    if container and names and container not in names:
        return None, (
            f"{_field(C.ANNOTATION_GPU_FRACTION_CONTAINER_NAME)}: {container!r} is not a container of the pod "
            f"({', '.join(names)})"
        )
    if frac is not None:
        try:
            f = float(frac)
        except ValueError:
            f = float("nan")
        if not 0 < f < 1 or "." not in frac:
            return None, (
                f"{_field(C.ANNOTATION_GPU_FRACTION)}: {frac!r} must be a number between 0 and 1 (exclusive), "
                'e.g. "0.5"'
            )
        milli = round(f * MILLI)
        if not 0 < milli < MILLI:
            return None, f"{_field(C.ANNOTATION_GPU_FRACTION)}: {frac!r} is finer than kai's resolution of 0.001 GPU"
        return GpuShare(milli, 0, devices, container), ""
    assert mem is not None
    if mps is not None and mps.lower() == "true":
        return None, f"{_field(C.ANNOTATION_MPS)}: MPS is only supported with GPU fraction request"
    m = parse_go_int(mem.strip())
    if m is None or m <= 0:
        return None, f"{_field(C.ANNOTATION_GPU_MEMORY)}: {mem!r} must be a positive integer (MiB)"
    return GpuShare(0, m, devices, container), ""


def default_group_name(node: str, slot: int) -> str:
    """The name kai gives a new GPU group (KAI uses a UUID; a readable name serves the simulator)."""
    return f"{node}-gpu{slot}"


@dataclass(frozen=True, slots=True)
class GpuTable:
    """Per-GPU state at snapshot time (see the module docstring); read-only, the session copies it."""

    cap: np.ndarray  # (n_nodes,) int64 units per GPU
    idle: np.ndarray  # (n_nodes, max_slots) int64 units free now (a slot with no pods is a whole GPU: cap)
    rel: np.ndarray  # (n_nodes, max_slots) int64 units held by releasing pods
    pods: np.ndarray  # (n_nodes, max_slots) int64 pods on the slot
    gone: np.ndarray  # (n_nodes, max_slots) int64 releasing pods on the slot
    names: tuple[tuple[str, ...], ...]  # per node, the group name of each slot ("" = unnamed)
    sharing_nodes: np.ndarray  # (n_nodes,) bool: fractions may go there (GPU node, not MIG)


# --- placement questions, one node (Python scalars) or many rows (NumPy) ----------------------------------

NOW, LATER = 2, 1  # fit levels: on idle resources now; only with what is being released


# A GPU chosen for a portion: (slot, kind), kind one of "group" | "fresh" | "released". A plain tuple: allocate
# with GPU sharing makes one per placement, and a frozen dataclass's __init__ costs several times a tuple's.
Pick = tuple[int, str]


def choose(
    share: GpuShare,
    cap: int,
    idle: list[int],
    rel: list[int],
    pods: list[int],
    gone: list[int],
    whole_idle: int,
    whole_releasing: int,
    pack: bool,
    allow_releasing: bool,
) -> list[Pick] | None:
    """The GPUs a portion goes to on one node (lists are the node's slot rows; whole_* count whole GPUs
    in the node's pool), or None if it does not fit. See the module docstring for the order. Called once per
    shared placement, with positional arguments (cheaper than keywords at that rate)."""
    need = share.units(cap)
    if need > cap:
        return None
    d = share.devices
    if d == 1 and not allow_releasing:  # the common case, without building the ranking
        best = -1  # pack: the fullest group (least idle) that fits; spread: the emptiest; ties: the lower slot
        for s, n in enumerate(pods):
            fits = n > gone[s] and idle[s] >= need
            if fits and (best < 0 or (idle[s] < idle[best] if pack else idle[s] > idle[best])):
                best = s
        fresh = whole_idle > 0 and 0 in pods
        if best >= 0 and (pack or not fresh):
            return [(best, "group")]
        return [(pods.index(0), "fresh")] if fresh else None
    # (score, slot, kind): smallest first. A pod bound now takes what is free now. A pod placed on releasing room
    # (pipelined) is bound only once those pods are gone, and its GPUs are chosen afresh then: it ranks them as
    # they will be then (releasing room counted free), or a plan made around releasing pods (a victim solver's)
    # would pick GPUs the next cycle does not, fail there, and be made again every other cycle.
    ranked: list[tuple[float, int, str]] = []
    free_slots: list[int] = []
    releasing_slots: list[int] = []
    for s, n in enumerate(pods):
        if n == 0:
            free_slots.append(s)
        elif n == gone[s]:
            releasing_slots.append(s)
        elif need <= (room := idle[s] + rel[s] if allow_releasing else idle[s]):
            ranked.append(((room - cap if pack else cap - room) / cap, s, "group"))
    fresh_score = 0.0 if pack else -1.0
    k = min(max(whole_idle, 0), len(free_slots), d)
    ranked += [(fresh_score, free_slots[j], "fresh") for j in range(k)]
    if allow_releasing and whole_releasing > 0:
        spare = releasing_slots + free_slots[k:]
        ranked += [(fresh_score, spare[j], "released") for j in range(min(whole_releasing, len(spare), d))]
    if len(ranked) < d:
        return None
    if d == 1:
        best = min(ranked)
        return [(best[1], best[2])]
    ranked.sort()
    return [(r[1], r[2]) for r in ranked[:d]]


def portion_fits(need: Any, cap: Any, fitting_groups: Any, whole: Any, devices: int) -> Any:
    """The GPU-fit rule, the one every fit question of the engine asks (kai-behaviour §5): a portion of
    *need* units on each of *devices* GPUs fits a node when one GPU can hold it at all (``need <= cap``) and
    its devices can be found among the node's GPU groups with room for it (*fitting_groups*) and its whole
    free GPUs (*whole*). What "room" and "free" mean (now, or once releasing pods are gone) is the caller's
    count; the rule is the same. Python numbers (one node) or NumPy arrays (many nodes) alike: ``&`` of two
    bools is a bool."""
    return (need <= cap) & (fitting_groups + whole >= devices)


def one_device_room(
    cap: int, max_now: int, max_later: int, idle_milli: int, releasing_milli: int
) -> tuple[int, int, int]:
    """``portion_fits`` for a one-device portion on one node, as the largest portion that fits: from the node's
    largest free group now and later (-1 if none) and its whole-GPU pool (milli-GPU, idle and releasing), the
    largest *need* that fits now, that fits later, and that fits on a group (has a group it fits on). The rule
    with one device written out (fitting + whole >= 1 is fitting or whole; ``need <= cap`` caps all three),
    for the Placer's row rescoring: it asks once per changed row, and each cache then compares its portion
    with three numbers. A test checks it answers as ``portion_fits``."""
    # whole_gpus(idle_milli, releasing_milli) >= 1 spelled out, and no min(): asked 16,000 times a sharing cycle
    whole_now = idle_milli >= MILLI
    whole_later = whole_now or releasing_milli + (idle_milli if idle_milli < 0 else 0) >= MILLI
    shared = max_later if max_later < cap else cap
    return cap if whole_now else max_now if max_now < cap else cap, cap if whole_later else shared, shared


def whole_gpus(idle_milli: int, releasing_milli: int) -> tuple[int, int]:
    """Whole GPUs of a node's pool (milli-GPU columns) free now, and free once releasing pods are gone. On an
    over-committed node (idle below 0: a whole-GPU pod on a device a group also holds) what is released first
    pays what idle owes: evicting that pod frees no device (``Session.pick_gpus`` counts the same)."""
    now = max(idle_milli, 0) // MILLI
    return now, now + max(releasing_milli + min(idle_milli, 0), 0) // MILLI


def whole_gpu_rows(idle_milli: np.ndarray, releasing_milli: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``whole_gpus`` over many nodes at once."""
    now = np.maximum(idle_milli, 0) // MILLI
    return now, now + np.maximum(releasing_milli + np.minimum(idle_milli, 0), 0) // MILLI


def check_gpus(
    share: GpuShare,
    cap: int,
    idle: list[int],
    rel: list[int],
    pods: list[int],
    gone: list[int],
    whole_idle: int,
    whole_releasing: int,
    allow_releasing: bool,
    gpus: tuple[int, ...],
) -> list[Pick] | None:
    """Whether exactly the slots *gpus* of one node can take the portion (a choice made earlier: a
    simulation's, or a policy's), as ``choose``'s picks, or None. The arguments are ``choose``'s; each slot is
    taken as what it is: a group with room, a group whose pods are all releasing (one of the releasing whole
    GPUs), a fresh whole GPU, or one a releasing whole-GPU pod still holds."""
    need = share.units(cap)
    picks: list[Pick] = []
    for s in gpus:
        if pods[s] > gone[s]:
            ok = need <= idle[s] or (allow_releasing and need <= idle[s] + rel[s])
            kind = "group"
        elif pods[s] > 0:
            ok = allow_releasing and whole_releasing > 0 and need <= idle[s] + rel[s]
            whole_releasing -= 1
            kind = "released"
        elif whole_idle > 0:
            ok = need <= cap
            whole_idle -= 1
            kind = "fresh"
        else:
            ok = allow_releasing and whole_releasing > 0 and need <= cap
            whole_releasing -= 1
            kind = "released"
        if not ok:
            return None
        picks.append((s, kind))
    return picks


def fit_rows(
    share: GpuShare,
    cap: np.ndarray,
    idle: np.ndarray,
    rel: np.ndarray,
    pods: np.ndarray,
    gone: np.ndarray,
    node_idle_gpu: np.ndarray,
    node_rel_gpu: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Over many node rows at once: (fits now, fits later, has a group it fits on), each (rows,) bool.
    The same rules as ``choose``, counted instead of ranked."""
    need = share.units_array(cap)
    group = (pods > 0) & (pods > gone)
    ok_now = group & (idle >= need[:, None])
    ok_later = group & (idle + rel >= need[:, None])
    whole_now, whole_later = whole_gpu_rows(node_idle_gpu, node_rel_gpu)
    d = share.devices
    fits_now = portion_fits(need, cap, ok_now.sum(axis=1), whole_now, d)
    fits_later = portion_fits(need, cap, ok_later.sum(axis=1), whole_later, d)
    return fits_now, fits_later, portion_fits(need, cap, ok_later.any(axis=1), 0, 1)


def fit_one(
    share: GpuShare,
    cap: int,
    free_now: list[int],
    free_later: list[int],
    whole_idle: int,
    whole_releasing: int,
) -> tuple[bool, bool, bool]:
    """``fit_rows`` for one node in Python scalars (a placement changes one row; NumPy's per-call
    overhead would dominate). *free_now* / *free_later*: what each of the node's groups has free."""
    need = share.units(cap)
    d = share.devices
    whole_idle, whole_later = whole_gpus(whole_idle, whole_releasing)
    now_n = sum(1 for f in free_now if f >= need)
    later_n = sum(1 for f in free_later if f >= need)
    shared = portion_fits(need, cap, later_n, 0, 1)
    return portion_fits(need, cap, now_n, whole_idle, d), portion_fits(need, cap, later_n, whole_later, d), shared


def fit_rows_single(
    share: GpuShare,
    cap: np.ndarray,
    max_now: np.ndarray,
    max_later: np.ndarray,
    node_idle_gpu: np.ndarray,
    node_rel_gpu: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``fit_rows`` for a one-device portion, from each node's largest free group (-1 if none): the
    Placer's batch path, a few vector operations instead of one pass over every GPU slot."""
    need = share.units_array(cap)
    whole_now, whole_later = whole_gpu_rows(node_idle_gpu, node_rel_gpu)
    fitting_now, fitting_later = max_now >= need, max_later >= need  # one device: the largest group decides
    fits_now = portion_fits(need, cap, fitting_now, whole_now, 1)
    fits_later = portion_fits(need, cap, fitting_later, whole_later, 1)
    return fits_now, fits_later, portion_fits(need, cap, fitting_later, 0, 1)


def shared_free_milli(cap: np.ndarray, idle: np.ndarray, rel: np.ndarray, pods: np.ndarray) -> np.ndarray:
    """(n_nodes,) milli-GPU free now or later on the node's GPU groups (what moving pods could gather)."""
    free = np.where(pods > 0, np.maximum(idle + rel, 0), 0).sum(axis=1)
    return free * MILLI // np.maximum(cap, 1)


# --- building the table from the pods on the nodes (snapshot time) ----------------------------------------


@dataclass(slots=True)
class Placed:
    """A shared pod found on a node: which groups its labels name, and what it holds on each."""

    node: int
    groups: list[str]
    share: GpuShare
    releasing: bool
    slots: list[int]  # filled by build_gpu_table


def _named_slot(node: str, name: str, n_gpus: int) -> int:
    prefix = f"{node}-gpu"
    if name.startswith(prefix) and name[len(prefix) :].isdigit():
        k = int(name[len(prefix) :])
        if k < n_gpus:
            return k
    return -1


def build_gpu_table(
    node_names: tuple[str, ...],
    gpu_counts: np.ndarray,
    cap: np.ndarray,
    sharing_nodes: np.ndarray,
    placed: list[Placed],
) -> GpuTable:
    """Per-GPU state from the shared pods on each node. Groups are matched to slots by name (kai's own
    ``<node>-gpu<k>`` names keep slot k; other names take the lowest free slots, in name order). A pod
    that names fewer groups than it has devices (input written by hand) joins, per missing device, the
    first group it fits on, else a fresh GPU, so the state is exact and deterministic either way.
    More groups than a node has GPUs (over-committed input) get extra slots: nothing running is
    dropped, and the node's whole-GPU pool goes negative so nothing more lands there."""
    n = len(node_names)
    by_node: dict[int, list[Placed]] = {}
    for p in placed:
        by_node.setdefault(p.node, []).append(p)
    slot_of: dict[int, dict[str, int]] = {}
    n_slots = [int(max(c, 0)) // MILLI for c in gpu_counts.tolist()]
    for row, items in by_node.items():
        names = sorted({g for p in items for g in p.groups})
        mapping: dict[str, int] = {}
        taken: set[int] = set()
        for name in names:
            k = _named_slot(node_names[row], name, n_slots[row])
            if k >= 0 and k not in taken:
                mapping[name] = k
                taken.add(k)
        nxt = 0
        for name in names:
            if name in mapping:
                continue
            while nxt in taken:
                nxt += 1
            mapping[name] = nxt
            taken.add(nxt)
        slot_of[row] = mapping
        unnamed = sum(max(p.share.devices - len(p.groups), 0) for p in items)
        n_slots[row] = max(n_slots[row], max(taken, default=-1) + 1 + unnamed)
    width = max(n_slots, default=0)
    idle = np.repeat(cap[:, None], width, axis=1).astype(np.int64) if n else np.zeros((0, 0), dtype=np.int64)
    rel = np.zeros((n, width), dtype=np.int64)
    pods = np.zeros((n, width), dtype=np.int64)
    gone = np.zeros((n, width), dtype=np.int64)
    names_out = [[""] * width for _ in range(n)]

    def put(p: Placed, s: int) -> None:
        need = p.share.units(int(cap[p.node]))
        idle[p.node, s] -= need
        pods[p.node, s] += 1
        if p.releasing:
            rel[p.node, s] += need
            gone[p.node, s] += 1
        p.slots.append(s)

    for row, items in sorted(by_node.items()):
        for name, s in slot_of[row].items():
            names_out[row][s] = name
        for p in items:
            for g in p.groups[: p.share.devices]:
                put(p, slot_of[row][g])
        for p in items:
            for _ in range(p.share.devices - len(p.slots)):
                need = p.share.units(int(cap[row]))
                fits = [
                    s for s in range(n_slots[row]) if pods[row, s] > 0 and s not in p.slots and idle[row, s] >= need
                ]
                free = [s for s in range(n_slots[row]) if pods[row, s] == 0]
                put(p, fits[0] if fits else free[0])
    for a in (idle, rel, pods, gone):
        a.flags.writeable = False
    return GpuTable(
        cap=cap,
        idle=idle,
        rel=rel,
        pods=pods,
        gone=gone,
        names=tuple(tuple(r) for r in names_out),
        sharing_nodes=sharing_nodes,
    )
