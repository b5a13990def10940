"""Differential test against the real kube-scheduler: random small clusters, the same pending pod.

Each case is a seeded random cluster: a few nodes (hostname, zone, disk labels; sometimes a NoSchedule taint
or no zone label), pods already running on them (labels, required anti-affinity, host ports), and one pending
pod with a random mix of required and preferred inter-pod (anti-)affinity (with namespaces or a
namespaceSelector, matchLabelKeys), topology spread constraints (maxSkew, DoNotSchedule or ScheduleAnyway,
minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys), host ports, a nodeSelector and
tolerations (each field only on a release that knows it: the current release, 1.37, knows them all). The
case is played twice on one control plane, each time on fresh nodes and namespaces (the previous ones
deleted): once for the real kube-scheduler, once for ``kai scheduler`` (in process, as kai's ServiceAccount).
Then:

* when kube-scheduler binds the pod, kai binds it too, and the node kai chose breaks no rule by the
  independent checker (tests/podrules_reference.py); the checker must accept kube-scheduler's node as well,
  which keeps the checker honest;
* when kube-scheduler reports the pod unschedulable, kai does not bind it.

Node scores (which node among the valid ones) are each scheduler's own and are not compared. A failing case is
shrunk (running pods, nodes, then the pending pod's rules, one at a time, while the mismatch persists) and
reported as the smallest case found, seed and all.

The nodes have no kubelet: the test creates them Ready and nobody runs the pods (kube-scheduler and kai
only read them). ``KAI_DIFF_CASES`` sets the number of cases (default 200), ``KAI_DIFF_SEED`` the first seed,
``KAI_DIFF_BUDGET_S`` the time after which no new case starts (default 900 s; at least 100 cases must run).
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.core_v1 import Namespace, Node, Pod

from kai.api.objects import parse_pod
from kai.k8s.envtest import Binaries, ControlPlane, create_node
from tests.k8s.sched import InProcess, Queue, options, start_cluster, wait_for
from tests.podrules_reference import RNode, RPod, World, violations

CASES = int(os.environ.get("KAI_DIFF_CASES", "200"))
BUDGET_S = float(os.environ.get("KAI_DIFF_BUDGET_S", "900"))  # make test's bound: stop adding cases after it
MIN_CASES = min(CASES, 100)  # ... but a run that could not play this many in the budget fails
SEED = int(os.environ.get("KAI_DIFF_SEED", "1600"))
HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
APPS = ("a", "b", "c")
SHRINK_TRIALS = 40
SETTLE_S = 0.25


# --- cases --------------------------------------------------------------------------------------------


@dataclass
class Case:
    """A cluster in abstract form: node and namespace names are given per play."""

    seed: int
    nodes: list[dict[str, Any]]  # {labels, taint}
    running: list[dict[str, Any]]  # {node, ns, labels, anti: term | None, port: int | None}
    pending: dict[str, Any]  # {labels, affinity: {...}, spread: [...], port, node_selector, tolerate}
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)  # abstract ns -> labels

    def doc(self) -> str:
        return yaml.safe_dump(
            {"seed": self.seed, "nodes": self.nodes, "running": self.running, "pending": self.pending}, sort_keys=False
        )


# The release that made a field generally usable (on by default); the cases use a field only on releases that
# know it, so the test runs on whatever release the fixture gives (the current one has them all).
SINCE = {"namespaceSelector": (1, 22), "nodeInclusionPolicy": (1, 26), "minDomains": (1, 27),
         "spreadMatchLabelKeys": (1, 27), "affinityMatchLabelKeys": (1, 31)}  # fmt: skip
CURRENT = (99, 0)


def _term(rng: random.Random, version: tuple[int, int]) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
        "topologyKey": rng.choice([HOST, ZONE]),
    }
    r = rng.random()
    if r < 0.15 and version >= SINCE["namespaceSelector"]:
        term["namespaceSelector"] = {"matchLabels": {"env": "prod"}}
    elif r < 0.25 and version >= SINCE["namespaceSelector"]:
        term["namespaceSelector"] = {}
    elif r < 0.35:
        term["namespaces"] = ["ns2"]
    if rng.random() < 0.15 and version >= SINCE["affinityMatchLabelKeys"]:
        term["matchLabelKeys"] = ["rev"]
    return term


def make_case(seed: int, version: tuple[int, int] = CURRENT) -> Case:
    rng = random.Random(seed)
    nodes = []
    for _ in range(rng.randint(2, 5)):
        labels = {"disk": rng.choice(["ssd", "hdd"])}
        if rng.random() < 0.85:
            labels[ZONE] = rng.choice(["za", "zb", "zc"])
        nodes.append({"labels": labels, "taint": rng.random() < 0.2})
    running = []
    per_node = [0] * len(nodes)
    for _ in range(rng.randint(0, 6)):
        n = rng.randrange(len(nodes))
        if per_node[n] >= 3:
            continue
        per_node[n] += 1
        running.append(
            {
                "node": n,
                "ns": rng.choice(["ns1", "ns1", "ns2"]),
                "labels": {"app": rng.choice(APPS), "rev": rng.choice(["r1", "r2"])},
                "anti": _term(rng, version) if rng.random() < 0.2 else None,
                "port": rng.choice([8080, 9090]) if rng.random() < 0.25 else None,
            }
        )
    pending: dict[str, Any] = {"labels": {"app": rng.choice(APPS), "rev": rng.choice(["r1", "r2"])}}
    aff: dict[str, Any] = {}
    if rng.random() < 0.3:
        aff.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [_term(rng, version)]
    if rng.random() < 0.35:
        aff.setdefault("podAntiAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [_term(rng, version)]
    if rng.random() < 0.2:
        weighted = {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng, version)}
        aff.setdefault("podAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [weighted]
    pending["affinity"] = aff
    spread = []
    for key in rng.sample([HOST, ZONE], rng.choice([0, 0, 1, 1, 2])):
        c: dict[str, Any] = {
            "maxSkew": rng.randint(1, 2),
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule" if rng.random() < 0.8 else "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
        }
        if c["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.25 and version >= SINCE["minDomains"]:
            c["minDomains"] = rng.randint(1, 4)
        if rng.random() < 0.25 and version >= SINCE["nodeInclusionPolicy"]:
            c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.25 and version >= SINCE["nodeInclusionPolicy"]:
            c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.15 and version >= SINCE["spreadMatchLabelKeys"]:
            c["matchLabelKeys"] = ["rev"]
        spread.append(c)
    pending["spread"] = spread
    pending["port"] = rng.choice([8080, 9090]) if rng.random() < 0.3 else None
    pending["node_selector"] = {"disk": rng.choice(["ssd", "hdd"])} if rng.random() < 0.2 else None
    pending["tolerate"] = rng.random() < 0.3
    return Case(seed, nodes, running, pending)


# --- playing a case -----------------------------------------------------------------------------------


def _rename_term(term: dict[str, Any], ns: dict[str, str]) -> dict[str, Any]:
    term = copy.deepcopy(term)
    if "namespaces" in term:
        term["namespaces"] = [ns[n] for n in term["namespaces"]]
    return term


def _affinity(aff: dict[str, Any], ns: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, parts in aff.items():
        for when, terms in parts.items():
            if when.startswith("required"):
                renamed = [_rename_term(t, ns) for t in terms]
            else:
                renamed = [{**w, "podAffinityTerm": _rename_term(w["podAffinityTerm"], ns)} for w in terms]
            out.setdefault(kind, {})[when] = renamed
    return out


def _container(port: int | None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "none", "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}
    if port:
        c["ports"] = [{"containerPort": 80, "hostPort": port}]
    return c


def manifests(
    case: Case, tag: str, scheduler: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(nodes, running pods, pending pod) of *case*, named for one play (*tag*)."""
    ns = {"ns1": f"{tag}-ns1", "ns2": f"{tag}-ns2"}
    nodes = [{"name": f"{tag}-n{i}", "labels": n["labels"], "taint": n["taint"]} for i, n in enumerate(case.nodes)]
    running = []
    for i, r in enumerate(case.running):
        spec: dict[str, Any] = {"nodeName": nodes[r["node"]]["name"], "containers": [_container(r["port"])]}
        if r["anti"]:
            spec["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_rename_term(r["anti"], ns)]}
            }
        spec["tolerations"] = [{"operator": "Exists"}]
        running.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"run-{i}", "namespace": ns[r["ns"]], "labels": r["labels"]},
                "spec": spec,
            }
        )
    p = case.pending
    spec = {"schedulerName": scheduler, "containers": [_container(p["port"])], "terminationGracePeriodSeconds": 0}
    if p["affinity"]:
        spec["affinity"] = _affinity(p["affinity"], ns)
    if p["spread"]:
        spec["topologySpreadConstraints"] = p["spread"]
    if p["node_selector"]:
        spec["nodeSelector"] = p["node_selector"]
    if p["tolerate"]:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    labels = {**p["labels"], "kai.scheduler/queue": "diff"}
    pending = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pending", "namespace": ns["ns1"], "labels": labels},
        "spec": spec,
    }
    return nodes, running, pending  # fmt: skip


