"""Scheduler configuration: which actions run and the plugin arguments, validated up front.

KAI reads this from the SchedulingShard; bad values stop start-up (ConfigError)
rather than being logged and defaulted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kai.api import constants as C
from kai.api.duration import parse_duration
from kai.api.objects import GPU_POLICIES, SchedulingShard

KNOWN_ACTIONS = C.DEFAULT_ACTIONS
DEFAULT_ACTION_PRIORITIES = (500, 400, 300, 200, 100)  # KAI's, for allocate .. stalegangeviction


class ConfigError(ValueError):
    pass


# KAI's plugins and their default priorities (higher runs first; kai-behaviour §2.5), plus kai's gpupolicy. The
# registry of what each name does is kai.scheduler.plugins; this table is the configuration's default.
# (name, priority, enabled by default)
DEFAULT_PLUGINS: tuple[tuple[str, int, bool], ...] = (
    ("predicates", 1900, True),
    ("proportion", 1800, True),
    ("priority", 1700, True),
    ("nodeavailability", 1600, True),
    ("resourcetype", 1500, True),
    ("podaffinity", 1400, True),
    ("podtopologyspread", 1350, True),  # kai: kube-scheduler's PodTopologySpread (KAI does not run it)
    ("elastic", 1300, True),
    ("kubeflow", 1200, True),
    ("ray", 1100, True),
    ("subgrouporder", 1000, True),
    ("taskorder", 900, True),
    ("nominatednode", 800, True),
    ("dynamicresources", 700, True),
    ("minruntime", 600, True),
    ("topology", 500, True),
    ("snapshot", 400, True),
    ("sg-nodelocalgreedy", 360, True),
    ("sg-multinodegang", 350, True),
    ("gpupack", 300, True),
    ("gpuspread", 300, False),
    ("gpupolicy", 250, False),  # kai: placementStrategy.gpu naming a GPU placement policy (docs/trace.md)
    ("nodeplacement", 200, True),
    ("gpusharingorder", 100, True),
    ("numa", 0, False),
    ("reflectjoborder", 0, False),
)


@dataclass(frozen=True, slots=True)
class PluginSetting:
    """One plugin as configured: on or off, its priority, its arguments (validated when the plugin is made)."""

    name: str
    priority: int
    enabled: bool = True
    arguments: tuple[tuple[str, Any], ...] = ()
    where: str = ""  # the field that configured it, for errors ("SchedulingShard/x: spec.plugins.proportion")


DEFAULT_PLUGIN_SETTINGS = tuple(PluginSetting(n, p, e) for n, p, e in DEFAULT_PLUGINS)


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...] = C.DEFAULT_ACTIONS
    plugins: tuple[PluginSetting, ...] = DEFAULT_PLUGIN_SETTINGS  # every known plugin, enabled or not
    queue_depth_per_action: tuple[tuple[str, int], ...] = ()
    default_staleness_grace_period: float = C.DEFAULT_STALENESS_GRACE_PERIOD_S
    # seconds after a Running pod's deletionTimestamp before it is StuckInReleasing: its resources no longer
    # count as releasing, so nothing is pipelined onto them (KAI's stuckInReleasingThreshold, default 2m)
    stuck_in_releasing_threshold: float = C.DEFAULT_STUCK_IN_RELEASING_S
    # --- evictions (reclaim, preempt, consolidation) ---
    max_consolidation_preemptees: int = 16  # victims (pods) one consolidation may move; 0 turns it off
    allow_consolidating_reclaim: bool = True  # victims that are only moved do not count against the reclaimee
    respect_pdbs: bool = True  # kai: a victim set that would break a PodDisruptionBudget is rejected
    max_evictions_per_cycle: int = -1  # kai: cap on pods evicted (incl. moved) per cycle; -1 = none
    # Search budgets, counted in simulated victim scenarios (deterministic, unlike KAI's wall-clock budgets).
    max_scenarios_per_job: int = 64
    max_scenarios_per_action: int = 2000

    def __post_init__(self) -> None:
        for a in self.actions:
            if a not in KNOWN_ACTIONS:
                raise ConfigError(f"unknown action {a!r} (known: {', '.join(KNOWN_ACTIONS)})")
        for name, n in (
            ("maxScenariosPerJob", self.max_scenarios_per_job),
            ("maxScenariosPerAction", self.max_scenarios_per_action),
        ):
            if n < 1:
                raise ConfigError(f"{name} must be >= 1, got {n}")
        for action, _ in self.queue_depth_per_action:
            if action not in KNOWN_ACTIONS:
                raise ConfigError(f"queueDepthPerAction: unknown action {action!r} (known: {', '.join(KNOWN_ACTIONS)})")

    def queue_depth(self, action: str) -> int | None:
        return dict(self.queue_depth_per_action).get(action)

    def plugin(self, name: str) -> PluginSetting | None:
        return next((p for p in self.plugins if p.name == name), None)

    def with_plugin(self, name: str, *, enabled: bool = True, **arguments: Any) -> SchedulerConf:
        """This configuration with plugin *name* switched on (or off) and given *arguments* (merged over its
        own): how code and tests configure what a SchedulingShard's ``spec.plugins`` configures."""
        out = []
        found = False
        for p in self.plugins:
            if p.name == name:
                found = True
                args = {**dict(p.arguments), **arguments}
                p = PluginSetting(name, p.priority, enabled, tuple(sorted(args.items())), p.where)
            out.append(p)
        if not found:
            raise ConfigError(f"unknown plugin {name!r} (known: {', '.join(n for n, _, _ in DEFAULT_PLUGINS)})")
        return replace(self, plugins=tuple(out))

    def with_placement(self, *, gpu: str = "binpack", cpu: str = "binpack") -> SchedulerConf:
        """``placementStrategy`` as KAI's operator turns it into plugins: nodeplacement's ``gpu`` and ``cpu``;
        gpupack and gpusharingorder for a binpack GPU strategy, gpuspread for spread."""
        spread = gpu == "spread"
        conf = self.with_plugin("nodeplacement", gpu=gpu, cpu=cpu)
        conf = conf.with_plugin("gpupack", enabled=not spread).with_plugin("gpuspread", enabled=spread)
        return conf.with_plugin("gpusharingorder", enabled=not spread)

    @classmethod
    def from_shard(cls, shard: SchedulingShard | None, actions: tuple[str, ...] | None = None) -> SchedulerConf:
        """The configuration a SchedulingShard asks for; *actions* (e.g. from ``--actions``) wins.

        As KAI's operator does, ``placementStrategy`` and ``kValue`` become plugin arguments (nodeplacement's
        ``gpu`` and ``cpu``; gpupack and gpusharingorder on for a binpack GPU strategy, gpuspread for spread;
        proportion's ``kValue``), then ``spec.plugins`` is merged over that. Unknown plugin names are errors
        here; arguments are checked when the plugins are made (``kai.scheduler.plugins.check_conf``)."""
        if shard is None:
            return cls(actions=actions or C.DEFAULT_ACTIONS)
        where = f"SchedulingShard/{shard.meta.name}"
        chosen = list(actions or C.DEFAULT_ACTIONS)
        for name in shard.actions:  # checked even when --actions overrides them: a typo is never ignored
            if name not in KNOWN_ACTIONS:
                raise ConfigError(f"{where}: spec.actions: unknown action {name!r}")
        if actions is None:
            priority = dict(zip(C.DEFAULT_ACTIONS, DEFAULT_ACTION_PRIORITIES, strict=True))
            for name, spec in shard.actions.items():
                for key in spec:
                    if key not in ("enabled", "priority"):
                        raise ConfigError(
                            f"{where}: spec.actions.{name}.{key}: unknown field (expected enabled, priority)"
                        )
                enabled = spec.get("enabled", True)
                if not isinstance(enabled, bool):
                    raise ConfigError(f"{where}: spec.actions.{name}.enabled: {enabled!r} is not true or false")
                if not enabled and name in chosen:
                    chosen.remove(name)
                if "priority" in spec:
                    value = spec["priority"]
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise ConfigError(f"{where}: spec.actions.{name}.priority: {value!r} is not an integer")
                    priority[name] = value
            # KAI runs the actions by priority, higher first (its defaults give allocate .. stalegangeviction)
            chosen.sort(key=lambda a: -priority[a])
            # KAI disables consolidation when either placement strategy is spread.
            if "spread" in (shard.placement_gpu, shard.placement_cpu) and "consolidation" in chosen:
                chosen.remove("consolidation")
        stuck = shard.stuck_in_releasing_threshold
        if stuck is None or stuck <= 0:  # KAI keeps its default for a threshold that is not positive (pod_info)
            stuck = C.DEFAULT_STUCK_IN_RELEASING_S
        conf = cls(
            actions=tuple(chosen),
            queue_depth_per_action=tuple(sorted(shard.queue_depth_per_action.items())),
            stuck_in_releasing_threshold=stuck,
            **_eviction_settings(shard),
        )
        policy = shard.placement_gpu if shard.placement_gpu in GPU_POLICIES else ""
        conf = conf.with_placement(gpu="binpack" if policy else shard.placement_gpu, cpu=shard.placement_cpu)
        if policy:  # a policy's fallback is binpack
            conf = conf.with_plugin("gpupolicy", policy=policy)
            if "gpu-policy-seed" in shard.args:
                conf = conf.with_plugin("gpupolicy", seed=shard.args["gpu-policy-seed"])
        if shard.k_value != 1.0:
            conf = conf.with_plugin("proportion", kValue=shard.k_value)
        minrt = {}
        if shard.preempt_min_runtime is not None:
            minrt["defaultPreemptMinRuntime"] = shard.preempt_min_runtime
        if shard.reclaim_min_runtime is not None:
            minrt["defaultReclaimMinRuntime"] = shard.reclaim_min_runtime
        if minrt:
            conf = conf.with_plugin("minruntime", **minrt)
        return replace(conf, plugins=_merge_plugins(conf.plugins, shard, where))


