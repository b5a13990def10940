"""kai's queue access rule: parsing the annotation and deciding who may use a queue."""

from __future__ import annotations

import pytest

from kai.api.errors import ManifestError
from kai.api.objects import parse_queue
from kai.api.queueaccess import access_denied, parse_allowed_namespaces


def _q(name: str, parent: str = "", allowed: str | None = None):
    meta: dict = {"name": name}
    if allowed is not None:
        meta["annotations"] = {"kai.scheduler/allowed-namespaces": allowed}
    return parse_queue({"metadata": meta, "spec": {"parentQueue": parent}})


def test_no_annotation_admits_every_namespace() -> None:
    queues = {"a": _q("a")}
    assert queues["a"].allowed_namespaces is None
    assert access_denied(queues, "a", "anything") == ""


def test_names_and_patterns() -> None:
    assert parse_allowed_namespaces(" team-a , team-a-* ") == ("team-a", "team-a-*")
    queues = {"a": _q("a", allowed="team-a, team-a-*")}
    assert access_denied(queues, "a", "team-a") == ""
    assert access_denied(queues, "a", "team-a-dev") == ""
    assert "namespace 'team-b' may not use queue 'a'" in access_denied(queues, "a", "team-b")


def test_an_ancestor_rule_binds_its_descendants() -> None:
    queues = {"dept": _q("dept", allowed="ml-*"), "team": _q("team", parent="dept", allowed="ml-team")}
    assert access_denied(queues, "team", "ml-team") == ""
    assert "ancestor 'dept'" in access_denied({**queues, "team": _q("team", parent="dept")}, "team", "hr")
    assert "may not use queue 'team'" in access_denied(queues, "team", "ml-other")


@pytest.mark.parametrize("bad", ["", " , ", "Team_A", "a/b"])
def test_bad_rules_are_errors_naming_the_annotation(bad: str) -> None:
    with pytest.raises(ManifestError) as e:
        _q("a", allowed=bad)
    assert e.value.field == "metadata.annotations.kai.scheduler/allowed-namespaces"