@dataclass
class Outcome:
    node: str | None  # where the pod was bound; None: reported unschedulable
    world: World | None = None
    pod: Any = None

    def index(self) -> str:
        return "unschedulable" if self.node is None else self.node.split("-n", 1)[-1]

    def violations(self) -> list[str]:
        assert self.world is not None and self.node is not None
        node = next((n for n in self.world.nodes if n.name == self.node), None)
        return ["a node of another case"] if node is None else violations(self.world, node, self.pod)


def play(client: Client, case: Case, scheduler: str) -> Outcome:
    tag = f"d{case.seed}-{'k' if scheduler == 'default-scheduler' else 'a'}-{uuid.uuid4().hex[:4]}"
    nodes, running, pending = manifests(case, tag, scheduler)
    names = [f"{tag}-ns1", f"{tag}-ns2"]
    for name, env in zip(names, ("prod", "dev"), strict=True):
        client.create(Namespace.from_dict({"metadata": {"name": name, "labels": {"env": env}}}))
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    try:
        for n in nodes:
            create_node(client, n["name"], labels=n["labels"], taints=taint if n["taint"] else None, cpu="4", gpus=0)
        for r in running:
            client.create(Pod.from_dict(r))
        time.sleep(SETTLE_S)  # both schedulers see the new nodes and pods (their watches) before the pod comes
        client.create(Pod.from_dict(pending))
        ns = pending["metadata"]["namespace"]

        def decided() -> Pod | None:
            p = client.get(Pod, "pending", namespace=ns)
            if p.spec.nodeName:
                return p
            conds = p.status.conditions or [] if p.status else []
            return p if any(c.type == "PodScheduled" and c.status == "False" for c in conds) else None

        got = wait_for(decided, f"{scheduler} to decide case {case.seed}", timeout=60, interval=0.05)
        if not got.spec.nodeName:  # unschedulable: unless a late watch event makes it place the pod after all
            time.sleep(SETTLE_S)
            got = client.get(Pod, "pending", namespace=ns)
        tainted = (("dedicated", "x", "NoSchedule"),)
        world = World(
            [RNode(n["name"], {HOST: n["name"], **n["labels"]}, tainted if n["taint"] else (), 4000) for n in nodes],
            [RPod(parse_pod(r), r["spec"]["nodeName"]) for r in running],
            {name: {"env": env, "kubernetes.io/metadata.name": name} for name, env in zip(names, ("prod", "dev"))},
        )
        return Outcome(got.spec.nodeName or None, world, parse_pod(pending))
    finally:
        for n in nodes:
            with contextlib.suppress(ApiError):
                client.delete(Node, n["name"])
        with contextlib.suppress(ApiError):
            client.delete(Pod, "pending", namespace=f"{tag}-ns1", grace_period=0)


