"""Unit tests for kai.scheduler.fairshare: KAI's worked examples and one test per rule.

Numbers marked B.2.x come from kai-scenarios.md; the others mirror cases in KAI's
``resource_division_test.go`` or isolate one rule of the division.
"""

from __future__ import annotations

import numpy as np
import pytest

from kai.scheduler.fairshare import (
    RESOURCES,
    UNLIMITED,
    QueueShareInput,
    compute_fair_share,
    queue_allocatable_share,
)

GPU, CPU, MEM = (RESOURCES.index(r) for r in ("gpu", "cpu", "memory"))


def vec(gpu: float = 0.0, cpu: float = 0.0, memory: float = 0.0) -> np.ndarray:
    return np.array([gpu, cpu, memory], dtype=np.float64)


def q(
    name: str,
    *,
    parent: str | None = None,
    deserved: float | np.ndarray = 0.0,
    limit: float | np.ndarray = UNLIMITED,
    weight: float | np.ndarray = 1.0,
    request: float | np.ndarray = 0.0,
    priority: int = 100,
    age_rank: int = 0,
    usage: float | np.ndarray | None = None,
) -> QueueShareInput:
    """A queue; scalars fill the GPU column and leave cpu/memory at deserved 0, request 0."""

    def gpu_only(v: float | np.ndarray, rest: float) -> np.ndarray:
        return np.asarray(v, dtype=np.float64) if np.ndim(v) else vec(v, rest, rest)

    return QueueShareInput(
        name=name,
        parent=parent,
        priority=priority,
        age_rank=age_rank,
        deserved=gpu_only(deserved, 0.0),
        limit=gpu_only(limit, UNLIMITED),
        over_quota_weight=gpu_only(weight, 1.0),
        request=gpu_only(request, 0.0),
        usage=None if usage is None else gpu_only(usage, 0.0),
    )


def gpu_shares(queues: list[QueueShareInput], gpus: float, k_value: float = 1.0) -> dict[str, float]:
    result = compute_fair_share(queues, vec(gpus), k_value)
    return {name: float(share[GPU]) for name, share in result.items()}


# ---------------------------------------------------------------------------------------------
# Worked examples (kai-behaviour.md 4.4.2, kai-scenarios.md B.2.14)


@pytest.mark.parametrize(
    ("gpus", "requests", "expected"),
    [
        (10, (8, 6), (4, 6)),  # 2+2 and 2+4
        (10, (4, 7), (4, 6)),  # q0 satisfied in round 1; q1 floored at 6
        (12, (10, 7), (5, 7)),  # q1 satisfied in round 1 leaves 1 more for q0
    ],
)
def test_worked_examples_quota_2_2_weights_1_2(gpus, requests, expected):
    queues = [
        q("q0", deserved=2, weight=1, request=requests[0], age_rank=0),
        q("q1", deserved=2, weight=2, request=requests[1], age_rank=1),
    ]
    assert gpu_shares(queues, gpus) == {"q0": expected[0], "q1": expected[1]}


def test_leftover_unit_goes_to_older_queue():
    # f = 1.5 each; both floored to 1; the spare unit goes to the older queue.
    queues = [q("young", request=3, age_rank=1), q("old", request=3, age_rank=0)]
    assert gpu_shares(queues, 3) == {"old": 2, "young": 1}


def test_leftover_tie_on_age_goes_to_lower_name():
    queues = [q("b", request=3, age_rank=0), q("a", request=3, age_rank=0)]
    assert gpu_shares(queues, 3) == {"a": 2, "b": 1}


def test_leftover_goes_to_largest_fraction_first():
    # KAI "distributes remainder ... based on largest remaining": 7 over-quota GPUs at 1:4
    # give 1.4 and 5.6, floored to 1 and 5; the spare unit goes to the 0.6 fraction.
    queues = [
        q("q1", deserved=2, weight=1, request=10, age_rank=0),
        q("q2", deserved=2, weight=4, request=10, age_rank=1),
    ]
    assert gpu_shares(queues, 11) == {"q1": 3, "q2": 8}


