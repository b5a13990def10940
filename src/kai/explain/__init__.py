"""``kai explain``: why a job waits, when it would run, and what a queue looks like, from a dry run of the
pure engine on the cluster's state (files as ``kai sim`` reads them, or a live cluster).

Pure: the readers (files, API server) and printers live in ``kai.explain.command``.
"""

from kai.explain._engine import DryRun, dry_run
from kai.explain._explain import KINDS, NotFound, explain, run, split_ref
from kai.explain._render import render
from kai.explain._state import ClusterState

__all__ = ["KINDS", "ClusterState", "DryRun", "NotFound", "dry_run", "explain", "render", "run", "split_ref"]
