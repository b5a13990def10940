"""Fuzzing the edge: no input makes kai raise, hang, or stop a cycle (issue 14, item 1).

Inputs start from the scenario corpus (every ``tests/scenarios/*/*/cluster.yaml``: real clusters of nodes,
queues, PodGroups, pods, GPU sharing, topologies, PDBs) and Hypothesis mutates them: a few fields anywhere
in a few documents are replaced by hostile values (huge or negative numbers, NaN, infinity, wrong types,
deep or empty structures, odd strings). Each mutated cluster then goes down the three roads input takes:

* **kai sim** (files): ``load_manifests`` and the embedded cluster may refuse it, only with a ManifestError
  that names where; otherwise two full cycles run.
* **the Kubernetes backend** (objects off the API server): each document through the same parser the
  informers use (``KINDS[...].parse``), which may refuse it only with a ManifestError (the informer then
  keeps it out of the Store and reports it); the survivors go straight to ``build_snapshot`` and a cycle,
  with no sim checks in the way, as on a cluster.
* **the wire** (watch events): the JSON bytes through the informers' decoders, which may refuse them only
  with a msgspec error (the informer lists again, losing nothing).

In every case no other exception escapes, and a cycle leaves no job or action error behind (those are
caught bugs, ``Session.drop_job``: they must not exist). Hypothesis runs derandomized, so a failure is
reproducible and shrinks to a minimal input; each example has a deadline, so a hang is a failure.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kai.api import constants as C
from kai.api.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from kai.api.errors import ManifestError
from kai.api.manifests import load_manifests
from kai.api.objects import Namespace, Node, Pod, PodGroup, PriorityClass, Queue, Topology
from kai.api.pdb import PodDisruptionBudget
from kai.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from kai.k8s._decode import KINDS
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.dra import build_dra
from kai.scheduler.snapshot import build_snapshot
from kai.scheduler.storage import build_storage
from kai.sim.cluster import EmbeddedCluster, default_priority_classes
from kai.store import Store

ROOT = Path(__file__).parents[1] / "scenarios"
STORAGE_KINDS = (StorageClass, PersistentVolume, PersistentVolumeClaim, CSINode)
DRA_KINDS = (DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate)
CORPUS = [
    [d for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)] for p in sorted(ROOT.glob("*/*/cluster.yaml"))
]
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
ALL_ACTIONS = SchedulerConf(actions=("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"))
PARSERS = {spec.kind: spec for spec in KINDS}
FUZZ = settings(
    max_examples=150,
    derandomize=True,
    deadline=timedelta(seconds=20),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**16, 10**7]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "x", "-1", "0", "1e16", "1e400", "-1e400", "nan", "inf", "0.5", "1.5", "9Ei", "1e-99999"]),
    st.sampled_from(["1" * 80, "a" * 300, "2026-13-45T00:00:00Z", "-5s", "true", "In", "Gt", "kai-scheduler"]),
    st.text(max_size=12),
    st.just([]),
    st.just({}),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.recursive(st.just(1), lambda inner: st.lists(inner, max_size=2), max_leaves=40),
)


def _paths(node: Any, path: tuple = ()) -> list[tuple]:
    """Every place in a document a value can be put: each key and list item, containers included."""
    out = [path] if path else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*path, i))
    return out


def _set(doc: Any, path: tuple, value: Any) -> None:
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value


QUANTITIES = ["0", "1", "2", "8", "100m", "1500m", "1e3", "1Gi", "64Gi", "0.5", "1125899906842624", "3"]


def _plausible(old: Any, names: list[str]) -> st.SearchStrategy[Any]:
    """A value of the same type as *old* that a user might really write: edge cases that parse."""
    if isinstance(old, bool):
        return st.booleans()
    if isinstance(old, int):
        return st.one_of(st.integers(-2, 10), st.sampled_from([0, 1, 2**31 - 1, 2**50]))
    if isinstance(old, float):
        return st.floats(-1, 1e6, allow_nan=False)
    if isinstance(old, str):
        return st.one_of(st.sampled_from(QUANTITIES), st.sampled_from(names or ["x"]), st.just(""))
    return st.one_of(st.just({}), st.just([]))


def _delete(doc: Any, path: tuple) -> None:
    for p in path[:-1]:
        doc = doc[p]
    del doc[path[-1]]


@st.composite
def mutated_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A corpus cluster with 1-4 edits: a hostile value, a plausible one of the same type (an edge case that
    parses, or another object's name: references move), a field removed, or a document duplicated."""
    docs = copy.deepcopy(draw(st.sampled_from(CORPUS)))
    names = sorted({str(d.get("metadata", {}).get("name")) for d in docs if isinstance(d.get("metadata"), dict)})
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(docs) - 1))
        paths = _paths(docs[i])
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        old = docs[i]
        for p in path:
            old = old[p]
        op = draw(st.sampled_from(["hostile", "hostile", "plausible", "plausible", "plausible", "delete", "duplicate"]))
        if op == "hostile":
            _set(docs[i], path, draw(HOSTILE))
        elif op == "plausible":
            _set(docs[i], path, draw(_plausible(old, names)))
        elif op == "delete":
            _delete(docs[i], path)
        else:
            docs.append(copy.deepcopy(docs[i]))
    return docs