def test_rounding_noise_does_not_decide_rounds_or_ties():
    # k = 0, weights 2:1:3 on 15 spare GPUs: exactly 5, 2.5 and 7.5.  Summed in some orders
    # the weights come to 0.9999999999999999, making "q0" look 5 < 5.000000000000001 (another
    # round) and the two 0.5 fractions unequal; exact arithmetic has one round and a tie
    # that the older queue, q1, wins.
    queues = [
        q("q0", deserved=2, weight=2, request=7, age_rank=0),
        q("q1", deserved=2, weight=1, request=7, age_rank=1),
        q("other", deserved=0, weight=3, request=8, age_rank=2),
    ]
    assert gpu_shares(queues, 19, k_value=0.0) == {"q0": 7, "q1": 5, "other": 7}


def test_department_children_share_department_fair_share():
    # B.2.1: d1 takes all 6 GPUs; inside it 1+1+2 deserved, the 2 spare GPUs split 1:1
    # between the weighted queues; the weight-0 reclaimer stays at its quota.
    queues = [
        q("d1", deserved=1, weight=1),
        q("q0", parent="d1", deserved=1, weight=1, request=3, age_rank=1),
        q("q1", parent="d1", deserved=1, weight=1, request=3, age_rank=2),
        q("reclaimer", parent="d1", deserved=2, weight=0, request=2, age_rank=3),
    ]
    assert gpu_shares(queues, 6) == {"d1": 6, "q0": 2, "q1": 2, "reclaimer": 2}


def test_departments_split_by_weight_and_quota_may_oversubscribe_parent():
    # B.2.18 (reclaimDepartments_test.go:507): 4 GPUs, departments quota 1 weight 1 -> 2 and 2.
    queues = [
        q("d0", deserved=1, weight=1, age_rank=0),
        q("d1", deserved=1, weight=1, age_rank=1),
        q("q0", parent="d0", deserved=3, weight=3, request=3, age_rank=2),
        q("q1", parent="d1", deserved=1, weight=1, request=2, age_rank=3),
    ]
    shares = gpu_shares(queues, 4)
    assert shares["d0"] == 2 and shares["d1"] == 2
    assert shares["q1"] == 2
    # KAI's deserved phase is not capped by the parent's share: q0's quota 3 stands even
    # though d0 only has 2 (the reclaim rules, not the division, keep d0 at 2).
    assert shares["q0"] == 3


def test_quotas_oversubscribing_the_cluster_keep_their_deserved():
    # B.2.10: 2 GPUs, two queues with quota 2 each -> both fair shares are 2.
    queues = [q("q0", deserved=2, weight=2, request=2), q("q1", deserved=2, weight=2, request=2, age_rank=1)]
    assert gpu_shares(queues, 2) == {"q0": 2, "q1": 2}


# ---------------------------------------------------------------------------------------------
# Single rules


def test_deserved_is_capped_by_request():
    assert gpu_shares([q("q", deserved=3, weight=0, request=2)], 3) == {"q": 2}


def test_limit_caps_the_share():
    # resource_division_test.go "doesn't allocate more than allowed": limit 5 of 12.
    queues = [
        q("q1", deserved=2, weight=2, request=6, limit=5, age_rank=0),
        q("q2", deserved=2, weight=2, request=6, age_rank=1),
    ]
    assert gpu_shares(queues, 12) == {"q1": 5, "q2": 6}


def test_limit_below_deserved_caps_the_deserved_phase():
    assert gpu_shares([q("q", deserved=4, limit=3, request=10)], 10) == {"q": 3}


def test_limit_zero_gives_nothing():
    queues = [q("capped", deserved=2, limit=0, request=5), q("other", request=1, age_rank=1)]
    assert gpu_shares(queues, 10) == {"capped": 0, "other": 1}


def test_unlimited_deserved_takes_everything_it_requests():
    queues = [q("inference", deserved=UNLIMITED, weight=0, request=4), q("q1", deserved=2, request=2, age_rank=1)]
    # B.2.16: the unlimited queue takes all 4 GPUs in the deserved phase; q1's quota
    # still stands (oversubscription), so the reclaim rules decide.
    assert gpu_shares(queues, 4) == {"inference": 4, "q1": 2}


def test_unlimited_deserved_is_capped_by_request_and_amount():
    assert gpu_shares([q("a", deserved=UNLIMITED, weight=0, request=3)], 10) == {"a": 3}
    assert gpu_shares([q("b", deserved=UNLIMITED, weight=0, request=30)], 10) == {"b": 10}


def test_weight_zero_gets_no_over_quota():
    queues = [q("zero", deserved=1, weight=0, request=10), q("one", deserved=1, weight=1, request=3, age_rank=1)]
    # "one" takes what it asks for; the rest stays undivided rather than going to "zero".
    assert gpu_shares(queues, 10) == {"zero": 1, "one": 3}


