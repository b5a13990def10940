"""GPU placement policies on tiny hand-made clusters: the choice each must make, with the arithmetic.

Clusters are built directly as FreeState arrays (CPU in millicores, GPU in milli-GPU per device,
-1 = no such device). Model ids: 0 = "A", 1 = "B".
"""

from __future__ import annotations

import numpy as np
import pytest

from kai.scheduler.gpupolicy import (
    BestFit,
    DotProduct,
    Fgd,
    FreeState,
    GpuClustering,
    GpuPacking,
    KaiBinpack,
    Placement,
    PodRequest,
    RandomFit,
    ShapeCounter,
    TargetWorkload,
    canonical_name,
    feasible,
    fragmentation,
    make_policy,
)
from kai.scheduler.gpupolicy._capacity import CapacityCache, CapacityModel, instances, stranded, stranded_deltas
from kai.scheduler.gpupolicy._fgd import frag_deltas
from kai.scheduler.gpupolicy._frag import FragCache, FragModel

RNG = np.random.default_rng(0)


def cluster(*nodes: tuple[int, list[int], int], memory: int = 10**6) -> FreeState:
    """Nodes as (free cores, free milli-GPU per device, model id)."""
    width = max(len(g) for _, g, _ in nodes)
    gpu = np.full((len(nodes), width), -1, dtype=np.int64)
    for i, (_, g, _) in enumerate(nodes):
        gpu[i, : len(g)] = g
    n = len(nodes)
    return FreeState(
        cpu=np.array([c * 1000 for c, _, _ in nodes], dtype=np.int64),
        memory=np.full(n, memory, dtype=np.int64),
        gpu=gpu,
        model=np.array([m for _, _, m in nodes], dtype=np.int64),
        tags=np.zeros((n, 9), dtype=np.int64),
        rank=np.arange(n, dtype=np.int64),
    )


def whole(gpus: int = 1, cores: int = 4, models: tuple[int, ...] | None = None) -> PodRequest:
    return PodRequest(cores * 1000, 1, gpus, 1000, models)


def shared(milli: int, cores: int = 2) -> PodRequest:
    return PodRequest(cores * 1000, 1, 1, milli)


def cpu_only(cores: int) -> PodRequest:
    return PodRequest(cores * 1000, 1)


# --- requests and feasibility ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [(-1, 0, 0, 0), (1, 1, 1, 0), (1, 1, 0, 500), (1, 1, 2, 500), (1, 1, 1, 1001)],
    ids=["negative-cpu", "gpus-without-share", "share-without-gpus", "two-shared-gpus", "share-over-1000"],
)
def test_pod_request_rejects_impossible_requests(args: tuple[int, int, int, int]) -> None:
    with pytest.raises(ValueError):
        PodRequest(*args)


def test_feasible_checks_cpu_memory_model_and_devices_with_room() -> None:
    """Node 0: model B (the pod wants A). Node 1: 2 cores (pod needs 4). Node 2: only 1 device with
    >= 500 free (pod needs 2 whole GPUs... of 1000). Node 3: fits. Node 4: fits but memory 0."""
    state = cluster(
        (8, [1000, 1000], 1), (2, [1000, 1000], 0), (8, [1000, 500], 0), (8, [1000, 1000], 0), (8, [1000, 1000], 0)
    )
    state.memory[4] = 0
    assert feasible(state, whole(2, models=(0,))).tolist() == [False, False, False, True, False]
    # a CPU-only pod ignores models and GPUs
    assert feasible(state, cpu_only(4)).tolist() == [True, False, True, True, False]


def test_take_accounts_cpu_memory_devices_and_tags() -> None:
    state = cluster((8, [1000, 1000], 0))
    state.take(shared(300), Placement(0, (1,)))
    state.take(whole(1), Placement(0, (0,)))
    assert state.cpu.tolist() == [8000 - 2000 - 4000]
    assert state.gpu.tolist() == [[0, 700]]
    assert state.tags[0, 0] == 1 and state.tags[0, 1] == 1  # one shared pod, one 1-GPU pod


# --- kai's default: binpack + gpupack -------------------------------------------------------------


def test_binpack_takes_the_node_with_least_free_gpu_and_the_fullest_gpu() -> None:
    """Free GPU: node 0 2000, node 1 1300 (1000 + 300), node 2 200.
    A 1-GPU pod: node 2 has no whole GPU; of 0 and 1 the least free is node 1 (1300), its fully free
    device 0. A 250 shared pod: node 2's 200 is too small; node 1 again, on its fullest device with
    room: device 1 (300 free, vs 1000)."""
    state = cluster((32, [1000, 1000], 0), (32, [1000, 300], 0), (32, [200, 0], 0))
    pol = KaiBinpack()
    assert pol.choose(state, whole(1), RNG) == Placement(1, (0,))
    assert pol.choose(state, shared(250), RNG) == Placement(1, (1,))


