"""Topology domains from node labels, constraint resolution and the order of candidate domains."""

from __future__ import annotations

import numpy as np
import pytest

from kai.api.objects import TopologyConstraint, parse_topology
from kai.scheduler.model import GPU, MILLI
from kai.scheduler.topology import ROOT, TopologyError, TopologyIndex, build_tree, candidates, resolve

Z, B, R = "example.com/zone", "example.com/block", "example.com/rack"


def topo(name: str = "t", levels: tuple[tuple[str, str], ...] = ((Z, "zone"), (B, "block"), (R, "rack"))):
    return parse_topology(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": lb, **({"alias": a} if a else {})} for lb, a in levels]},
        }
    )


def labels(zone: str | None, block: str | None, rack: str | None) -> dict[str, str]:
    out = {}
    for key, value in ((Z, zone), (B, block), (R, rack)):
        if value is not None:
            out[key] = value
    return out


NODES = (
    labels("z1", "b1", "r1"),
    labels("z1", "b1", "r1"),
    labels("z1", "b2", "r1"),  # same rack name, another block: another domain
    labels("z2", "b1", "r1"),  # same block name, another zone
    labels("z1", "b1", None),  # no rack label: outside the topology
    {},
)


def test_domain_ids_follow_the_whole_label_path() -> None:
    tree = build_tree(topo(), NODES)
    assert tree.member.tolist() == [True, True, True, True, False, False]
    zone, block, rack = tree.domain
    assert zone.tolist()[:4] == [0, 0, 0, 1] and zone[4] == zone[5] == -1
    assert block[0] == block[1] != block[2] != block[3] and block[0] != block[3]
    assert rack[0] == rack[1] and len({rack[0], rack[2], rack[3]}) == 3
    assert rack[4] == rack[5] == -1
    assert set(tree.domain_names[2]) == {"z1/b1/r1", "z1/b2/r1", "z2/b1/r1"}
    assert tree.domain_name(2, int(rack[2])) == "z1/b2/r1"


def test_levels_by_label_or_alias() -> None:
    tree = build_tree(topo(), NODES)
    assert tree.level("rack") == tree.level(R) == 2
    assert tree.level("zone") == 0
    assert tree.level("spine") is None
    assert tree.level_name(1) == "block"
    tree2 = build_tree(topo(levels=((Z, ""), (R, ""))), NODES)
    assert tree2.level_name(1) == R


def test_no_nodes_no_domains() -> None:
    tree = build_tree(topo(), ())
    assert tree.domain.shape == (3, 0)
    assert tree.domain_names == ((), (), ())


def _index(*topologies) -> TopologyIndex:
    return TopologyIndex(tuple(topologies), NODES)


def test_resolve_levels_and_errors() -> None:
    idx = _index(topo("t"))
    con = resolve(TopologyConstraint("t", "zone", "rack"), idx, "podgroup ns/a")
    assert con is not None and (con.required, con.preferred) == (0, 2)
    assert con.levels() == [2, 1, 0]
    assert resolve(TopologyConstraint("t", "", "block"), idx, "x").levels() == [1, 0, ROOT]
    assert resolve(TopologyConstraint("t", "rack", ""), idx, "x").levels() == [2]
    assert resolve(TopologyConstraint("t", "", ""), idx, "x") is None  # a topology name alone asks for nothing
    assert resolve(None, idx, "x") is None
    with pytest.raises(TopologyError, match="Requested topology nope does not exist"):
        resolve(TopologyConstraint("nope", "rack", ""), idx, "podgroup ns/a")
    with pytest.raises(
        TopologyError,
        match="specified 'spine' as the required topology constraint level, but the "
        "topology tree 't' does not contain a level with this name",
    ):
        resolve(TopologyConstraint("t", "spine", ""), idx, "podgroup ns/a")
    with pytest.raises(TopologyError, match="names no topology"):
        resolve(TopologyConstraint("", "rack", ""), idx, "subgroup w of ns/a")
    with pytest.raises(TopologyError, match="above its required level"):
        resolve(TopologyConstraint("t", "rack", "zone"), idx, "podgroup ns/a")


def _free(gpus: list[int]) -> np.ndarray:
    free = np.zeros((len(gpus), 4), dtype=np.int64)
    free[:, GPU] = np.array(gpus) * MILLI
    return free