def test_all_weights_zero_leaves_remainder_undivided():
    queues = [q("a", deserved=1, weight=0, request=10), q("b", deserved=1, weight=0, request=10, age_rank=1)]
    assert gpu_shares(queues, 10) == {"a": 1, "b": 1}


def test_higher_priority_bucket_gets_over_quota_first():
    # resource_division_test.go "priority does affect over-quota, even when
    # overQuotaWeight is set": weight 100 in the lower bucket does not help.
    queues = [
        q("low", deserved=2, weight=100, request=6, priority=1),
        q("high", deserved=2, weight=1, request=6, priority=2, age_rank=1),
    ]
    assert gpu_shares(queues, 6) == {"low": 2, "high": 4}


def test_priority_does_not_affect_deserved():
    queues = [
        q("low", deserved=2, request=6, priority=1),
        q("high", deserved=2, request=6, priority=2, age_rank=1),
    ]
    assert gpu_shares(queues, 4) == {"low": 2, "high": 2}


def test_lower_bucket_gets_what_higher_bucket_does_not_want():
    queues = [
        q("high", deserved=0, request=3, priority=200),
        q("low", deserved=0, request=10, priority=100, age_rank=1),
    ]
    assert gpu_shares(queues, 10) == {"high": 3, "low": 7}


def test_rounding_remainder_stays_in_the_higher_bucket():
    # resource_division_test.go: 3 GPUs over quota, two high-priority queues and one low;
    # the low queue keeps only its deserved share.
    queues = [
        q("high-1", deserved=1, weight=1, request=5, priority=2, age_rank=0),
        q("high-2", deserved=1, weight=1, request=5, priority=2, age_rank=1),
        q("low-1", deserved=1, weight=1, request=5, priority=1, age_rank=2),
    ]
    shares = gpu_shares(queues, 6, k_value=0.0)
    assert shares == {"high-1": 3, "high-2": 2, "low-1": 1}


def test_hierarchy_children_divide_parent_share():
    queues = [
        q("dept-a", deserved=4, weight=1, age_rank=0),
        q("dept-b", deserved=4, weight=1, age_rank=1),
        q("a1", parent="dept-a", deserved=1, weight=1, request=10, age_rank=2),
        q("a2", parent="dept-a", deserved=1, weight=3, request=10, age_rank=3),
        q("b1", parent="dept-b", deserved=0, weight=1, request=2, age_rank=4),
    ]
    shares = gpu_shares(queues, 16)
    # dept-b only asks for 2 (its children's request), so dept-a gets the other 14.
    assert shares["dept-b"] == 2 and shares["b1"] == 2
    assert shares["dept-a"] == 14
    # Inside dept-a: 1 + 1 deserved, 12 spare at 1:3 -> 3 and 9.
    assert shares["a1"] == 4 and shares["a2"] == 10
    assert shares["a1"] + shares["a2"] == shares["dept-a"]


def test_parent_request_is_sum_of_children_and_own_request_is_ignored():
    queues = [
        q("dept", deserved=0, request=100),  # a non-leaf's own request is ignored
        q("leaf-1", parent="dept", request=2, age_rank=1),
        q("leaf-2", parent="dept", request=1, age_rank=2),
        q("other", request=10, age_rank=3),
    ]
    shares = gpu_shares(queues, 10)
    assert shares["dept"] == 3
    assert shares["other"] == 7


def test_parent_limit_caps_the_whole_subtree():
    queues = [
        q("dept", limit=3),
        q("leaf-1", parent="dept", request=5, age_rank=1),
        q("leaf-2", parent="dept", request=5, age_rank=2),
    ]
    shares = gpu_shares(queues, 10)
    assert shares["dept"] == 3
    assert shares["leaf-1"] + shares["leaf-2"] == 3


