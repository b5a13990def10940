"""Bad input through the real ``kai sim`` CLI: exit code 2, and stderr names the file, the object and the field.

The contract (sim-contract.md): bad input is an error naming the file, the object and the field, with a
non-zero exit; nothing is silently dropped and nothing is half-done (no output on stdout).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kai.cli import main

SimFn = Callable[..., tuple[int, dict[str, Any] | None, str]]

NOW = "2026-01-01T00:00:00Z"

BASE = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Node
    metadata: {name: node0}
    status: {allocatable: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "4"}}
    ---
    apiVersion: scheduling.run.ai/v2
    kind: Queue
    metadata: {name: dept}
    spec:
      resources:
        gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
        cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
        memory: {quota: -1, limit: -1, overQuotaWeight: 1}
    ---
    apiVersion: scheduling.run.ai/v2
    kind: Queue
    metadata: {name: team-a}
    spec:
      parentQueue: dept
      resources:
        gpu: {quota: 2, limit: -1, overQuotaWeight: 1}
        cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
        memory: {quota: -1, limit: -1, overQuotaWeight: 1}
    """
)

GOOD_POD = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Pod
    metadata: {name: ok, labels: {kai.scheduler/queue: team-a}}
    spec: {containers: [{name: c, resources: {requests: {cpu: "1", nvidia.com/gpu: 1}}}]}
    """
)


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def assert_bad(sim: SimFn, files: list[str], *needles: str) -> str:
    code, doc, err = sim(files)
    assert code == 2, err
    assert doc is None
    for n in needles:
        assert n in err, f"{n!r} not in stderr: {err!r}"
    return err


def test_base_is_valid(sim: SimFn, tmp_path: Path) -> None:
    code, doc, err = sim([write(tmp_path, "base.yaml", BASE), write(tmp_path, "pod.yaml", GOOD_POD)])
    assert code == 0, err
    assert doc is not None
    assert [p["name"] for p in doc["pods"]] == ["ok"]


def test_malformed_yaml(sim: SimFn, tmp_path: Path) -> None:
    bad = write(
        tmp_path,
        "broken.yaml",
        """\
        apiVersion: v1
        kind: Pod
        metadata:
          name: [oops
        """,
    )
    err = assert_bad(sim, [write(tmp_path, "base.yaml", BASE), bad], "broken.yaml", "line ")
    assert "YAML" in err


def test_bad_quantity_in_pod_request(sim: SimFn, tmp_path: Path) -> None:
    bad = write(
        tmp_path,
        "pods.yaml",
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: p1, namespace: ml, labels: {kai.scheduler/queue: team-a}}
        spec: {containers: [{name: c, resources: {requests: {memory: 1Gb}}}]}
        """,
    )
    err = assert_bad(
        sim,
        [write(tmp_path, "base.yaml", BASE), bad],
        "pods.yaml",
        "Pod/ml/p1",
        "spec.containers[0].resources.requests.memory",
    )
    assert "1Gb" in err


def test_bad_value_is_shown_verbatim(sim: SimFn, tmp_path: Path) -> None:
    """The user's own text (values, file names) is printed as is, never interpreted as terminal markup."""
    bad = write(
        tmp_path,
        "pods.yaml",
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: p1}
        spec: {containers: [{name: c, resources: {requests: {cpu: "[b]x"}}}]}
        """,
    )
    assert_bad(sim, [write(tmp_path, "base.yaml", BASE), bad], "pods.yaml", "p1", "'[b]x'")


def test_file_name_with_brackets_is_shown_verbatim(sim: SimFn, tmp_path: Path) -> None:
    d = tmp_path / "[dim]"
    d.mkdir()
    bad = write(d, "x.yaml", "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n")
    assert_bad(sim, [bad], "[dim]/x.yaml", "Widget/w", "kind")


def test_parent_queue_cycle(sim: SimFn, tmp_path: Path) -> None:
    bad = write(
        tmp_path,
        "queues.yaml",
        """\
        apiVersion: scheduling.run.ai/v2
        kind: Queue
        metadata: {name: a}
        spec: {parentQueue: b}
        ---
        apiVersion: scheduling.run.ai/v2
        kind: Queue
        metadata: {name: b}
        spec: {parentQueue: a}
        """,
    )
    err = assert_bad(sim, [write(tmp_path, "base.yaml", BASE), bad], "queues.yaml", "spec.parentQueue", "cycle")
    assert "Queue/a" in err or "Queue/b" in err


def test_missing_file(sim: SimFn, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    assert_bad(sim, [write(tmp_path, "base.yaml", BASE), missing], "nope.yaml")


@pytest.mark.parametrize(
    "bad_text",
    [
        "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: x}}}]}\n",
        "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {name: g}\nspec: {queue: ghost}\n",
        "key: [1, 2\n",
    ],
)
def test_no_partial_output_next_to_a_bad_file(tmp_path: Path, bad_text: str) -> None:
    good = write(tmp_path, "base.yaml", BASE + "---\n" + GOOD_POD)
    bad = write(tmp_path, "bad.yaml", bad_text)
    for files in ([good, bad], [bad, good]):
        result = CliRunner().invoke(main, ["sim", *files, "--now", NOW, "-o", "json"])
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        assert "bad.yaml" in result.stderr


def test_unknown_action(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml", BASE)
    result = CliRunner().invoke(main, ["sim", base, "--now", NOW, "--actions", "allocate,bogus", "-o", "json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "bogus" in result.stderr


def test_bad_now(sim: SimFn, tmp_path: Path) -> None:
    code, doc, err = sim([write(tmp_path, "base.yaml", BASE), "--now", "yesterday"])
    assert code == 2
    assert doc is None
    assert "--now" in err


# One bad document applied beside the valid BASE: (case id, file name, document, texts the error must contain).
BAD_DOCUMENTS = [
    pytest.param(
        "widget.yaml",
        """\
            apiVersion: example.com/v1
            kind: Widget
            metadata: {name: w1}
