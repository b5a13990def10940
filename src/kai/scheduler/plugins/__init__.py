"""The built-in plugins, by KAI's names, and how a configuration becomes a Session's Hooks.

Rules: ``REGISTRY`` is the explicit name -> class map (nothing registers itself at import time). Every name of
``kai.scheduler.conf.DEFAULT_PLUGINS`` is either here, or in ``NOT_OFFERED`` with the reason kai does not run
it and the only settings it accepts (so a KAI SchedulingShard that mentions it still loads, and nothing is
accepted and then ignored). ``check_conf`` makes every enabled plugin once from its arguments, so a bad
configuration stops start-up with a ConfigError naming the field; ``build_hooks`` does the same for each
Session (plugins keep state for one Session only).
"""

from __future__ import annotations

from collections.abc import Callable

from kai.api.objects import Pod
from kai.scheduler.conf import DEFAULT_PLUGINS, ConfigError, PluginSetting, SchedulerConf
from kai.scheduler.framework import Hooks, Plugin, check_plugin, implements
from kai.scheduler.plugins.dynamicresources import DynamicResources
from kai.scheduler.plugins.gpupolicy import GpuPolicy
from kai.scheduler.plugins.minruntime import MinRuntime
from kai.scheduler.plugins.nodeorder import (
    GpuPack,
    GpuSharingOrder,
    GpuSpread,
    NodeAvailability,
    NodePlacement,
    ResourceType,
)
from kai.scheduler.plugins.order import Elastic, Kubeflow, Priority, Ray, SubGroupOrder, TaskOrder
from kai.scheduler.plugins.podaffinity import PodAffinity
from kai.scheduler.plugins.podtopologyspread import PodTopologySpread
from kai.scheduler.plugins.predicates import Predicates
from kai.scheduler.plugins.proportion import Proportion
from kai.scheduler.plugins.topology import TopologyPlugin
from kai.scheduler.taskorder import TaskOrderTier, default_task_order, task_order


class NominatedNode(Plugin):
    """nominatednode: a pod an eviction made room for in an earlier cycle goes first to the node it was
    nominated to (``status.nominatedNodeName``), if it fits there now (allocate's nomination pass, which asks
    whether this plugin is enabled). KAI scores the node +10,000,000 instead; the effect is the same."""

    name = "nominatednode"


REGISTRY: dict[str, type[Plugin]] = {
    cls.name: cls
    for cls in (
        Predicates,
        Proportion,
        Priority,
        NodeAvailability,
        ResourceType,
        PodAffinity,
        PodTopologySpread,
        Elastic,
        Kubeflow,
        Ray,
        SubGroupOrder,
        TaskOrder,
        NominatedNode,
        MinRuntime,
        TopologyPlugin,
        GpuPack,
        GpuSpread,
        GpuPolicy,
        NodePlacement,
        GpuSharingOrder,
        DynamicResources,
    )
}
for _cls in REGISTRY.values():
    check_plugin(_cls)

# KAI plugins kai does not run: (the `enabled` values accepted, why). docs/differences.md lists them too.
NOT_OFFERED: dict[str, tuple[frozenset[bool], str]] = {
    "snapshot": (frozenset({True, False}), "kai serves no snapshot endpoint; `kai snapshot` and `kai explain` do that"),
    "sg-nodelocalgreedy": (frozenset({True}), "kai's victim search always runs its node-local and multi-node steps"),
    "sg-multinodegang": (frozenset({True}), "kai's victim search always runs its node-local and multi-node steps"),
    "numa": (frozenset({False}), "kai does not model NUMA placement"),
    "reflectjoborder": (frozenset({False}), "kai serves no job-order endpoint; `kai explain queue` shows the order"),
}

assert set(REGISTRY) | set(NOT_OFFERED) == {n for n, _, _ in DEFAULT_PLUGINS}, "every configured name has a home"


def _check_not_offered(setting: PluginSetting) -> None:
    accepted, why = NOT_OFFERED[setting.name]
    where = setting.where or f"plugins.{setting.name}"
    if setting.enabled not in accepted:
        state = "enabled" if setting.enabled else "disabled"
        raise ConfigError(f"{where}: plugin {setting.name} cannot be {state} in kai: {why}")
    if setting.arguments:
        raise ConfigError(f"{where}.arguments: plugin {setting.name} takes no arguments in kai: {why}")


def _enabled(conf: SchedulerConf) -> list[PluginSetting]:
    """The enabled plugins kai runs, in priority order (higher first; ties keep the default order)."""
    out = []
    for setting in conf.plugins:
        if setting.name in NOT_OFFERED:
            _check_not_offered(setting)
        elif setting.name not in REGISTRY:
            raise ConfigError(f"{setting.where or 'plugins'}: unknown plugin {setting.name!r}")
        elif setting.enabled:
            out.append(setting)
    return sorted(out, key=lambda s: -s.priority)


def make_plugins(conf: SchedulerConf) -> list[Plugin]:
    """One instance of every enabled plugin, from its validated arguments, in priority order."""
    return [REGISTRY[s.name](dict(s.arguments), where=s.where) for s in _enabled(conf)]


def check_conf(conf: SchedulerConf) -> SchedulerConf:
    """Validate every plugin setting of *conf* (names, enabled values, arguments); returns *conf*. Backends call
    this at start-up, so a bad SchedulingShard stops the scheduler with the field named."""
    make_plugins(conf)
    return conf


def build_hooks(conf: SchedulerConf) -> Hooks:
    """The Session's Hooks: its enabled plugins, made anew (they keep state for one Session only)."""
    return Hooks(make_plugins(conf))


def task_order_of(conf: SchedulerConf) -> Callable[[Pod], tuple]:
    """The pod order the configuration's task-order plugins give, in priority order (for ``build_snapshot``)."""
    plugins = [p for p in make_plugins(conf) if implements(p, "task_order")]
    if [p.name for p in plugins] == ["kubeflow", "ray", "taskorder"]:  # KAI's default: the written-out key
        return default_task_order
    tiers: list[TaskOrderTier] = [p.task_order for p in plugins]
    return task_order(tiers)


__all__ = ["NOT_OFFERED", "REGISTRY", "build_hooks", "check_conf", "make_plugins", "task_order_of"]
