"""One time-based simulation from manifests to metrics: the function ``kai sim`` and the benchmark call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kai.api.manifests import ManifestObject
from kai.api.objects import format_time
from kai.sim.cluster import EmbeddedCluster, shard_conf
from kai.sim.timesim._config import SimulationSpec
from kai.sim.timesim._engine import RunResult, TimeSimulation
from kai.sim.timesim._metrics import Recorder
from kai.sim.timesim._setup import Overrides, Plan, plan
from kai.sim.timesim._sources import merge_arrivals

DEFAULT_START = 1735689600.0  # 2025-01-01T00:00:00Z: a fixed start, so two runs print the same document


@dataclass(slots=True)
class Outcome:
    plan: Plan
    cluster: EmbeddedCluster
    run: RunResult
    metrics: dict[str, Any]


def simulate(
    objects: list[tuple[str, ManifestObject]],
    spec: SimulationSpec | None,
    over: Overrides | None = None,
    *,
    actions: tuple[str, ...] | None = None,
    start: float = DEFAULT_START,
    progress: Callable[[float], None] | None = None,
) -> Outcome:
    """Run the simulation the input describes; ManifestError/ConfigError for bad input (before the first
    cycle, or naming the simulated time for an object that could only be checked when it arrived)."""
    p = plan(objects, spec, over or Overrides())
    cluster = EmbeddedCluster(now=start, strict_input=True)
    rec = Recorder(start, occupancy_at=p.params.occupancy_at, sample_every=p.params.sample_every)
    sim = TimeSimulation(
        cluster,
        lambda c: shard_conf(c, actions),
        merge_arrivals(p.sources),
        p.spec.node_events,
        p.params,
        rec,
        progress=progress,
    )
    run = sim.run()
    params = p.params
    simulation = {
        "name": p.spec.name,
        "start": format_time(start),
        "seed": p.spec.seed,
        "horizon": params.until,
        "schedulePeriod": params.period,
        "idleRecheck": params.idle_recheck,
        "checkpointInterval": params.checkpoint,
        "stalled": bool(run.stalled),
    }
    return Outcome(p, cluster, run, rec.document(simulation=simulation, stuck=run.stalled))
