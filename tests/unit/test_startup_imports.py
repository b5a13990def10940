"""``kai scheduler``'s start-up path imports neither the engine (NumPy) nor the CEL package: the first requests
(the Lease, the informers' lists) go out before them, and a thread imports the engine while the API server
answers (kai.k8s._scheduler._preload_engine). Importing ``cel`` alone pulled in typer, rich and prompt_toolkit
(0.13 s); the engine with NumPy, through two imports made only for a type alias and one function, 0.06 s more;
lightkube (for its kubeconfig loader) with its clients and httpx2, 0.06-0.08 s (kai.k8s._kubeconfig reads it now).
Checked in a fresh interpreter, where nothing else has imported them."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numpy", "cel", "kai.scheduler.cycle", "kai.scheduler.snapshot", "prompt_toolkit", "lightkube", "httpx2")


def test_the_scheduler_process_starts_without_the_engine_or_cel() -> None:
    code = (
        "import json, sys\n"
        "import kai.cli, kai.k8s._leader, kai.k8s._scheduler, kai.k8s._shard\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
