"""Scenario tests: each folder under tests/scenarios/<action>/<name>/ holds ``cluster.yaml`` (manifests exactly
as ``kai sim`` reads them) and ``expect.yaml`` (what must hold after the run). The test runs the real ``kai sim``.

expect.yaml keys (all optional but ``pods``):
  description: what the scenario shows and where it comes from
  args: extra ``kai sim`` arguments, e.g. ["--actions", "allocate", "--cycles", "2"]
  pods: {<name> or <namespace/name> or <glob>: <Status> | {status:, node:, podGroup:, queue:}}
        a glob (``raycluster-sample-head-*``) must match at least one pod, and every match must agree
  pod_count: <n>                                # pods in the output (controllers create them)
  podGroups: {<name>: {reason: <reason>, message_contains: [<text>, ...], minMember:, queue:,
              priorityClassName:, schedulable: true} | "schedulable"}
  queues: {<name>: {fairShare|allocated|requested: {gpu|cpu|memory: <number>}}}
  same_node: [[<pod>, <pod>, ...], ...]        # pods that must share one node
  different_nodes: [[<pod>, <pod>, ...], ...]  # pods that must be on pairwise different nodes (all placed)
  same_gpu: [[<pod>, <pod>, ...], ...]         # shared-GPU pods that must sit on one GPU group of one node
  different_gpu: [[<pod>, <pod>, ...], ...]    # shared-GPU pods that must not share any GPU
  pods.<name>.gpuGroups: <n>                    # how many GPU groups the pod holds (0 for a whole-GPU pod)
  events_contain: [<text>, ...]                 # each must appear in some event message
  claims: {<namespace/name>: {phase:, volume:, node:}}   # PersistentVolumeClaims after the run (node: where
                                                # the bound volume is pinned by kubernetes.io/hostname)
  resourceClaims: {<namespace/name>: {allocated:, node:, devices: [<pool/device>, ...], reservedFor: [<pod>, ...]}}
                                                # DRA ResourceClaims after the run
  at_cycle: {<n>: {pods: {...as above...}, evicted: [<pod or glob>, ...], waiting: [<podGroup>, ...]}}
        with ``--at N:FILE`` in args (FILE relative to the scenario's folder): what held after cycle n;
        ``evicted`` lists exactly the pods evicted in that cycle, ``waiting`` exactly the waiting PodGroups
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_sim

ROOT = Path(__file__).parent / "scenarios"
CASES = sorted(p.parent for p in ROOT.glob("*/*/expect.yaml"))


def _pod_key(p: dict[str, Any]) -> str:
    return f"{p['namespace']}/{p['name']}"


def _args(case: Path, args: list[str]) -> list[str]:
    """The scenario's kai sim arguments, with the files of ``--at N:FILE[,FILE...]`` found in its folder."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg == "--at":
            cycle, _, files = out[i + 1].partition(":")
            out[i + 1] = f"{cycle}:" + ",".join(str(case / f) for f in files.split(","))
    return out