def test_usage_shrinks_heavy_users_over_quota():
    def run(k_value: float, heavy_usage: float) -> dict[str, float]:
        queues = [
            q("heavy", deserved=0, weight=1, request=10, usage=heavy_usage, age_rank=0),
            q("light", deserved=0, weight=1, request=10, usage=0.0, age_rank=1),
        ]
        return gpu_shares(queues, 10, k_value=k_value)

    # k = 0 ignores usage: an even split.
    assert run(0.0, 0.4) == {"heavy": 5, "light": 5}
    # k = 1: nW = 0.5 each; heavy max(0, 0.5 + (0.5 - 0.4)) = 0.6, light 1.0 -> 3.75 and 6.25,
    # floored to 3 and 6; the spare unit goes to the larger fraction (0.75, heavy).
    assert run(1.0, 0.4) == {"heavy": 4, "light": 6}
    # k = 1, usage 0.8: heavy 0.2, light 1.0 -> 1.67 and 8.33 -> 1 + spare unit, and 8.
    assert run(1.0, 0.8) == {"heavy": 2, "light": 8}
    # k = 10, usage 0.8: heavy 0.5 + 10 * (0.5 - 0.8) < 0 -> share weight 0, nothing over quota.
    assert run(10.0, 0.8) == {"heavy": 0, "light": 10}


def test_usage_never_touches_deserved():
    queues = [
        q("heavy", deserved=3, weight=1, request=10, usage=1.0),
        q("light", deserved=3, weight=1, request=10, usage=0.0, age_rank=1),
    ]
    shares = gpu_shares(queues, 6, k_value=5.0)
    assert shares == {"heavy": 3, "light": 3}


def test_resources_are_divided_independently():
    queues = [
        QueueShareInput(
            name="a",
            parent=None,
            priority=100,
            age_rank=0,
            deserved=vec(2, 1000, 0),
            limit=vec(UNLIMITED, UNLIMITED, 8e9),
            over_quota_weight=vec(1, 0, 1),
            request=vec(8, 5000, 20e9),
        ),
        QueueShareInput(
            name="b",
            parent=None,
            priority=100,
            age_rank=1,
            deserved=vec(2, 1000, 0),
            limit=vec(UNLIMITED, UNLIMITED, UNLIMITED),
            over_quota_weight=vec(2, 1, 1),
            request=vec(6, 5000, 20e9),
        ),
    ]
    result = compute_fair_share(queues, vec(10, 8000, 30e9))
    # GPU: the first worked example.
    assert result["a"][GPU] == 4 and result["b"][GPU] == 6
    # CPU: a has weight 0 for cpu, so b takes all 6000 spare millicores up to its request.
    assert result["a"][CPU] == 1000 and result["b"][CPU] == 5000
    # Memory: a is limited to 8 GB; b gets the other 22 GB, floored in bytes, up to 20 GB.
    assert result["a"][MEM] == 8e9 and result["b"][MEM] == 20e9


def test_cpu_millicores_and_memory_bytes_floor_in_their_own_unit():
    queues = [
        QueueShareInput("a", None, 100, 0, vec(), vec(-1, -1, -1), vec(1, 1, 1), vec(0, 10_000, 10e9)),
        QueueShareInput("b", None, 100, 1, vec(), vec(-1, -1, -1), vec(1, 1, 1), vec(0, 10_000, 10e9)),
        QueueShareInput("c", None, 100, 2, vec(), vec(-1, -1, -1), vec(1, 1, 1), vec(0, 10_000, 10e9)),
    ]
    result = compute_fair_share(queues, vec(0, 1000, 1_000_000_001), k_value=0.0)
    # 1000 / 3 = 333.33 -> 333 each; the one spare millicore goes to the oldest queue.
    assert [result[n][CPU] for n in "abc"] == [334, 333, 333]
    # 1_000_000_001 / 3 = 333_333_333.67 -> floors plus two spare bytes to the two oldest.
    assert [result[n][MEM] for n in "abc"] == [333_333_334, 333_333_334, 333_333_333]


def test_fractional_requests():
    # resource_division_test.go "fractional fair share" (k = 0).
    queues = [
        q("1", deserved=12, weight=12, request=32.55),
        q("2", deserved=7, weight=7, request=9.5),
        q("3", deserved=2, weight=2, request=1.65, limit=2),
    ]
    shares = gpu_shares(queues, 45, k_value=0.0)
    assert shares == pytest.approx({"1": 32.55, "2": 9.5, "3": 1.65})


def test_fractional_remainder_is_handed_out():
    # resource_division_test.go "gives remainder fraction": 0.5 GPU spare goes to the queue.
    assert gpu_shares([q("q", deserved=3, request=5)], 3.5, k_value=0.0) == {"q": 3.5}


def test_leftover_unit_never_exceeds_request():
    # Deliberate difference from KAI: short by 0.5, the queue gets 0.5, not a whole GPU.
    queues = [q("a", request=1.5, age_rank=0), q("b", request=1.5, age_rank=1)]
    shares = gpu_shares(queues, 2.4, k_value=0.0)
    assert shares["a"] <= 1.5 and shares["b"] <= 1.5
    assert shares["a"] + shares["b"] == pytest.approx(2.4)