def _dump(docs: list[dict[str, Any]]) -> str:
    try:
        return yaml.safe_dump_all(docs)
    except (OverflowError, ValueError):  # a value YAML cannot write (never seen; keep the example meaningful)
        return yaml.safe_dump_all(json.loads(json.dumps(docs, default=str)))


def _clean(result: CycleResult) -> None:
    assert result.action_errors == [], result.action_errors
    assert result.job_errors == [], result.job_errors


@FUZZ
@given(mutated_clusters())
def test_kai_sim_refuses_or_schedules(docs: list[dict[str, Any]]) -> None:
    try:
        objects, _ = load_manifests([("fuzz.yaml", _dump(docs))])
        cluster = EmbeddedCluster(now=NOW, strict_input=True)
        cluster.apply(objects)
    except ManifestError as e:
        assert str(e).startswith("fuzz.yaml") or e.source == "", str(e)
        event("refused")
        return
    event("scheduled")
    for _ in range(2):
        _clean(cluster.run_cycle(ALL_ACTIONS))


def _api_objects(docs: list[dict[str, Any]]) -> list[Any]:
    """What the informers would put in the Store: each document the parser accepts (a ManifestError keeps it
    out, as ``Informer._put`` does), keyed as the Store keys it (a later version replaces an earlier one);
    kinds the scheduler does not watch are not listed."""
    store = Store()
    for doc in docs:
        spec = PARSERS.get(str(doc.get("kind"))) if isinstance(doc.get("kind"), str) else None
        if spec is None:
            continue
        try:
            store.put(spec.parse(copy.deepcopy(doc)))
        except ManifestError:
            event(f"{spec.kind} refused")
            continue
    return list(store)


@FUZZ
@given(mutated_clusters())
def test_the_backend_path_keeps_bad_objects_out_and_schedules_the_rest(docs: list[dict[str, Any]]) -> None:
    objects = _api_objects(docs)
    pods = [o for o in objects if isinstance(o, Pod)]
    for pod in pods:  # on a cluster, kai's pods say so; in the corpus, naming a PodGroup does
        if C.ANNOTATION_POD_GROUP_NAME in pod.meta.annotations:
            pod.scheduler_name = C.SCHEDULER_NAME
    snap = build_snapshot(
        nodes=[o for o in objects if isinstance(o, Node)],
        pods=pods,
        podgroups=[o for o in objects if isinstance(o, PodGroup)],
        queues=[o for o in objects if isinstance(o, Queue)],
        priority_classes=[*default_priority_classes(), *(o for o in objects if isinstance(o, PriorityClass))],
        now=NOW,
        pdbs=[o for o in objects if isinstance(o, PodDisruptionBudget)],
        topologies=[o for o in objects if isinstance(o, Topology)],
        namespaces=[o for o in objects if isinstance(o, Namespace)],
        storage=build_storage(*([o for o in objects if isinstance(o, cls)] for cls in STORAGE_KINDS)),
        dra=build_dra(*([o for o in objects if isinstance(o, cls)] for cls in DRA_KINDS)),
    )
    _clean(run_cycle(snap, ALL_ACTIONS))


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


@FUZZ
@given(mutated_clusters(), st.data())
def test_watch_events_decode_or_are_refused(docs: list[dict[str, Any]], data: st.DataObject) -> None:
    for doc in docs:
        spec = PARSERS.get(str(doc.get("kind"))) if isinstance(doc.get("kind"), str) else None
        if spec is None:
            continue
        raw = json.dumps(_json_safe(doc)).encode()
        if data.draw(st.booleans()):  # and sometimes bytes that are not the object at all
            cut = data.draw(st.integers(0, len(raw)))
            raw = raw[:cut] + data.draw(st.binary(max_size=8)) + raw[cut:]
        try:
            decoded = spec.codec.decode_item(raw)
        except msgspec.MsgspecError:
            continue
        try:
            spec.parse(decoded.doc)
        except ManifestError:
            continue


def test_the_corpus_is_the_scenarios() -> None:
    assert len(CORPUS) >= 250


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_every_watched_kind_is_fuzzed(kind: str) -> None:
    """Each kind the informers parse appears in the corpus, so the fuzzing reaches its parser."""
    assert any(d.get("kind") == kind for docs in CORPUS for d in docs)