def mismatch(client: Client, case: Case, seen: dict[str, int] | None = None) -> str | None:
    """Why kai and kube-scheduler disagree on *case* (None: they agree). *seen* counts kube-scheduler's
    outcomes (placed, unschedulable)."""
    kube = play(client, case, "default-scheduler")
    kai = play(client, case, "kai-scheduler")
    if seen is not None:
        outcome = "unschedulable" if kube.node is None else "placed"
        seen[outcome] = seen.get(outcome, 0) + 1
    if kube.node is not None:
        wrong = kube.violations()
        if wrong:
            return f"the checker refuses kube-scheduler's node n{kube.index()}: {wrong} (a checker bug)"
        if kai.node is None:
            return f"kube-scheduler binds it (node n{kube.index()}), kai reports it unschedulable"
        wrong = kai.violations()
        if wrong:
            return f"kai binds it to node n{kai.index()}, which breaks {wrong}"
        return None
    if kai.node is not None:
        return f"kube-scheduler reports it unschedulable, kai binds it to node n{kai.index()}"
    return None


def shrink(client: Client, case: Case, why: str) -> tuple[Case, str]:
    """A smaller case that still fails (running pods, then nodes, then the pending pod's rules dropped one by one)."""
    trials = 0
    improved = True
    while improved and trials < SHRINK_TRIALS:
        improved = False
        for candidate in _smaller(case):
            trials += 1
            got = mismatch(client, candidate)
            if got is not None:
                case, why, improved = candidate, got, True
                break
            if trials >= SHRINK_TRIALS:
                break
    return case, why