def test_binpack_packs_cpu_pods_by_cpu_and_breaks_ties_by_rank() -> None:
    """CPU-only pod of 4 cores: free CPU 16, 6, 6 and 3 cores -> node 3 is too small; nodes 1 and 2
    tie at 6 cores; rank makes node 2 the first."""
    state = cluster((16, [1000], 0), (6, [1000], 0), (6, [1000], 0), (3, [1000], 0))
    state.rank[:] = [0, 2, 1, 3]
    assert KaiBinpack().choose(state, cpu_only(4), RNG) == Placement(2, ())


def test_no_policy_places_a_pod_that_fits_nowhere() -> None:
    state = cluster((2, [500], 0), (64, [300, 300], 0))
    target = TargetWorkload.from_pods([whole(1)])
    for name in ("binpack", "random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "fragmentation"):
        assert make_policy(name, n_models=2, target=target).choose(state, shared(600, cores=4), RNG) is None, name


# --- the FGD paper's baselines --------------------------------------------------------------------


def test_random_places_only_on_feasible_nodes_and_reaches_all_of_them() -> None:
    """Node 1 is model B; the pod wants A. 200 draws over nodes 0, 2, 3 leave none out; a shared pod
    takes a device with room (node 3's device 0 has 100 free: never)."""
    state = cluster((8, [1000], 0), (8, [1000], 1), (8, [1000], 0), (8, [100, 1000], 0))
    rng = np.random.default_rng(1)
    nodes = {RandomFit().choose(state, whole(1, models=(0,)), rng).node for _ in range(200)}  # type: ignore[union-attr]
    assert nodes == {0, 2, 3}
    devices = {RandomFit().choose(state, shared(500), rng).gpus for _ in range(200)}  # type: ignore[union-attr]
    assert (0,) in devices and (1,) in devices  # node 0/2 device 0, node 3 device 1
    placements = [RandomFit().choose(state, shared(500), rng) for _ in range(200)]
    assert all(p is not None and not (p.node == 3 and p.gpus == (0,)) for p in placements)


def test_dotprod_prefers_the_smallest_normalized_dot_product() -> None:
    """Pod: 8 cores, 1 GPU. Normalized by 128 cores and 8 GPUs:
    node 0 (64 cores, 2 GPUs free): 0.5*0.0625 + 0.25*0.125 = 0.0625 -> trunc(100*(1-0.0625/2)) = 96
    node 1 (16 cores, 6 GPUs free): 0.125*0.0625 + 0.75*0.125 = 0.1016 -> trunc(94.92) = 94
    so node 0, although node 1 has more GPUs."""
    state = cluster((64, [1000] * 2, 0), (16, [1000] * 6, 0))
    assert DotProduct().choose(state, whole(1, cores=8), RNG) == Placement(0, (0,))


def test_gpuclustering_keeps_pods_of_one_kind_together() -> None:
    """1-GPU pod (tag 1); 8-GPU nodes; fill = 25 * used milli-GPU // 8000:
    node 0: only 1-GPU pods, 4 GPUs used -> 12 + 75 = 87
    node 1: idle -> 0 + 25 = 25
    node 2: only shared pods, 0.5 GPU used -> 1 + 0 = 1
    node 3: 1-GPU and shared pods, 6 GPUs used -> 18 + 50 = 68"""
    state = cluster(
        (64, [0, 0, 0, 0, 1000, 1000, 1000, 1000], 0),
        (64, [1000] * 8, 0),
        (64, [500] + [1000] * 7, 0),
        (64, [0, 0, 0, 0, 0, 0, 1000, 1000], 0),
    )
    state.tags[0, 1] = 4
    state.tags[2, 0] = 1
    state.tags[3, 1], state.tags[3, 0] = 5, 2
    assert GpuClustering().choose(state, whole(1), RNG) == Placement(0, (4,))
    state.tags[0, 1] = 0
    state.tags[0, 2] = 2  # node 0 now runs only 2-GPU pods: 12 + 0; node 3 wins with 68
    assert GpuClustering().choose(state, whole(1), RNG).node == 3  # type: ignore[union-attr]


def test_gpupacking_prefers_shared_gpus_then_used_nodes_then_idle_ones() -> None:
    """Shared 300 pod: node 0 idle (2 GPUs): max(33-2, 2) = 31; node 1 [1000, 500]: fits on the used
    GPU with 50% free: 100 - 50 // 10 = 95; node 2 [1000, 200]: only a fully free GPU fits (case 2):
    max(50-1, 33) = 49 -> node 1, device 1.
    1-GPU pod: node 0 31, nodes 1 and 2 both 49 -> the lower rank, node 1, first free device 0."""
    state = cluster((32, [1000, 1000], 0), (32, [1000, 500], 0), (32, [1000, 200], 0))
    assert GpuPacking().choose(state, shared(300), RNG) == Placement(1, (1,))
    assert GpuPacking().choose(state, whole(1), RNG) == Placement(1, (0,))
    state.rank[:] = [0, 2, 1]
    assert GpuPacking().choose(state, whole(1), RNG) == Placement(2, (0,))


def test_bestfit_leaves_the_least_free_resources() -> None:
    """Pod: 8 cores, 1 GPU. Left after it, normalized and weighted 0.5 each:
    node 0 (64 cores, 2 GPUs): 0.5*56/128 + 0.5*1/8 = 0.28125 -> trunc(71.875) = 71
    node 1 (16 cores, 6 GPUs): 0.5*8/128 + 0.5*5/8 = 0.34375 -> 65
    so node 0, although node 1 has less CPU."""
    state = cluster((64, [1000] * 2, 0), (16, [1000] * 6, 0))
    assert BestFit().choose(state, whole(1, cores=8), RNG) == Placement(0, (0,))


# --- fragmentation and FGD ------------------------------------------------------------------------

# Target: half 1-GPU pods (4 cores), half shared 600 pods (2 cores).
TARGET = TargetWorkload.from_pods([whole(1)] * 5 + [shared(600)] * 5)


def test_fragmentation_counts_the_free_share_each_shape_cannot_use() -> None:
    """[1000, 1000]: both shapes fit and use everything: F = 0.
    [1000, 400]: the 1-GPU shape cannot use the 400, the 600 shape neither: F = .5*400 + .5*400 = 400.
    [600, 400]: no whole GPU: all 1000 is fragment for the 1-GPU shape; 400 for the 600 shape: 700.
    [1000, 1000] with 1 core: neither shape fits (4 and 2 cores): F = 2000."""
    fm = FragModel.build(TARGET, n_models=2)
    gpu = np.array([[1000, 1000], [1000, 400], [600, 400], [1000, 1000]])
    cpu = np.array([32000, 32000, 32000, 1000])
    assert fragmentation(fm, gpu, cpu, np.zeros(4, dtype=np.int64)).tolist() == [0, 400, 700, 2000]


def test_fgd_fills_the_gpu_whose_remainder_no_shape_could_use() -> None:
    """Shared 400 pod. Node 0 [1000, 1000] (F 0): on a device -> [600, 1000], F = .5*600 = 300,
    Δ = -300, score trunc(100 sigmoid(-0.3)) = 42. Node 1 [1000, 400] (F 400): on device 1 ->
    [1000, 0], F = 0, Δ = +400, score 59; on device 0 -> [600, 400], F 700, Δ -300, 42.
    So node 1, device 1."""
    state = cluster((32, [1000, 1000], 0), (32, [1000, 400], 0))
    assert Fgd(TARGET, n_models=2).choose(state, shared(400), RNG) == Placement(1, (1,))


def test_fgd_scores_are_quantized_and_ties_go_by_rank() -> None:
    """A 1-GPU pod on two identical idle nodes: same Δ, same score: the lower rank wins."""
    state = cluster((32, [1000, 1000], 0), (32, [1000, 1000], 0))
    state.rank[:] = [1, 0]
    assert Fgd(TARGET, n_models=2).choose(state, whole(1), RNG) == Placement(1, (0,))


@pytest.mark.parametrize("seed", range(5))
def test_frag_deltas_match_brute_force(seed: int) -> None:
    """The cached, incremental Δ equals F(before) - F(after) computed from scratch, for random states
    and pods (whole, shared on each device, CPU-only), also after the state changed in between."""
    rng = np.random.default_rng(seed)
    n, g = 12, 4
    pods = [whole(int(rng.integers(1, 3))), shared(int(rng.integers(1, 10)) * 100), cpu_only(3)]
    target = TargetWorkload.from_pods(pods * 3 + [shared(250), whole(1, models=(1,))])
    fm = FragModel.build(target, n_models=2)
    cache = FragCache()
    for _ in range(3):
        state = cluster(
            *[
                (
                    int(rng.integers(0, 16)),
                    [int(v) for v in rng.choice([0, 150, 400, 1000], g)],
                    int(rng.integers(0, 2)),
                )
                for _ in range(n)
            ]
        )
        for pod in (whole(1), whole(2), shared(300), shared(700), cpu_only(4)):
            rows = np.flatnonzero(feasible(state, pod))
            if len(rows) == 0:
                continue
            grid, shares = frag_deltas(fm, cache, state, pod, rows)
            before = fragmentation(fm, state.gpu[rows], state.cpu[rows], state.model[rows])
            for k, row in enumerate(rows):
                free = state.gpu[row]
                if shares is None:
                    options = [(grid[k, 0], tuple(np.flatnonzero(free == 1000)[: pod.num_gpu]) if pod.gpu_task else ())]
                else:  # one finite column per distinct free share with room
                    options = []
                    for v in np.unique(free[free >= pod.gpu_milli]):
                        cols = np.flatnonzero((shares[k] == v) & np.isfinite(grid[k]))
                        assert len(cols) == 1
                        options.append((grid[k, cols[0]], (int(np.flatnonzero(free == v)[0]),)))
                    assert np.isfinite(grid[k]).sum() == len(options)
                for delta, gpus in options:
                    after = state.copy()
                    after.take(pod, Placement(int(row), gpus))
                    f_after = fragmentation(fm, after.gpu[[row]], after.cpu[[row]], after.model[[row]])[0]
                    assert delta == pytest.approx(before[k] - f_after)


def test_target_workload_keeps_the_most_frequent_shapes_up_to_coverage() -> None:
    """Counts 50, 30, 15, 5 (of 100): cumulative 50, 80, 95 -> three shapes cover 95%, renormalized
    to 50/95, 30/95, 15/95."""
    pods = [whole(1)] * 50 + [shared(500)] * 30 + [cpu_only(8)] * 15 + [whole(2)] * 5
    t = TargetWorkload.from_pods(pods)
    assert len(t) == 3
    assert t.weight.tolist() == pytest.approx([50 / 95, 30 / 95, 15 / 95])
    assert t.gpu_milli.tolist() == [1000, 500, 0]


def test_shape_counter_learns_the_workload_it_sees() -> None:
    counter = ShapeCounter()
    for _ in range(30):
        counter.observe(shared(500))
    for _ in range(10):
        counter.observe(whole(1))
    t = counter.target()
    assert dict(zip(t.gpu_milli.tolist(), t.weight.tolist(), strict=True)) == pytest.approx({500: 0.75, 1000: 0.25})


def test_policy_names() -> None:
    assert canonical_name("GpuPacking") == "gpupacking"
    assert canonical_name("default") == "binpack"
    assert canonical_name("best") == "fragmentation"
    with pytest.raises(ValueError, match="unknown GPU placement policy 'tetris'"):
        canonical_name("tetris")
    with pytest.raises(ValueError, match="target workload"):
        make_policy("fgd", n_models=1)


# --- kai's fragmentation policy: stranded share and the combined score ------------------------------


def test_stranded_share_counts_cpu_as_well_as_gpu_room() -> None:
    """Target: half 1-GPU pods (4 cores), half shared 600 pods (2 cores); memory 1 each.
    [1000, 1000] with 32 cores: 1-GPU pods: min(2 devices, 8 by CPU) = 2 -> 2000; 600 pods:
    min(2 by room, 16 by CPU) = 2 -> 1200; stranded = 2000 - (.5*2000 + .5*1200) = 400.
    The same with 4 cores: 1-GPU pods min(2, 1) = 1 -> 1000; 600 pods min(2, 2) -> 1200;
    stranded = 2000 - (500 + 600) = 900: the CPU-poor node strands more."""
    cm = CapacityModel.build(TARGET, n_models=2)
    gpu = np.array([[1000, 1000], [1000, 1000]])
    inst = instances(gpu, cm.thresholds)
    got = stranded(cm, inst, gpu.sum(axis=1), np.array([32000, 4000]), np.array([10, 10]), np.zeros(2, dtype=np.int64))
    assert got.tolist() == [400, 900]


@pytest.mark.parametrize("seed", range(3))
def test_stranded_deltas_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    target = TargetWorkload.from_pods(
        [whole(1), whole(2, cores=12), shared(300), shared(650, cores=6), cpu_only(8)] * 2
    )
    cm = CapacityModel.build(target, n_models=2)
    cache = CapacityCache()
    for _ in range(3):
        state = cluster(
            *[
                (
                    int(rng.integers(0, 24)),
                    [int(v) for v in rng.choice([0, 200, 350, 1000], 4)],
                    int(rng.integers(0, 2)),
                )
                for _ in range(10)
            ]
        )
        state.memory[:] = rng.integers(0, 4, 10)
        for pod in (whole(1), whole(2), shared(300), cpu_only(4)):
            rows = np.flatnonzero(feasible(state, pod))
            if len(rows) == 0:
                continue
            grid, shares = stranded_deltas(cm, cache, state, pod, rows)

            def value(s: FreeState, r: np.ndarray) -> np.ndarray:
                return stranded(
                    cm,
                    instances(s.gpu[r], cm.thresholds),
                    np.maximum(s.gpu[r], 0).sum(axis=1),
                    s.cpu[r],
                    s.memory[r],
                    s.model[r],
                )

            before = value(state, rows)
            for k, row in enumerate(rows):
                free = state.gpu[row]
                if shares is None:
                    options = [(grid[k, 0], tuple(np.flatnonzero(free == 1000)[: pod.num_gpu]) if pod.gpu_task else ())]
                else:
                    options = [
                        (
                            grid[k, np.flatnonzero((shares[k] == v) & np.isfinite(grid[k]))[0]],
                            (int(np.flatnonzero(free == v)[0]),),
                        )
                        for v in np.unique(free[free >= pod.gpu_milli])
                    ]
                for delta, gpus in options:
                    after = state.copy()
                    after.take(pod, Placement(int(row), gpus))
                    assert delta == pytest.approx(before[k] - value(after, np.array([row]))[0])


def test_fragmentation_keeps_cpu_next_to_free_gpus() -> None:
    """The pods seen so far are 1-GPU pods of 8 cores. An 8-core CPU-only pod arrives; node 0 (20
    cores, 2 free GPUs, the lower rank) and node 1 (64 cores, 2 free GPUs). FGD's measure does not
    change on either node (one 8-core pod still fits after), so FGD takes node 0 by rank; on node 0
    it would leave 12 cores, room for one 8-core GPU pod, stranding a GPU: kai's measure sees a
    stranded 1000 (Δ = 0.75 * 0 + 0.25 * (0 - 1000) = -250) and takes node 1 (Δ 0)."""
    state = cluster((20, [1000, 1000], 0), (64, [1000, 1000], 0))
    seen = [whole(1, cores=8)] * 10
    fgd = Fgd(TargetWorkload.from_pods(seen), n_models=2)
    assert fgd.choose(state, cpu_only(8), RNG) == Placement(0, ())
    kai = make_policy("best", n_models=2)
    for pod in seen:
        kai.observe(pod)
    assert kai.choose(state, cpu_only(8), RNG) == Placement(1, ())


def test_fragmentation_learns_its_target_from_what_it_observes() -> None:
    """It has seen only 1-GPU pods (4 cores). A shared 400 pod: on node 0 [1000, 1000] it breaks a
    whole GPU: FGD's measure 0 -> 600 and stranded 0 -> 600 (one 1-GPU pod fits instead of two),
    Δ = -600. On node 1 [1000, 400], device 1: the 400 hole no 1-GPU pod could use is filled:
    both measures 400 -> 0, Δ = +400; device 0 would leave [600, 400]: Δ = 400 - 1000 = -600.
    So node 1, device 1."""
    state = cluster((32, [1000, 1000], 0), (32, [1000, 400], 0))
    kai = make_policy("fragmentation", n_models=2)
    for _ in range(5):
        kai.observe(whole(1))
    assert kai.choose(state, shared(400), RNG) == Placement(1, (1,))
    assert kai.target().gpu_milli.tolist() == [1000]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "name", ["binpack", "random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "best"]
)
def test_every_policy_keeps_to_the_callers_allowed_nodes(name: str) -> None:
    """The engine passes its other predicates (selectors, taints) as a mask: node 1 is the best
    choice for every policy here (the only one with a used GPU / most fitting), yet masked out."""
    state = cluster((32, [1000, 1000], 0), (32, [1000, 500], 0), (32, [1000, 1000], 0))
    pol = make_policy(name, n_models=2, target=TARGET)
    pol.observe(shared(500))
    allowed = np.array([True, False, True])
    for _ in range(20):
        placement = pol.choose(state, shared(500), np.random.default_rng(3), allowed)
        assert placement is not None and placement.node != 1
    assert pol.choose(state, shared(500), RNG, np.zeros(3, dtype=bool)) is None