""",
        ["widget.yaml", "Widget/w1", "kind"],
        id="unknown_kind",
    ),
    pytest.param(
        "pods.yaml",
        """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p1, labels: {kai.scheduler/queue: nope}}
            spec: {containers: [{name: c}]}
""",
        ["pods.yaml", "Pod/default/p1", "metadata.labels.kai.scheduler/queue", "nope"],
        id="pod_queue_label_names_missing_queue",
    ),
    pytest.param(
        "pg.yaml",
        """\
            apiVersion: scheduling.run.ai/v2alpha2
            kind: PodGroup
            metadata: {name: job1, namespace: ml}
            spec: {minMember: 1, queue: ghost}
""",
        ["pg.yaml", "PodGroup/ml/job1", "spec.queue", "ghost"],
        id="podgroup_queue_missing",
    ),
    pytest.param(
        "pg.yaml",
        """\
            apiVersion: scheduling.run.ai/v2alpha2
            kind: PodGroup
            metadata: {name: job1}
            spec: {minMember: 1}
""",
        ["pg.yaml", "PodGroup/default/job1", "spec.queue"],
        id="podgroup_without_queue",
    ),
    pytest.param(
        "queues.yaml",
        """\
            apiVersion: scheduling.run.ai/v2
            kind: Queue
            metadata: {name: orphan}
            spec: {parentQueue: no-such-dept}
""",
        ["queues.yaml", "Queue/orphan", "spec.parentQueue", "no-such-dept"],
        id="parent_queue_missing",
    ),
    pytest.param(
        "pods.yaml",
        """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p1, annotations: {pod-group-name: ghost-pg}}
            spec: {containers: [{name: c}]}
""",
        ["pods.yaml", "Pod/default/p1", "metadata.annotations.pod-group-name", "ghost-pg"],
        id="pod_names_missing_podgroup",
    ),
    pytest.param(
        "pods.yaml",
        """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p1, labels: {kai.scheduler/queue: team-a, kai.scheduler/task-priority: high}}
            spec: {containers: [{name: c}]}
""",
        ["pods.yaml", "Pod/default/p1", "metadata.labels.kai.scheduler/task-priority", "high"],
        id="pod_task_priority_not_an_integer",
    ),
    pytest.param(
        "pods.yaml",
        """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p1, labels: {kai.scheduler/queue: team-a}}
            spec: {priorityClassName: platinum, containers: [{name: c}]}
""",
        ["pods.yaml", "Pod/default/p1", "spec.priorityClassName", "platinum"],
        id="pod_unknown_priority_class",
    ),
    pytest.param(
        "pods.yaml",
        """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p1, labels: {kai.scheduler/queue: team-a, priorityClassName: platinum}}
            spec: {containers: [{name: c}]}
""",
        ["pods.yaml", "Pod/default/p1", "metadata.labels.priorityClassName", "platinum"],
        id="pod_unknown_priority_class_label",
    ),
    pytest.param(
        "pg.yaml",
        """\
            apiVersion: scheduling.run.ai/v2alpha2
            kind: PodGroup
            metadata: {name: job1}
            spec: {queue: team-a, priorityClassName: platinum}