def _match(pods: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The pods a name, namespace/name or glob names."""
    if any(c in name for c in "*?["):
        return [p for p in pods if fnmatchcase(_pod_key(p), name) or fnmatchcase(p["name"], name)]
    return [p for p in pods if name in (_pod_key(p), p["name"])][:1]


def _check_pods(pods: list[dict[str, Any]], expected: dict[str, Any], where: str = "") -> list[str]:
    problems = []
    for name, want in (expected or {}).items():
        matches = _match(pods, name)
        if not matches:
            problems.append(f"{where}pod {name}: not in the output")
            continue
        want = want if isinstance(want, dict) else {"status": want}
        for got in matches:
            for field in ("status", "node", "podGroup", "queue"):
                if field in want and (value := got.get(field)) != want[field]:
                    problems.append(f"{where}pod {got['name']}: {field} is {value!r}, expected {want[field]!r}")
            groups = got.get("gpuGroups") or []
            if "gpuGroups" in want and len(groups) != want["gpuGroups"]:
                problems.append(f"{where}pod {got['name']}: gpuGroups {groups}, expected {want['gpuGroups']} of them")
    return problems


def _check_cycles(doc: dict[str, Any], expected: dict[int, Any]) -> list[str]:
    records = {r["cycle"]: r for r in doc.get("timeline", [])}
    problems = []
    for cycle, want in (expected or {}).items():
        record = records.get(int(cycle))
        if record is None:
            problems.append(f"cycle {cycle}: no record (use --at in args)")
            continue
        where = f"cycle {cycle}: "
        problems += _check_pods(record["pods"], want.get("pods"), where)
        if "evicted" in want:
            evicted = {d["pod"] for d in record["decisions"] if d["type"] == "evict"}
            named = {_pod_key(p) for name in want["evicted"] for p in _match(record["pods"], name)}
            if evicted != named:
                problems.append(f"{where}evicted {sorted(evicted)}, expected {sorted(named)}")
        if "waiting" in want:
            waiting = sorted(w["podGroup"].split("/", 1)[1] for w in record["waiting"])
            if waiting != sorted(want["waiting"]):
                problems.append(f"{where}waiting {waiting}, expected {sorted(want['waiting'])}")
    return problems


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_scenario(case: Path) -> None:
    expect = yaml.safe_load((case / "expect.yaml").read_text())
    code, doc, err = run_sim([str(case / "cluster.yaml"), *_args(case, expect.get("args", []))])
    assert code == 0, err
    assert doc is not None
    pods = {_pod_key(p): p for p in doc["pods"]}
    by_name = {p["name"]: p for p in doc["pods"]}
    problems = _check_pods(doc["pods"], expect.get("pods"))
    problems += _check_cycles(doc, expect.get("at_cycle"))
    if "pod_count" in expect and len(doc["pods"]) != expect["pod_count"]:
        problems.append(f"{len(doc['pods'])} pods, expected {expect['pod_count']}: {sorted(pods)}")
    pgs = {pg["name"]: pg for pg in doc["podGroups"]}
    for name, want in (expect.get("podGroups") or {}).items():
        pg = pgs.get(name)
        if pg is None:
            problems.append(f"podGroup {name}: not in the output")
            continue
        if want == "schedulable":
            want = {"schedulable": True}
        for field in ("minMember", "queue", "priorityClassName"):
            if field in want and pg.get(field) != want[field]:
                problems.append(f"podGroup {name}: {field} is {pg.get(field)!r}, expected {want[field]!r}")
        if want.get("schedulable") and pg["conditions"]:
            problems.append(f"podGroup {name}: expected no conditions, got {pg['conditions']}")
        conds = pg["conditions"]
        if "reason" in want and not any(c["reason"] == want["reason"] for c in conds):
            problems.append(f"podGroup {name}: no condition with reason {want['reason']!r} in {conds}")
        for text in want.get("message_contains", []):
            if not any(text in c["message"] for c in conds):
                problems.append(f"podGroup {name}: no condition message contains {text!r}: {conds}")
    queues = {q["name"]: q for q in doc["queues"]}
    for name, want in (expect.get("queues") or {}).items():
        for field, values in want.items():
            for res, value in values.items():
                got = queues[name][field][res]
                if abs(got - value) > 1e-6 * max(1.0, abs(value)):
                    problems.append(f"queue {name}: {field}.{res} is {got}, expected {value}")
    for group in expect.get("same_node", []):
        nodes = {(pods.get(p) or by_name[p])["node"] for p in group}
        if len(nodes) != 1 or None in nodes:
            problems.append(f"pods {group} should share one node, got {nodes}")
    for group in expect.get("different_nodes", []):
        nodes = [(pods.get(p) or by_name[p])["node"] for p in group]
        if None in nodes or len(set(nodes)) != len(nodes):
            problems.append(f"pods {group} should be on different nodes, got {nodes}")
    for group in expect.get("same_gpu", []):
        found = [pods.get(p) or by_name[p] for p in group]
        common = set.intersection(*({(p["node"], g) for g in p["gpuGroups"]} for p in found))
        if not common:
            problems.append(f"pods {group} should share a GPU, got {[(p['node'], p['gpuGroups']) for p in found]}")
    for group in expect.get("different_gpu", []):
        found = [pods.get(p) or by_name[p] for p in group]
        held = [(p["node"], g) for p in found for g in p["gpuGroups"]]
        if len(held) != len(set(held)) or not held:
            problems.append(f"pods {group} should not share a GPU, got {[(p['node'], p['gpuGroups']) for p in found]}")
    messages = [e["message"] for e in doc["events"]]
    for text in expect.get("events_contain", []):
        if not any(text in m for m in messages):
            problems.append(f"no event message contains {text!r}")
    claims = {f"{c['namespace']}/{c['name']}": c for c in doc.get("persistentVolumeClaims", [])}
    for name, want in (expect.get("claims") or {}).items():
        got = claims.get(name)
        if got is None:
            problems.append(f"claim {name}: not in the output")
            continue
        for field, value in want.items():
            if got.get(field) != value:
                problems.append(f"claim {name}: {field} is {got.get(field)!r}, expected {value!r}")
    resource_claims = {f"{c['namespace']}/{c['name']}": c for c in doc.get("resourceClaims", [])}
    for name, want in (expect.get("resourceClaims") or {}).items():
        got = resource_claims.get(name)
        if got is None:
            problems.append(f"resourceClaim {name}: not in the output")
            continue
        view = {**got, "devices": sorted(f"{d['pool']}/{d['device']}" for d in got["devices"])}
        for field, value in want.items():
            value = sorted(value) if field == "devices" else value
            if view.get(field) != value:
                problems.append(f"resourceClaim {name}: {field} is {view.get(field)!r}, expected {value!r}")
    assert not problems, "\n".join(problems)