def _merge_plugins(plugins: tuple[PluginSetting, ...], shard: SchedulingShard, where: str) -> tuple[PluginSetting, ...]:
    """``spec.plugins`` (name -> {enabled, priority, arguments}) over *plugins*, as KAI merges it over its defaults."""
    by_name = {p.name: p for p in plugins}
    for name, spec in shard.plugins.items():
        field = f"{where}: spec.plugins.{name}"
        if name not in by_name:
            known = ", ".join(n for n, _, _ in DEFAULT_PLUGINS)
            raise ConfigError(f"{field}: unknown plugin (known: {known})")
        for key in spec:
            if key not in ("enabled", "priority", "arguments"):
                raise ConfigError(f"{field}.{key}: unknown field (expected enabled, priority, arguments)")
        old = by_name[name]
        enabled = spec.get("enabled", old.enabled)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{field}.enabled: {enabled!r} is not true or false")
        priority = spec.get("priority", old.priority)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ConfigError(f"{field}.priority: {priority!r} is not an integer")
        arguments = spec.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ConfigError(f"{field}.arguments: expected a mapping")
        merged = {**dict(old.arguments), **{str(k): v for k, v in arguments.items()}}
        by_name[name] = PluginSetting(name, priority, enabled, tuple(sorted(merged.items())), field)
    return tuple(by_name[p.name] for p in plugins)