""",
        ["pg.yaml", "PodGroup/default/job1", "spec.priorityClassName", "platinum"],
        id="podgroup_unknown_priority_class",
    ),
    pytest.param(
        "pg.yaml",
        """\
            apiVersion: scheduling.run.ai/v2alpha2
            kind: PodGroup
            metadata: {name: job1}
            spec: {queue: dept}
""",
        ["pg.yaml", "PodGroup/default/job1", "spec.queue", "dept"],
        id="podgroup_in_non_leaf_queue",
    ),
    pytest.param(
        "pods.yaml",
        """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p1, labels: {kai.scheduler/queue: dept}}
            spec: {containers: [{name: c}]}
""",
        ["pods.yaml", "Pod/default/p1", "metadata.labels.kai.scheduler/queue", "dept"],
        id="pod_in_non_leaf_queue",
    ),
]


@pytest.mark.parametrize(("name", "text", "needles"), BAD_DOCUMENTS)
def test_bad_document_beside_valid_ones(sim: SimFn, tmp_path: Path, name: str, text: str, needles: list[str]) -> None:
    """Exit 2; the error names the file, the object and the field (and the bad value where there is one)."""
    bad = write(tmp_path, name, text)
    assert_bad(sim, [write(tmp_path, "base.yaml", BASE), bad], *needles)


PDB_BAD = [
    ("selector: {matchLabels: {app: 1}}\n  minAvailable: 1", "spec.selector.matchLabels"),
    ("selector: {matchLabels: [app]}\n  minAvailable: 1", "spec.selector.matchLabels"),
    (
        "selector: {matchExpressions: [{key: app, operator: Equals, values: [x]}]}\n  minAvailable: 1",
        "spec.selector.matchExpressions[0].operator",
    ),
    (
        "selector: {matchExpressions: [{key: app, operator: In}]}\n  minAvailable: 1",
        "spec.selector.matchExpressions[0].values",
    ),
    (
        "selector: {matchExpressions: [{key: app, operator: Exists, values: [x]}]}\n  minAvailable: 1",
        "spec.selector.matchExpressions[0].values",
    ),
    ("selector: {matchExpressions: [{operator: Exists}]}\n  minAvailable: 1", "spec.selector.matchExpressions[0].key"),
    ("selector: {matchLabels: {app: web}}\n  minAvailable: -1", "spec.minAvailable"),
    ("selector: {matchLabels: {app: web}}\n  maxUnavailable: 'ten%'", "spec.maxUnavailable"),
    ("selector: {matchLabels: {app: web}}", "spec.minAvailable"),
    ("selector: {matchLabels: {app: web}}\n  minAvailable: 1\n  maxUnavailable: 1", "spec.minAvailable"),
]


@pytest.mark.parametrize(("spec", "field"), PDB_BAD, ids=[f for _, f in PDB_BAD])
def test_bad_pod_disruption_budget(sim: SimFn, tmp_path: Path, spec: str, field: str) -> None:
    """A PDB with a bad selector or budget is rejected naming the object and the field."""
    bad = write(
        tmp_path,
        "pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: ml}\nspec:\n  "
        + spec
        + "\n",
    )
    assert_bad(sim, [write(tmp_path, "base.yaml", BASE), bad], "pdb.yaml", "PodDisruptionBudget/ml/web", field)


DURATION_BAD = [
    ("Queue", "preemptMinRuntime: -5m", "spec.preemptMinRuntime"),
    ("Queue", "reclaimMinRuntime: 5 minutes", "spec.reclaimMinRuntime"),
    ("PodGroup", "stalenessGracePeriod: 1h30", "spec.stalenessGracePeriod"),
    ("PodGroup", "preemptionDelay: '60'", "spec.preemptionDelay"),
]


@pytest.mark.parametrize(("kind", "line", "field"), DURATION_BAD, ids=[f for _, _, f in DURATION_BAD])
def test_bad_eviction_durations(sim: SimFn, tmp_path: Path, kind: str, line: str, field: str) -> None:
    """Malformed or negative min-runtime, staleness and preemption-delay durations name their field."""
    if kind == "Queue":
        text = (
            "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: team-b}\nspec:\n  parentQueue: dept\n  "
            + line
            + "\n  resources:\n    gpu: {quota: 1, limit: -1, overQuotaWeight: 1}\n"
        )
        name = "Queue/team-b"
    else:
        text = (
            "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {name: pg, namespace: ml}\n"
            "spec:\n  queue: team-a\n  minMember: 1\n  " + line + "\n"
        )
        name = "PodGroup/ml/pg"
    bad = write(tmp_path, "obj.yaml", text)
    assert_bad(sim, [write(tmp_path, "base.yaml", BASE), bad], "obj.yaml", name, field)
