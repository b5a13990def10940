"""Nothing accepted and ignored: every field of kai's CRDs is honoured, refused, or documented as different.

The table is data (tests/data/crd_fields.yaml). This test walks the CRD schemas under deploy/crds and checks
that every field has exactly one entry and no entry names a field the CRDs lack; that a field marked
``works`` cites a test that exists; that a field marked ``refused`` is refused by ``kai sim`` with the field
named; and that a field marked ``differs`` appears in docs/differences.md. The behaviours the table cites
from this file are tested below.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.api.manifests import load_manifests
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import UNSCHEDULABLE_CONDITION, open_session, run_cycle
from kai.scheduler.ordering import JobQueue
from kai.scheduler.plugins import check_conf, make_plugins
from tests.conftest import run_sim
from tests.unit.test_isolation import cluster
from tests.unit.test_statement import node, pod, podgroup, queue

ROOT = Path(__file__).parents[2]
TABLE = yaml.safe_load((ROOT / "tests" / "data" / "crd_fields.yaml").read_text())
DIFFERENCES = (ROOT / "docs" / "differences.md").read_text()


def _walk(schema: dict[str, Any], path: str, out: list[str]) -> None:
    props = schema.get("properties")
    if props:
        for key, sub in props.items():
            _walk(sub, f"{path}.{key}" if path else key, out)
    elif schema.get("type") == "array" and "items" in schema:
        _walk(schema["items"], f"{path}[]", out)
    elif isinstance(schema.get("additionalProperties"), dict):
        _walk(schema["additionalProperties"], f"{path}.*", out)
    else:
        out.append(path)


def crd_fields() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in sorted((ROOT / "deploy" / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            for version in doc["spec"]["versions"]:
                fields: list[str] = []
                _walk(version["schema"]["openAPIV3Schema"], "", fields)
                out.setdefault(doc["spec"]["names"]["kind"], []).extend(fields)
    return out


def test_every_crd_field_has_one_entry_and_nothing_else_does() -> None:
    fields = crd_fields()
    assert set(fields) == set(TABLE)
    for kind, paths in fields.items():
        assert sorted(set(paths)) == sorted(TABLE[kind]), kind


ENTRIES = [(kind, path, entry) for kind, rows in TABLE.items() for path, entry in rows.items()]


@pytest.mark.parametrize(("kind", "path", "entry"), ENTRIES, ids=[f"{k}:{p}" for k, p, _ in ENTRIES])
def test_entry_is_true(kind: str, path: str, entry: dict[str, Any]) -> None:
    (verdict, value), *rest = entry.items() if isinstance(entry, dict) else ((entry, None),)
    assert not rest, entry
    if verdict == "works":
        file, _, func = str(value).partition("::")
        text = (ROOT / file).read_text()
        assert not func or f"def {func}(" in text, f"{kind} {path}: {value} does not exist"
    elif verdict == "differs":
        leaf = [part for part in path.replace("[]", "").split(".") if part != "*"][-1]
        assert f"`{leaf}`" in DIFFERENCES, f"{kind} {path}: docs/differences.md does not mention `{leaf}`"
    elif verdict == "refused":
        assert kind == "SchedulingShard", "refusals are checked through a SchedulingShard"
        doc = {"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": {"name": "default"}}
        doc["spec"] = value
        code, _, err = run_sim(["-"], stdin=yaml.safe_dump(doc) + "---\n" + NODE)
        assert code == 2, err
        assert "SchedulingShard/default" in err, err
    else:
        assert verdict == "status" and value in ("written", "not written"), entry


NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\nstatus: {allocatable: {cpu: '4', nvidia.com/gpu: '1'}}\n"


# --- the behaviours the table cites ---------------------------------------------------------------------


def test_display_name_reaches_outputs() -> None:
    q = queue("team", "root")
    q["spec"]["displayName"] = "Team Rocket"
    code, doc, err = run_sim(["-"], stdin=yaml.safe_dump_all([queue("root"), q]))
    assert code == 0, err
    assert doc is not None
    assert {x["name"]: x.get("displayName") for x in doc["queues"]} == {"root": None, "team": "Team Rocket"}


def test_scheduling_backoff_prefixes_the_node_pool() -> None:
    docs = [node("n0", gpu=1), queue("root"), queue("team", "root")]
    for name, backoff in (("plain", -1), ("pooled", 1)):
        pg = podgroup(name, "team")
        pg["spec"]["schedulingBackoff"] = backoff
        docs += [pg, pod(f"{name}-0", name, gpu=4)]  # 4 GPUs on a 1-GPU node: never fits
    result = run_cycle(cluster(docs).snapshot(), SchedulerConf(actions=("allocate",)))
    messages = {s.name: s.conditions[0].message for s in result.podgroups}
    assert all(s.conditions[0].type == UNSCHEDULABLE_CONDITION for s in result.podgroups)
    assert messages["pooled"] == f"Node-Pool 'default': {messages['plain']}"


def test_queue_depth_per_action_limits_jobs_per_queue() -> None:
    docs = [node("n0", gpu=8), queue("root"), queue("team", "root")]
    for i in range(5):
        docs += [podgroup(f"j{i}", "team"), pod(f"j{i}-0", f"j{i}")]
    c = cluster(docs)
    for depth, bound in ((None, 5), (2, 2)):
        conf = SchedulerConf(actions=("allocate",), queue_depth_per_action=(("allocate", depth),) if depth else ())
        result = run_cycle(c.snapshot(), conf)
        assert len(result.binds) == bound
    ssn = open_session(c.snapshot(), SchedulerConf())
    assert len(JobQueue(ssn, list(ssn.snap.jobs), 3)) == 3


def shard(spec: str) -> SchedulerConf:
    text = "apiVersion: kai.scheduler/v1\nkind: SchedulingShard\nmetadata: {name: default}\nspec:\n"
    text += textwrap.indent(textwrap.dedent(spec), "  ")
    objects, _ = load_manifests([("shard.yaml", text)])
    return check_conf(SchedulerConf.from_shard(objects[0][1]))  # type: ignore[arg-type]


def test_shard_settings_reach_the_plugins() -> None:
    conf = shard("kValue: 2.5\nminRuntime: {preemptMinRuntime: 30s, reclaimMinRuntime: 1m}\n")
    plugins = {p.name: p for p in make_plugins(conf)}
    assert plugins["proportion"].args["kValue"] == 2.5
    assert plugins["minruntime"].args["defaultPreemptMinRuntime"] == 30.0
    assert plugins["minruntime"].args["defaultReclaimMinRuntime"] == 60.0


def test_action_priority_and_enabled() -> None:
    conf = shard("actions: {preempt: {priority: 450}, consolidation: {enabled: false}}\n")
    assert conf.actions == ("allocate", "preempt", "reclaim", "stalegangeviction")


def test_plugin_priority_orders_tiers() -> None:
    """elastic above priority: a job below its minimum goes before a higher-priority one that is satisfied."""
    docs = [node("n0", gpu=8), queue("root"), queue("team", "root")]
    docs += [podgroup("big", "team", min_member=1, priority_class="inference"), pod("big-0", "big", node_name="n0")]
    docs.append(pod("big-1", "big"))
    docs += [podgroup("small", "team", min_member=1), pod("small-0", "small")]
    c = cluster(docs)
    default = open_session(c.snapshot(), SchedulerConf())
    swapped = open_session(c.snapshot(), SchedulerConf().with_plugin("elastic", enabled=True))
    swapped_conf = shard("plugins: {elastic: {priority: 1750}}\n")
    swapped = open_session(c.snapshot(), swapped_conf)
    big, small = (next(j for j in default.snap.jobs if j.name == n) for n in ("big", "small"))
    assert default.hooks.job_order(default, big) < default.hooks.job_order(default, small)  # priority first
    assert swapped.hooks.job_order(swapped, small) < swapped.hooks.job_order(swapped, big)  # elastic first