def test_three_equal_queues_divide_evenly():
    # resource_division_test.go "divide resource evenly queues".
    queues = [q(str(i), deserved=1000, weight=1, request=10_000, age_rank=i) for i in range(3)]
    assert gpu_shares(queues, 9999, k_value=0.0) == {"0": 3333, "1": 3333, "2": 3333}


def test_empty_tree_and_zero_total():
    assert compute_fair_share([], vec(10)) == {}
    assert gpu_shares([q("a", deserved=2, request=5)], 0) == {"a": 2}


def test_result_arrays_are_fresh_float64_and_inputs_untouched():
    queues = [q("a", request=1), q("b", request=1, age_rank=1)]
    total = vec(2)
    result = compute_fair_share(queues, total)
    assert result["a"].dtype == np.float64 and result["a"].shape == (3,)
    result["a"][GPU] = 99
    assert result["b"][GPU] == 1
    np.testing.assert_array_equal(total, vec(2))
    np.testing.assert_array_equal(queues[0].request, vec(1))


def test_input_order_does_not_matter():
    queues = [
        q("d", deserved=1),
        q("x", parent="d", request=3, age_rank=2),
        q("y", parent="d", request=3, age_rank=1),
        q("z", request=4, weight=2, age_rank=3),
    ]
    forward = compute_fair_share(queues, vec(7))
    backward = compute_fair_share(list(reversed(queues)), vec(7))
    assert forward.keys() == backward.keys()
    for name in forward:
        np.testing.assert_array_equal(forward[name], backward[name])


# ---------------------------------------------------------------------------------------------
# Validation


def test_missing_parent_is_rejected_naming_the_queue():
    with pytest.raises(ValueError, match=r"'orphan'.*'ghost'"):
        compute_fair_share([q("orphan", parent="ghost")], vec(1))


def test_parent_cycle_is_rejected_naming_a_queue():
    queues = [q("root"), q("a", parent="b"), q("b", parent="a")]
    with pytest.raises(ValueError, match="'a' is on a parent cycle"):
        compute_fair_share(queues, vec(1))


def test_self_parent_is_a_cycle():
    with pytest.raises(ValueError, match="'self' is on a parent cycle"):
        compute_fair_share([q("self", parent="self")], vec(1))


def test_cycle_below_which_queues_hang_is_named_by_a_member():
    queues = [q("a-child", parent="b"), q("b", parent="c"), q("c", parent="b")]
    with pytest.raises(ValueError, match="'b' is on a parent cycle: b -> c -> b"):
        compute_fair_share(queues, vec(1))


def test_duplicate_name_is_rejected():
    with pytest.raises(ValueError, match="'dup'"):
        compute_fair_share([q("dup"), q("dup")], vec(1))


def test_wrong_shape_is_rejected_naming_queue_and_field():
    bad = QueueShareInput("bad", None, 100, 0, vec(), vec(), vec(), np.zeros(2))
    with pytest.raises(ValueError, match="'bad': request"):
        compute_fair_share([bad], vec(1))
    with pytest.raises(ValueError, match="total"):
        compute_fair_share([], np.zeros(4))


# ---------------------------------------------------------------------------------------------
# queue_allocatable_share


def test_allocatable_share_is_max_of_deserved_and_fair_share_capped_by_limit():
    got = queue_allocatable_share(vec(2, 1000, 5), vec(4, 500, 5), vec(3, UNLIMITED, UNLIMITED))
    np.testing.assert_array_equal(got, vec(3, 1000, 5))


def test_allocatable_share_with_unlimited_deserved_is_the_limit():
    got = queue_allocatable_share(vec(UNLIMITED, UNLIMITED, 1), vec(4, 4, 4), vec(6, UNLIMITED, UNLIMITED))
    np.testing.assert_array_equal(got, vec(6, np.inf, 4))


def test_allocatable_share_broadcasts_over_rows():
    deserved = np.array([[1.0, 0, 0], [UNLIMITED, 0, 0]])
    fair = np.array([[2.0, 0, 0], [1.0, 0, 0]])
    limit = np.full((2, 3), UNLIMITED)
    got = queue_allocatable_share(deserved, fair, limit)
    assert got.shape == (2, 3)
    assert got[0, GPU] == 2 and got[1, GPU] == np.inf