def _smaller(case: Case) -> Iterator[Case]:
    for i in range(len(case.running)):
        yield Case(case.seed, case.nodes, case.running[:i] + case.running[i + 1 :], case.pending)
    for i in range(len(case.nodes)):
        if len(case.nodes) > 1 and not any(r["node"] == i for r in case.running):
            running = [{**r, "node": r["node"] - (r["node"] > i)} for r in case.running]
            yield Case(case.seed, case.nodes[:i] + case.nodes[i + 1 :], running, case.pending)
    p = case.pending
    for key in ("port", "node_selector", "tolerate"):
        if p[key]:
            yield Case(case.seed, case.nodes, case.running, {**p, key: None if key != "tolerate" else False})
    for i in range(len(p["spread"])):
        yield Case(case.seed, case.nodes, case.running, {**p, "spread": p["spread"][:i] + p["spread"][i + 1 :]})
    for kind in p["affinity"]:
        yield Case(
            case.seed,
            case.nodes,
            case.running,
            {**p, "affinity": {k: v for k, v in p["affinity"].items() if k != kind}},
        )


# --- the test -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def diff_cluster(binaries: Binaries) -> Iterator[tuple[ControlPlane, Client]]:
    cp = start_cluster(binaries)
    client = Client(KubeConfig.from_file(str(cp.kubeconfig)), field_manager="kai-tests")
    try:
        unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
        res = {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}
        client.create(Queue.from_dict({"metadata": {"name": "diff-root"}, "spec": {"resources": res}}))
        client.create(
            Queue.from_dict({"metadata": {"name": "diff"}, "spec": {"parentQueue": "diff-root", "resources": res}})
        )
        cp.start_kube_scheduler()
        yield cp, client
    finally:
        client.close()
        cp.stop()


@pytest.mark.k8s_min("1.31")  # the cases use matchLabelKeys & co.: compared with the current kube-scheduler only
def test_kai_places_what_kube_scheduler_places_and_only_validly(diff_cluster: tuple[ControlPlane, Client]) -> None:
    cp, client = diff_cluster
    version = cp.binaries.version
    assert version >= (1, 31), (
        f"the differential test needs a current kube-scheduler (matchLabelKeys, ...), got {version}"
    )
    failures = []
    seen: dict[str, int] = {}
    t0 = time.monotonic()
    played = 0
    with InProcess(options(cp, schedule_period_s=0.1)):
        for seed in range(SEED, SEED + CASES):
            if time.monotonic() - t0 > BUDGET_S:
                break
            played += 1
            case = make_case(seed, version)
            why = mismatch(client, case, seen)
            if why is not None:
                small, small_why = shrink(client, case, why)
                failures.append(f"case {seed}: {why}\nsmallest failing case: {small_why}\n{small.doc()}")
                if len(failures) >= 3:
                    break
    elapsed = time.monotonic() - t0
    assert not failures, f"{len(failures)} cases differ (kube-scheduler {version}):\n\n" + "\n\n".join(failures)
    assert played >= MIN_CASES, f"only {played} cases in the {BUDGET_S:g} s budget (KAI_DIFF_BUDGET_S)"
    # the cases must exercise both answers, or agreement would mean little
    if played >= 50:
        assert seen.get("placed", 0) >= played // 5 and seen.get("unschedulable", 0) >= played // 10, seen
    print(f"{played} cases agree with kube-scheduler {version[0]}.{version[1]} in {elapsed:.0f} s: {seen}")
