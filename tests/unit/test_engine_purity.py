"""The engine is a function: Snapshot -> Decisions.

Everything under ``kai.scheduler`` must compute its result from its arguments alone, so that:

* the same snapshot always gives the same decisions (scenario tests and ``kai sim`` are reproducible,
  and a decision can be explained after the fact by replaying its snapshot);
* the engine runs unchanged behind the embedded cluster, the Kubernetes backend and the benchmarks;
* a cycle never blocks on the network or a file, and never races a thread.

So no module of the engine may do I/O (sockets, HTTP, files, subprocesses, the OS), read the wall
clock or the calendar (``time``, ``datetime``: ``now`` arrives in the Snapshot), use global random
state, start threads or event loops, or reach back into the layers that sit *around* the engine
(``kai.sim``, ``kai.cli``, ``kai.k8s``). The single exception is ``from time import perf_counter``,
used only to measure how long the engine's own steps take, never to decide anything.

This test enforces that by parsing every module's imports and calls with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kai.scheduler

ENGINE_DIR = Path(kai.scheduler.__file__).parent
SRC_ROOT = ENGINE_DIR.parent.parent  # .../src

FORBIDDEN_MODULES = frozenset(
    {
        "socket",
        "http",
        "urllib",
        "requests",
        "asyncio",
        "threading",
        "subprocess",
        "random",
        "time",
        "datetime",
        "os",
        "io",
    }
)
FORBIDDEN_KAI = ("kai.sim", "kai.cli", "kai.k8s")
ALLOWED_FROM_IMPORTS = {("time", "perf_counter")}
DYNAMIC_IMPORTERS = {"__import__", "import_module"}


def engine_modules() -> list[Path]:
    return sorted(ENGINE_DIR.rglob("*.py"))


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC_ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_from(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module of ``from X import ...`` (relative imports resolved against *path*)."""
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def forbidden(module: str) -> bool:
    top = module.split(".")[0]
    if top in FORBIDDEN_MODULES:
        return True
    return any(module == k or module.startswith(k + ".") for k in FORBIDDEN_KAI)


def violations(path: Path, source: str | None = None) -> list[str]:
    """What in *path* (or in *source*, read as if it were *path*) breaks the engine's purity."""
    text = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(SRC_ROOT)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if forbidden(alias.name):
                    found.append(f"{where}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = resolve_from(path, node)
            for alias in node.names:
                if (module, alias.name) in ALLOWED_FROM_IMPORTS:
                    continue
                # ``from kai import sim`` imports the module kai.sim
                if forbidden(module) or forbidden(f"{module}.{alias.name}"):
                    found.append(f"{where}: from {module} import {alias.name}")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "open":
                found.append(f"{where}: calls open()")
            if name in DYNAMIC_IMPORTERS:
                found.append(f"{where}: imports dynamically with {name}()")
    return found


def test_engine_has_modules() -> None:
    names = {module_name(p) for p in engine_modules()}
    assert "kai.scheduler.session" in names
    assert "kai.scheduler.predicates" in names
    assert "kai.scheduler.cycle" in names
    assert any(n.startswith("kai.scheduler.actions.") for n in names)


@pytest.mark.parametrize("path", engine_modules(), ids=lambda p: str(p.relative_to(ENGINE_DIR)))
def test_engine_module_is_pure(path: Path) -> None:
    assert violations(path) == []


# --- the checker itself catches what it should ------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "import socket",
        "import os.path",
        "import time",
        "from time import sleep",
        "from time import perf_counter, time",
        "import datetime as dt",
        "from datetime import datetime",
        "from urllib.request import urlopen",
        "import http.client",
        "import random",
        "from random import Random",
        "import threading",
        "import subprocess",
        "import asyncio",
        "import io",
        "import requests",
        "from kai.sim.cluster import EmbeddedCluster",
        "from kai import sim",
        "from kai import cli",
        "import kai.k8s.client",
        "from ...sim import cluster",
        "with open('x') as f: pass",
        "import importlib\nimportlib.import_module('socket')",
        "__import__('os')",
    ],
)
def test_checker_catches(source: str) -> None:
    probe = ENGINE_DIR / "actions" / "_purity_probe.py"  # relative imports resolve as if it lived in the engine
    assert violations(probe, source), source


@pytest.mark.parametrize(
    "source",
    [
        "from time import perf_counter",
        "import numpy as np",
        "from kai.api.objects import Pod",
        "from kai.scheduler.model import TaskInfo",
        "from . import allocate",
        "from ..session import Session",
        "import math, heapq",
        "from dataclasses import dataclass",
        "from kai.api import constants as C",
    ],
)
def test_checker_allows(source: str) -> None:
    probe = ENGINE_DIR / "actions" / "_purity_probe.py"
    assert violations(probe, source) == []


def _from(source: str) -> ast.ImportFrom:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ImportFrom)
    return node


def test_relative_imports_resolve() -> None:
    probe = ENGINE_DIR / "actions" / "allocate.py"
    assert resolve_from(probe, _from("from ..session import Session")) == "kai.scheduler.session"
    assert resolve_from(probe, _from("from ...sim import cluster")) == "kai.sim"
    init = ENGINE_DIR / "actions" / "__init__.py"
    assert resolve_from(init, _from("from .allocate import Allocate")) == "kai.scheduler.actions.allocate"