def _one_gpu() -> np.ndarray:
    req = np.zeros(4, dtype=np.int64)
    req[GPU] = MILLI
    return req


def test_candidates_filter_by_room_and_order_most_packed_first() -> None:
    # racks z1/b1/r1 (nodes 0, 1), z1/b2/r1 (node 2), z2/b1/r1 (node 3); node 4 and 5 outside the topology
    idx = _index(topo())
    con = resolve(TopologyConstraint("t", "zone", "rack"), idx, "x")
    free = _free([2, 2, 3, 8, 100, 100])
    one = _one_gpu()
    cands = candidates(con, np.ones(6, dtype=bool), free, one, one * 3, 3)
    tree = con.tree
    order = [(lvl, tree.domain_name(lvl, d)) for lvl, d in cands.items]
    # racks with room for 3: z1/b1/r1 (4 free: 3/4 packed) before z1/b2/r1 (3/3) ... most packed first
    assert order[:3] == [(2, "z1/b2/r1"), (2, "z1/b1/r1"), (2, "z2/b1/r1")]
    # then blocks, then zones: every one holds 3 pods
    assert [lvl for lvl, _ in order] == [2, 2, 2, 1, 1, 1, 0, 0]
    masks = [c.mask for c in cands]
    assert masks[0].tolist() == [False, False, True, False, False, False]
    assert not any(m[4] or m[5] for m in masks)  # nodes outside the topology are never candidates


def test_candidates_none_fit_explains_with_numbers() -> None:
    idx = _index(topo())
    con = resolve(TopologyConstraint("t", "rack", ""), idx, "x")
    one = _one_gpu()
    cands = candidates(con, np.ones(6, dtype=bool), _free([4, 4, 3, 2, 100, 100]), one, one * 16, 16)
    assert cands.items == []
    assert cands.failure(0, "") == (
        "no rack of topology t has 16 free GPUs; the best has 8 (z1/b1/r1, room for 8 of the 16 pods)"
    )


def test_room_counts_whole_pods_per_node() -> None:
    # two nodes with 3 free GPUs each hold two 2-GPU pods, not three, though 6 GPUs are free
    idx = _index(topo())
    con = resolve(TopologyConstraint("t", "block", ""), idx, "x")
    two = _one_gpu() * 2
    free = _free([3, 3, 0, 0, 0, 0])
    assert candidates(con, np.ones(6, dtype=bool), free, two, two * 3, 3).items == []
    assert len(candidates(con, np.ones(6, dtype=bool), free, two, two * 2, 2).items) == 1


def test_pinned_pods_restrict_the_required_domain() -> None:
    idx = _index(topo())
    con = resolve(TopologyConstraint("t", "zone", ""), idx, "x")
    one = _one_gpu()
    pinned = np.array([False, False, False, True, False, False])  # a pod runs in z2
    cands = candidates(con, np.ones(6, dtype=bool), _free([8, 8, 8, 1, 0, 0]), one, one, 1, pinned)
    assert [con.tree.domain_name(lvl, d) for lvl, d in cands.items] == ["z2"]


def test_preferred_level_bonus_is_kais_node_score() -> None:
    """KAI's calculateNodeScores: the preferred-level domains in the tree's packing order (z2, whose only node
    has nothing free, before z1; inside z1 b2 with 1 free before b1 with 4) score floor(10 (i + 1) / n) x 1e5,
    so the last of them, the emptiest block b1, gets the most (allocateTopology_test.go 'Hierarchical Preferred
    Topology - PodGroup prefers Spine, ...')."""
    idx = _index(topo())
    con = resolve(TopologyConstraint("t", "", "block"), idx, "x")
    one = _one_gpu()
    # no block holds 5 pods: z1 does (b1: nodes 0, 1 with 2 + 2 free; b2: node 2 with 1 free)
    cands = candidates(con, np.ones(6, dtype=bool), _free([2, 2, 1, 0, 0, 0]), one, one * 5, 5)
    first = next(iter(cands))
    assert (first.level, con.tree.domain_name(first.level, first.index)) == (0, "z1")
    assert first.bonus is not None
    assert first.bonus[0] == first.bonus[1] == 10 * 100_000  # b1, last of 3
    assert first.bonus[2] == 6 * 100_000  # b2, second: floor(10 * 2 / 3)
