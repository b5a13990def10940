"""GPU placement policies: which node, and which GPUs on it, for one pod.

Pure and vectorized over nodes (and GPUs): a policy reads a ``FreeState`` (free CPU, memory and
per-GPU share of every node, node GPU models) and a ``PodRequest`` and returns a ``Placement`` or
None. No I/O; randomness only from the ``numpy.random.Generator`` passed in (tie-breaks).

Policies (``make_policy`` names): ``binpack`` kai's default (KAI's binpack + gpupack); the FGD
paper's baselines ``random``, ``dotprod``, ``gpuclustering``, ``gpupacking``, ``bestfit``; ``fgd``
(the paper's policy, target workload given up front); ``fragmentation``, kai's own
fragmentation-aware policy that learns the target workload from the pods it sees.
"""

from __future__ import annotations

from ._baselines import BestFit, DotProduct, GpuClustering, GpuPacking, RandomFit
from ._fgd import Fgd
from ._frag import FragModel, fragmentation
from ._kai import Fragmentation, KaiBinpack
from ._state import MILLI, N_TAGS, FreeState, GpuPolicy, Placement, PodRequest, feasible
from ._workload import ShapeCounter, TargetWorkload

__all__ = [
    "MILLI",
    "N_TAGS",
    "POLICY_NAMES",
    "BestFit",
    "DotProduct",
    "Fgd",
    "FragModel",
    "Fragmentation",
    "FreeState",
    "GpuClustering",
    "GpuPacking",
    "GpuPolicy",
    "KaiBinpack",
    "Placement",
    "PodRequest",
    "RandomFit",
    "ShapeCounter",
    "TargetWorkload",
    "canonical_name",
    "feasible",
    "fragmentation",
    "make_policy",
]

POLICY_NAMES = ("binpack", "random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "fragmentation")
_ALIASES = {"default": "binpack", "kai": "binpack", "best": "fragmentation", "dotproduct": "dotprod"}
BEST = "fragmentation"  # the policy kai recommends


def canonical_name(name: str) -> str:
    """The registry name for *name* (case-insensitive; ``default`` = binpack, ``best`` = kai's best)."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    key = _ALIASES.get(key, key)
    if key not in POLICY_NAMES:
        raise ValueError(f"unknown GPU placement policy {name!r} (known: {', '.join(POLICY_NAMES)}, default, best)")
    return key


def make_policy(name: str, *, n_models: int, target: TargetWorkload | None = None) -> GpuPolicy:
    """A fresh policy. ``fgd`` needs *target* (the workload it assumes); *n_models* is the number of
    GPU model ids in the FreeState (model ids are 0..n_models-1)."""
    key = canonical_name(name)
    if key == "fgd":
        if target is None:
            raise ValueError("the fgd policy needs a target workload")
        return Fgd(target, n_models)
    if key == "fragmentation":
        return Fragmentation(n_models)
    simple: dict[str, type[GpuPolicy]] = {
        "binpack": KaiBinpack,
        "random": RandomFit,
        "dotprod": DotProduct,
        "gpuclustering": GpuClustering,
        "gpupacking": GpuPacking,
        "bestfit": BestFit,
    }
    return simple[key]()
