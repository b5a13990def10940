"""The time-based simulator: a discrete-event loop around the real scheduling cycle, its workload
sources (manifests with ``kai.sim/arrival``, seeded generators, the Alibaba trace's pod shapes), metrics
and reports.

See docs/simulation.md. ``simulate`` runs one simulation; ``load_input`` splits the Simulation document
from the manifests.
"""

from kai.sim.timesim._config import SimulationSpec, parse_simulation
from kai.sim.timesim._engine import RunParams, RunResult, TimeSimulation
from kai.sim.timesim._metrics import Recorder
from kai.sim.timesim._run import DEFAULT_START, Outcome, simulate
from kai.sim.timesim._setup import Overrides, load_input, plan
from kai.sim.timesim._sources import Arrival, ManifestSource, WorkloadSource, merge_arrivals

__all__ = [
    "DEFAULT_START",
    "Arrival",
    "ManifestSource",
    "Outcome",
    "Overrides",
    "Recorder",
    "RunParams",
    "RunResult",
    "SimulationSpec",
    "TimeSimulation",
    "WorkloadSource",
    "load_input",
    "merge_arrivals",
    "parse_simulation",
    "plan",
    "simulate",
]
