"""The plugin layer: extension points (``_points``), the plugin base and contracts (``_plugin``), and the
per-Session composition (``_hooks``). The built-in plugins are ``kai.scheduler.plugins``; this package
knows none of them, so any module of the engine may depend on it.
"""

from kai.scheduler.framework._hooks import Hooks
from kai.scheduler.framework._plugin import (
    Arg,
    Choice,
    Contract,
    NodeRule,
    NodeVerdict,
    Plugin,
    QueueOrder,
    ScoreTerms,
    check_plugin,
    implements,
)
from kai.scheduler.framework._points import POINT_NAMES, POINTS, Combine, ExtensionPoint
from kai.scheduler.framework._rules import NO_RULES, NodeRules

__all__ = [
    "NO_RULES",
    "POINTS",
    "POINT_NAMES",
    "Arg",
    "Choice",
    "Combine",
    "Contract",
    "ExtensionPoint",
    "Hooks",
    "NodeRule",
    "NodeRules",
    "NodeVerdict",
    "Plugin",
    "QueueOrder",
    "ScoreTerms",
    "check_plugin",
    "implements",
]
