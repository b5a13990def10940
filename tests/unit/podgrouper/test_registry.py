"""The owner-kind tables stay in step: every kind the manifests accept has a grouper (or sits in a Knative
chain), every grouper's kind is accepted, every simulated controller's kind is accepted."""

from __future__ import annotations

from kai.api.workloads import WORKLOAD_KINDS, split_api_version
from kai.podgrouper import REGISTRY, lookup
from kai.sim.controllers import CONTROLLERS


def test_every_registry_kind_is_accepted_by_the_manifest_reader() -> None:
    accepted = {(*split_api_version(v), k) for v, k in WORKLOAD_KINDS} | {("", "v1", "Pod")}
    assert set(REGISTRY) <= accepted


def test_every_accepted_kind_has_a_grouper_except_knative_chain_members() -> None:
    without = {(v, k) for v, k in WORKLOAD_KINDS if lookup(v, k) is None}
    assert without == {("serving.knative.dev/v1", "Configuration"), ("serving.knative.dev/v1", "Revision")}


def test_every_controller_kind_is_accepted() -> None:
    groups_kinds = {(split_api_version(v)[0], k) for v, k in WORKLOAD_KINDS}
    assert set(CONTROLLERS) <= groups_kinds
