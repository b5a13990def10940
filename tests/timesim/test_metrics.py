"""The recorder's arithmetic: fragmentation over nodes, step-function buckets, percentiles."""

from __future__ import annotations

import numpy as np
import pytest

from kai.sim.timesim._metrics import bucket_means, fragmentation, percentiles

GIB = 1024**3


def test_fragmentation_counts_free_gpus_a_shape_cannot_use() -> None:
    # free GPUs 3, 1, 4 (8 in all); a 2-GPU pod fits once, zero times, twice: 6 usable, 2 stranded
    free = np.array([[3, 64000, 512 * GIB], [1, 64000, 512 * GIB], [4, 64000, 512 * GIB]], dtype=float)
    assert fragmentation(free, [(2, 1000, GIB)], [1.0]) == pytest.approx(2 / 8)
    # a 1-GPU shape uses everything; weighted half and half with the 2-GPU shape
    assert fragmentation(free, [(1, 1000, GIB), (2, 1000, GIB)], [0.5, 0.5]) == pytest.approx(0.5 * 2 / 8)


def test_fragmentation_counts_gpus_stranded_by_cpu() -> None:
    free = np.array([[4, 1000, 512 * GIB], [4, 64000, 512 * GIB]], dtype=float)  # node 0 has 1 core left
    assert fragmentation(free, [(1, 2000, GIB)], [1.0]) == pytest.approx(4 / 8)


def test_fragmentation_is_zero_without_free_gpus_or_shapes() -> None:
    assert fragmentation(np.zeros((3, 3)), [(1, 0, 0)], [1.0]) == 0.0
    assert fragmentation(np.array([[2.0, 0, 0]]), [], []) == 0.0


def test_bucket_means_are_time_weighted() -> None:
    # 10 GPUs for [0, 30), 40 for [30, 100): two buckets of 50 s
    starts, means = bucket_means([0.0, 30.0], [10.0, 40.0], 100.0, 2)
    assert starts == [0.0, 50.0]
    assert means == pytest.approx([(10 * 30 + 40 * 20) / 50, 40.0])


def test_percentiles_of_nothing_are_none() -> None:
    assert percentiles([])["p50"] is None
    p = percentiles([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (p["count"], p["p50"], p["max"]) == (5, 3.0, 100.0)
