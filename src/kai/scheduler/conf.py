"""Scheduler configuration: which actions run and the plugin arguments, validated up front.

KAI reads this from the SchedulingShard; bad values stop start-up (ConfigError)
rather than being logged and defaulted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai.api import constants as C
from kai.api.duration import parse_duration
from kai.api.objects import GPU_POLICIES, SchedulingShard

KNOWN_ACTIONS = C.DEFAULT_ACTIONS


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...] = C.DEFAULT_ACTIONS
    placement_gpu: str = "binpack"
    placement_cpu: str = "binpack"
    # kai: a GPU placement policy (kai.scheduler.gpupolicy) chooses the node and GPUs of each task that
    # fits on idle resources; "" = none. Everything else (pipelining, the fallback) is binpack's.
    gpu_policy: str = ""
    gpu_policy_seed: int = 0  # the random policy's generator seed (spec.args.gpu-policy-seed)
    k_value: float = 1.0
    queue_depth_per_action: tuple[tuple[str, int], ...] = ()
    default_staleness_grace_period: float = C.DEFAULT_STALENESS_GRACE_PERIOD_S
    # --- evictions (reclaim, preempt, consolidation) ---
    max_consolidation_preemptees: int = 16  # victims (pods) one consolidation may move; 0 turns it off
    saturation_multiplier: float = 1.0  # KAI's relcaimerSaturationMultiplier, >= 1
    allow_consolidating_reclaim: bool = True  # victims that are only moved do not count against the reclaimee
    default_preempt_min_runtime: float = 0.0  # seconds, when no queue up the tree sets preemptMinRuntime
    default_reclaim_min_runtime: float = 0.0
    reclaim_resolve_method: str = "lca"  # lca | queue: where the reclaim min-runtime walk starts
    respect_pdbs: bool = True  # kai: a victim set that would break a PodDisruptionBudget is rejected
    max_evictions_per_cycle: int = -1  # kai: cap on pods evicted (incl. moved) per cycle; -1 = none
    # Search budgets, counted in simulated victim scenarios (deterministic, unlike KAI's wall-clock budgets).
    max_scenarios_per_job: int = 64
    max_scenarios_per_action: int = 2000

    def __post_init__(self) -> None:
        for a in self.actions:
            if a not in KNOWN_ACTIONS:
                raise ConfigError(f"unknown action {a!r} (known: {', '.join(KNOWN_ACTIONS)})")
        for name, v in (("gpu", self.placement_gpu), ("cpu", self.placement_cpu)):
            if v not in ("binpack", "spread"):
                raise ConfigError(f"placementStrategy.{name}: {v!r} is not binpack or spread")
        if self.gpu_policy and self.gpu_policy not in GPU_POLICIES:
            accepted = ", ".join(("binpack", "spread", *GPU_POLICIES))
            raise ConfigError(f"placementStrategy.gpu: {self.gpu_policy!r} is not one of {accepted}")
        if self.k_value < 0:
            raise ConfigError(f"kValue must be >= 0, got {self.k_value}")
        if self.saturation_multiplier < 1:
            raise ConfigError(f"reclaimerSaturationMultiplier must be >= 1, got {self.saturation_multiplier}")
        if self.reclaim_resolve_method not in ("lca", "queue"):
            raise ConfigError(f"reclaimResolveMethod: {self.reclaim_resolve_method!r} is not lca or queue")
        for name, v in (
            ("defaultPreemptMinRuntime", self.default_preempt_min_runtime),
            ("defaultReclaimMinRuntime", self.default_reclaim_min_runtime),
        ):
            if v < 0:
                raise ConfigError(f"{name} must not be negative, got {v}")
        for name, n in (
            ("maxScenariosPerJob", self.max_scenarios_per_job),
            ("maxScenariosPerAction", self.max_scenarios_per_action),
        ):
            if n < 1:
                raise ConfigError(f"{name} must be >= 1, got {n}")

    def queue_depth(self, action: str) -> int | None:
        return dict(self.queue_depth_per_action).get(action)

    @classmethod
    def from_shard(cls, shard: SchedulingShard | None, actions: tuple[str, ...] | None = None) -> SchedulerConf:
        """The configuration a SchedulingShard asks for; *actions* (e.g. from ``--actions``) wins."""
        if shard is None:
            return cls(actions=actions or C.DEFAULT_ACTIONS)
        chosen = list(actions or C.DEFAULT_ACTIONS)
        for name in shard.actions:  # checked even when --actions overrides them: a typo is never ignored
            if name not in KNOWN_ACTIONS:
                raise ConfigError(f"SchedulingShard/{shard.meta.name}: spec.actions: unknown action {name!r}")
        if actions is None:
            for name, spec in shard.actions.items():
                if spec.get("enabled") is False and name in chosen:
                    chosen.remove(name)
            # KAI disables consolidation when either placement strategy is spread.
            if "spread" in (shard.placement_gpu, shard.placement_cpu) and "consolidation" in chosen:
                chosen.remove("consolidation")
        policy = shard.placement_gpu if shard.placement_gpu in GPU_POLICIES else ""
        return cls(
            actions=tuple(chosen),
            placement_gpu="binpack" if policy else shard.placement_gpu,  # a policy's fallback is binpack
            placement_cpu=shard.placement_cpu,
            gpu_policy=policy,
            k_value=shard.k_value,
            queue_depth_per_action=tuple(sorted(shard.queue_depth_per_action.items())),
            **_eviction_settings(shard),
        )


def _eviction_settings(shard: SchedulingShard) -> dict[str, Any]:
    """Eviction knobs from the places KAI keeps them (minRuntime, plugin arguments, scheduler flags in
    ``spec.args``), plus kai's own flags, each checked with the field named on error."""
    where = f"SchedulingShard/{shard.meta.name}"
    out: dict[str, Any] = {}

    def number(value: Any, field: str, kind: type = float) -> Any:
        try:
            v = kind(value)
        except (TypeError, ValueError):
            what = "a number" if kind is float else "an integer"
            raise ConfigError(f"{where}: {field}: {value!r} is not {what}") from None
        return v

    def duration(value: Any, field: str) -> float:
        try:
            v = parse_duration(value)
        except ValueError:
            raise ConfigError(f"{where}: {field}: {value!r} is not a duration") from None
        if v < 0:
            raise ConfigError(f"{where}: {field}: must not be negative")
        return v

    def boolean(value: Any, field: str) -> bool:
        text = str(value).lower()
        if text not in ("true", "false"):
            raise ConfigError(f"{where}: {field}: {value!r} is not true or false")
        return text == "true"

    if shard.preempt_min_runtime is not None:
        out["default_preempt_min_runtime"] = shard.preempt_min_runtime
    if shard.reclaim_min_runtime is not None:
        out["default_reclaim_min_runtime"] = shard.reclaim_min_runtime
    minrt = (shard.plugins.get("minruntime") or {}).get("arguments") or {}
    for key, name in (
        ("defaultPreemptMinRuntime", "default_preempt_min_runtime"),
        ("defaultReclaimMinRuntime", "default_reclaim_min_runtime"),
    ):
        if key in minrt:
            out[name] = duration(minrt[key], f"spec.plugins.minruntime.arguments.{key}")
    if "reclaimResolveMethod" in minrt:
        out["reclaim_resolve_method"] = str(minrt["reclaimResolveMethod"])
    prop = (shard.plugins.get("proportion") or {}).get("arguments") or {}
    for key in ("relcaimerSaturationMultiplier", "reclaimerSaturationMultiplier", "reclaimerUtilizationMultiplier"):
        if key in prop:
            field = f"spec.plugins.proportion.arguments.{key}"
            out["saturation_multiplier"] = value = number(prop[key], field)
            if not value >= 1:
                raise ConfigError(f"{where}: {field}: must be >= 1, got {prop[key]!r}")
    args = shard.args
    flags: tuple[tuple[str, str, Any], ...] = (
        ("max-consolidation-preemptees", "max_consolidation_preemptees", int),
        ("allow-consolidating-reclaim", "allow_consolidating_reclaim", bool),
        ("respect-pdbs", "respect_pdbs", bool),
        ("max-evictions-per-cycle", "max_evictions_per_cycle", int),
        ("max-scenarios-per-job", "max_scenarios_per_job", int),
        ("max-scenarios-per-action", "max_scenarios_per_action", int),
        ("gpu-policy-seed", "gpu_policy_seed", int),
    )
    for flag, name, kind in flags:
        if flag in args:
            field = f"spec.args.{flag}"
            out[name] = boolean(args[flag], field) if kind is bool else number(args[flag], field, kind)
    if "staleness-grace-period" in args:  # negative is allowed: never evict stale gangs
        try:
            out["default_staleness_grace_period"] = parse_duration(args["staleness-grace-period"])
        except ValueError:
            raise ConfigError(f"{where}: spec.args.staleness-grace-period: not a duration") from None
    return out