# kai's scheduler flags in ``spec.args`` (KAI keeps its scheduler's command-line flags there): flag -> (field, type)
SCHEDULER_ARGS: dict[str, tuple[str, type]] = {
    "max-consolidation-preemptees": ("max_consolidation_preemptees", int),
    "allow-consolidating-reclaim": ("allow_consolidating_reclaim", bool),
    "respect-pdbs": ("respect_pdbs", bool),
    "max-evictions-per-cycle": ("max_evictions_per_cycle", int),
    "max-scenarios-per-job": ("max_scenarios_per_job", int),
    "max-scenarios-per-action": ("max_scenarios_per_action", int),
    "staleness-grace-period": ("default_staleness_grace_period", float),  # a duration; negative: never evict
    "gpu-policy-seed": ("", int),  # the gpupolicy plugin's seed (read in from_shard)
}


def _eviction_settings(shard: SchedulingShard) -> dict[str, Any]:
    """kai's scheduler flags from ``spec.args``, each checked with the field named on error; an unknown flag
    is an error (it would otherwise do nothing)."""
    where = f"SchedulingShard/{shard.meta.name}"
    out: dict[str, Any] = {}
    for flag, value in shard.args.items():
        field = f"{where}: spec.args.{flag}"
        if flag not in SCHEDULER_ARGS:
            raise ConfigError(f"{field}: unknown flag (known: {', '.join(sorted(SCHEDULER_ARGS))})")
        name, kind = SCHEDULER_ARGS[flag]
        if kind is bool:
            text = str(value).lower()
            if text not in ("true", "false"):
                raise ConfigError(f"{field}: {value!r} is not true or false")
            parsed: Any = text == "true"
        elif flag == "staleness-grace-period":
            try:
                parsed = parse_duration(value)
            except ValueError:
                raise ConfigError(f"{field}: {value!r} is not a duration") from None
        else:
            try:
                parsed = int(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{field}: {value!r} is not an integer") from None
        if name:
            out[name] = parsed
    return out
