"""The timeline for people: each cycle as ``kubectl get pods -o wide`` would show it, then its decisions.

Rules: plain text, no colour and no terminal-width wrapping, so the output is the same on every machine
(the README shows it verbatim and a test compares the two). Pod statuses are kubectl's words; the
sim contract's (Binding, Pipelined, Releasing) stay in ``-o json``. Long reasons wrap at ``WIDTH``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from kai.sim.timeline import CycleRecord, PodState

WIDTH = 110
INDENT = "    "

# sim contract status → (kubectl STATUS, whether its containers are ready)
KUBECTL_STATUS = {
    "Pending": ("Pending", False),
    "Pipelined": ("Pending", False),  # kube-scheduler shows a held pod as Pending with a nominated node
    "Binding": ("ContainerCreating", False),
    "Running": ("Running", True),
    "Releasing": ("Terminating", True),
    "Succeeded": ("Completed", False),
    "Failed": ("Error", False),
}


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s}s" if s < 120 else f"{s // 60}m"


def namespaced(pods: Sequence[PodState]) -> bool:
    """Whether to show namespaces (kubectl -A), i.e. whether any pod is outside ``default``."""
    return any(p.namespace != "default" for p in pods)


def _pod_rows(pods: Sequence[PodState], now: float) -> list[list[str]]:
    header = ["NAME", "READY", "STATUS", "AGE", "NODE", "NOMINATED NODE"]
    rows = [["NAMESPACE", *header] if namespaced(pods) else header]
    for p in pods:
        status, ready = KUBECTL_STATUS.get(p.status, (p.status, False))
        node = p.node if p.status != "Pipelined" else None
        nominated = p.nominated_node or (p.node if p.status == "Pipelined" else None)
        row = [
            p.name,
            f"{p.containers if ready else 0}/{p.containers}",
            status,
            _age(now - p.created),
            node or "<none>",
            nominated or "<none>",
        ]
        rows.append([p.namespace, *row] if namespaced(pods) else row)
    return rows


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _wrapped(head: str, text: str) -> list[str]:
    return textwrap.wrap(
        f"{head}{text}", width=WIDTH, initial_indent=INDENT, subsequent_indent=INDENT + "    ", break_on_hyphens=False
    )


def render_record(record: CycleRecord, start: float) -> list[str]:
    """One cycle: a header with the files applied, the pods, one line per decision, and who waits why."""
    lines = [f"Cycle {record.cycle} (t+{record.time - start:g}s)"]
    if record.applied:
        lines.append(f"  applied: {', '.join(record.applied)}")
    if record.pods:
        lines += ["  " + line for line in _columns(_pod_rows(record.pods, record.time))]
    else:
        lines.append("  No pods.")
    # as kubectl without -A: names alone while everything is in the default namespace
    short = (lambda ref: ref.removeprefix("default/")) if not namespaced(record.pods) else (lambda ref: ref)
    width = max((len(d.type) for d in record.decisions), default=4)
    for d in record.decisions:
        where = f" -> {d.node}" if d.node and d.type != "evict" else ""
        action = f" ({d.action})" if d.action else ""
        lines += _wrapped(f"{d.type.ljust(width)}  {short(d.pod)}{where}{action}: ", d.reason)
    for w in record.waiting:
        lines += _wrapped(f"{'wait'.ljust(width)}  {short(w.pod_group)} {w.reason}: ", w.message)
    if not record.decisions and not record.waiting:
        lines.append(f"{INDENT}no decisions")
    return lines


def render_timeline(records: Sequence[CycleRecord]) -> str:
    """Every cycle, a blank line between two."""
    if not records:
        return ""
    start = records[0].time
    return "\n\n".join("\n".join(render_record(r, start)) for r in records)
