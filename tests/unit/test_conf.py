"""Scheduler configuration (kai.scheduler.conf): a SchedulingShard becomes a SchedulerConf as KAI's operator makes it
(actions by priority, placementStrategy and kValue and minRuntime as plugin arguments, spec.plugins merged over
the defaults, kai's flags in spec.args), and every bad value stops start-up with a ConfigError naming the field."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from kai.api.manifests import load_manifests
from kai.api.objects import SchedulingShard
from kai.scheduler.conf import ConfigError, SchedulerConf
from kai.scheduler.plugins import check_conf, make_plugins


def shard(spec: str) -> SchedulingShard:
    text = "apiVersion: kai.scheduler/v1\nkind: SchedulingShard\nmetadata: {name: default}\nspec:\n"
    text += textwrap.indent(textwrap.dedent(spec), "  ")
    objects, _ = load_manifests([("shard.yaml", text)])
    got = objects[0][1]
    assert isinstance(got, SchedulingShard)
    return got


def enabled(conf: SchedulerConf) -> dict[str, dict[str, Any]]:
    """Enabled plugin -> its arguments (as the plugin parsed them)."""
    return {p.name: dict(p.args) for p in make_plugins(check_conf(conf))}


# --- SchedulerConf's own checks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"actions": ("allocate", "backfill")}, "unknown action 'backfill'"),
        ({"max_scenarios_per_job": 0}, "maxScenariosPerJob must be >= 1, got 0"),
        ({"max_scenarios_per_action": -1}, "maxScenariosPerAction must be >= 1, got -1"),
        ({"queue_depth_per_action": (("alocate", 3),)}, "queueDepthPerAction: unknown action 'alocate'"),
    ],
)
def test_bad_settings_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SchedulerConf(**fields)


def test_queue_depth_per_action() -> None:
    conf = SchedulerConf(queue_depth_per_action=(("reclaim", 3),))
    assert (conf.queue_depth("reclaim"), conf.queue_depth("allocate")) == (3, None)


def test_with_plugin_merges_arguments_and_refuses_unknown_names() -> None:
    conf = SchedulerConf().with_plugin("nodeplacement", gpu="spread").with_plugin("nodeplacement", cpu="spread")
    assert enabled(conf)["nodeplacement"] == {"gpu": "spread", "cpu": "spread"}
    assert "gpuspread" not in enabled(conf)  # nodeplacement alone: the GPU order plugins are as they were
    with pytest.raises(ConfigError, match="unknown plugin 'gpu-pack'"):
        SchedulerConf().with_plugin("gpu-pack")


@pytest.mark.parametrize(
    ("gpu", "on", "off"),
    [
        ("binpack", {"gpupack", "gpusharingorder"}, {"gpuspread"}),
        ("spread", {"gpuspread"}, {"gpupack", "gpusharingorder"}),
    ],
)
def test_with_placement_switches_the_gpu_plugins(gpu: str, on: set[str], off: set[str]) -> None:
    got = enabled(SchedulerConf().with_placement(gpu=gpu, cpu="spread"))
    assert on <= set(got) and not off & set(got)
    assert got["nodeplacement"] == {"gpu": gpu, "cpu": "spread"}


# --- from a SchedulingShard ------------------------------------------------------------------------------------


def test_no_shard_is_kai_defaults() -> None:
    assert SchedulerConf.from_shard(None) == SchedulerConf()
    assert SchedulerConf.from_shard(None, ("allocate",)).actions == ("allocate",)


@pytest.mark.parametrize(
    ("spec", "actions"),
    [
        ("{}", ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")),
        (
            "actions: {allocate: {priority: 50}}",
            ("consolidation", "reclaim", "preempt", "stalegangeviction", "allocate"),
        ),
        (
            "actions: {reclaim: {enabled: false}, stalegangeviction: {enabled: false}}",
            ("allocate", "consolidation", "preempt"),
        ),
        (
            "placementStrategy: {gpu: spread}",
            ("allocate", "reclaim", "preempt", "stalegangeviction"),
        ),  # KAI: no consolidation
        ("placementStrategy: {cpu: spread}", ("allocate", "reclaim", "preempt", "stalegangeviction")),
    ],
)
def test_actions_from_a_shard(spec: str, actions: tuple[str, ...]) -> None:
    assert SchedulerConf.from_shard(shard(spec)).actions == actions


def test_command_line_actions_win_but_the_shard_is_still_checked() -> None:
    assert SchedulerConf.from_shard(shard("actions: {reclaim: {enabled: false}}"), ("reclaim",)).actions == ("reclaim",)
    with pytest.raises(ConfigError, match=r"SchedulingShard/default: spec\.actions: unknown action 'relcaim'"):
        SchedulerConf.from_shard(shard("actions: {relcaim: {enabled: false}}"), ("allocate",))


def test_shard_settings_become_plugin_arguments() -> None:
    conf = SchedulerConf.from_shard(
        shard(
            """
            placementStrategy: {gpu: spread, cpu: spread}
            kValue: 0.5
            minRuntime: {reclaimMinRuntime: 2m}
            plugins:
              proportion: {arguments: {relcaimerSaturationMultiplier: "1.5"}}
              minruntime: {arguments: {reclaimResolveMethod: queue}}
              gpusharingorder: {enabled: true}
            """
        )
    )
    got = enabled(conf)
    assert got["nodeplacement"] == {"gpu": "spread", "cpu": "spread"}
    assert "gpuspread" in got and "gpupack" not in got
    assert got["gpusharingorder"] == {}  # spec.plugins wins over what placementStrategy switched off
    assert got["proportion"] == {"kValue": 0.5, "relcaimerSaturationMultiplier": 1.5}
    assert got["minruntime"] == {
        "defaultPreemptMinRuntime": 0.0,
        "defaultReclaimMinRuntime": 120.0,
        "reclaimResolveMethod": "queue",
    }


def test_a_gpu_policy_as_placement_strategy() -> None:
    got = enabled(SchedulerConf.from_shard(shard("placementStrategy: {gpu: fgd}\nargs: {gpu-policy-seed: '7'}")))
    assert got["nodeplacement"]["gpu"] == "binpack"  # a policy's fallback
    assert got["gpupolicy"]["policy"] == "fgd" and int(got["gpupolicy"]["seed"]) == 7


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        ("{max-consolidation-preemptees: '0'}", "max_consolidation_preemptees", 0),
        ("{allow-consolidating-reclaim: 'false'}", "allow_consolidating_reclaim", False),
        ("{respect-pdbs: 'True'}", "respect_pdbs", True),
        ("{max-evictions-per-cycle: '10'}", "max_evictions_per_cycle", 10),
        ("{max-scenarios-per-job: '5'}", "max_scenarios_per_job", 5),
        ("{staleness-grace-period: 2m}", "default_staleness_grace_period", 120.0),
        ("{staleness-grace-period: -1s}", "default_staleness_grace_period", -1.0),  # negative: never evict
    ],
)
def test_flags_in_spec_args(args: str, field: str, value: Any) -> None:
    assert getattr(SchedulerConf.from_shard(shard(f"args: {args}")), field) == value


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("actions: {allocate: {enabled: 'no'}}", r"spec\.actions\.allocate\.enabled: 'no' is not true or false"),
        ("actions: {allocate: {priority: high}}", r"spec\.actions\.allocate\.priority: 'high' is not an integer"),
        ("actions: {allocate: {weight: 3}}", r"spec\.actions\.allocate\.weight: unknown field"),
        ("plugins: {proportional: {}}", r"spec\.plugins\.proportional: unknown plugin"),
        ("plugins: {proportion: {enabled: 1}}", r"spec\.plugins\.proportion\.enabled: 1 is not true or false"),
        ("plugins: {proportion: {priority: '9'}}", r"spec\.plugins\.proportion\.priority: '9' is not an integer"),
        ("plugins: {proportion: {arguments: [kValue]}}", r"spec\.plugins\.proportion\.arguments: expected a mapping"),
        ("plugins: {proportion: {args: {}}}", r"spec\.plugins\.proportion\.args: unknown field"),
        ("args: {max-evictions: '3'}", r"spec\.args\.max-evictions: unknown flag"),
        ("args: {respect-pdbs: 'yes'}", r"spec\.args\.respect-pdbs: 'yes' is not true or false"),
        ("args: {max-scenarios-per-job: many}", r"spec\.args\.max-scenarios-per-job: 'many' is not an integer"),
        ("args: {staleness-grace-period: soon}", r"spec\.args\.staleness-grace-period: 'soon' is not a duration"),
        ("args: {max-scenarios-per-job: '0'}", r"maxScenariosPerJob must be >= 1, got 0"),
    ],
)
def test_bad_shards_are_errors_naming_the_field(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SchedulerConf.from_shard(shard(spec))


def test_plugin_arguments_are_checked_when_the_plugins_are_made() -> None:
    conf = SchedulerConf.from_shard(shard("plugins: {proportion: {arguments: {kValue: '-1'}}}"))
    with pytest.raises(ConfigError, match=r"SchedulingShard/default: spec\.plugins\.proportion\.arguments\.kValue"):
        check_conf(conf)
