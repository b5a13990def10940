"""``kai explain``'s text: the explanation data (``_explain``) as lines a person reads.

Rules: a pure function of the data; ``-o json`` prints the same data, so nothing is said here that the
data does not hold.
"""

from __future__ import annotations

from typing import Any

from kai.explain._queue import one_line
from kai.scheduler.explain import fmt_amount

_RES = (("gpu", 0, 1000.0), ("cpu", 1, 1.0), ("memory", 2, 1.0))


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def amount(r: str, value: float, none: str = "none") -> str:
    """An API-unit amount (GPUs, millicores, bytes) for people; -1 is *none* (no limit, unlimited)."""
    if value == -1:
        return none
    col, scale = {"gpu": (0, 1000.0), "cpu": (1, 1.0), "memory": (2, 1.0)}[r]
    return fmt_amount(col, value * scale)


def _queue_line(n: dict[str, Any]) -> list[str]:
    lines = []
    for r, _, _ in _RES:
        lines.append(
            f"{r:>6}: quota {amount(r, n['quota'][r], 'unlimited')}, limit {amount(r, n['limit'][r])}, "
            f"fair share {amount(r, n['fairShare'][r])}, allocated {amount(r, n['allocated'][r])}, "
            f"requested {amount(r, n['requested'][r])}"
        )
    return lines


def render(doc: dict[str, Any]) -> str:
    kind = doc["kind"]
    if kind == "Queue":
        return render_queue(doc)
    if kind == "Pod":
        head = f"Pod {doc['namespace']}/{doc['name']}"
        if "notScheduled" in doc:
            return f"{head}: not scheduled by kai: {doc['notScheduled']}"
        where = f" on {doc['node']}" if doc.get("node") else ""
        return f"{head}: {doc['status']}{where}, PodGroup {doc['podGroup']}\n" + render_job(doc["job"])
    return render_job(doc)


def render_job(doc: dict[str, Any]) -> str:
    out = [
        f"PodGroup {doc['namespace']}/{doc['name']} (queue {doc['queue']}, priority {doc['priority']}, "
        f"{'preemptible' if doc['preemptible'] else 'non-preemptible'}, minMember {doc['minMember']})"
    ]
    state = doc["state"]
    placed = doc["placed"]
    total = len(doc["pods"])
    words = {
        "pending": f"waiting: {placed} of {total} pods placed, {doc['minMember']} needed",
        "placed": f"placed this cycle: {placed} of {total} pods bind or wait on releasing resources",
        "running": f"running: {placed} of {total} pods placed",
    }
    out.append(f"  State:  {words[state]}")
    for p in doc["pods"]:
        out.append(f"          {p['name']}: {p['status']}" + (f" on {p['node']}" if p.get("node") else ""))
    if "reason" in doc:  # the eviction actions' notes are listed below, under "Evictions tried"
        message = one_line(doc["reason"]["message"], 0) if doc.get("actions") else doc["reason"]["message"]
        out.append(f"  Why:    {doc['reason']['code']}: {message}")
    pos = doc.get("position")
    if pos:
        q = pos["inQueue"]
        parts = [f"{ordinal(q['rank'])} of {q['of']} waiting jobs in {q['queue']}"]
        for lv in pos["levels"]:
            where = f"under {lv['parent']}" if lv["parent"] else "at the top"
            flags = []
            if lv["starved"]:
                flags.append("starved")
            if lv["overUtilized"]:
                flags.append("over its fair share")
            flag = f", {' and '.join(flags)}" if flags else ""
            parts.append(
                f"{lv['queue']} is {ordinal(lv['rank'])} of {lv['of']} {where} "
                f"(DRF share {lv['dominantShare']:.2f}{flag})"
            )
        out.append("  Order:  " + "; ".join(parts))
    n = doc.get("queueNumbers")
    if n:
        standing = f" ({', '.join(n['standing'])})" if n["standing"] else ""
        out.append(f"  Queue {n['queue']}{standing}:")
        out += ["    " + line for line in _queue_line(n)]
    for shape in doc.get("missing", []):
        out.append(f"  Needs:  {shape['text']}")
        for c in shape["classes"]:
            short = f" -> short of {', '.join(c['short'])}" if c.get("short") else ""
            out.append(f"          {c['text']}{short}")
    if doc.get("actions"):
        out.append("  Evictions tried:")
        for action, text in doc["actions"].items():
            out.append(f"    {action}: {text}")
    w = doc.get("whatIf")
    if w:
        out.append("  What would make it run:")
        for key in ("blocked", "baseline"):
            if key in w:
                out.append(f"    {w[key]}")
        for t in w["tried"]:
            out.append(f"    {t['text']}")
        if "ending" in w:
            out.append(f"    {w['ending']['text']}")
    ev = doc.get("evictableBy")
    if ev:
        out.append("  Could be evicted by:")
        if "text" in ev:
            out.append(f"    {ev['text']}")
        if "preempt" in ev:
            p = ev["preempt"]
            waiting = f" (waiting now: {', '.join(p['pendingNow'])})" if p["pendingNow"] else " (none waiting now)"
            prot = f"; protected by min runtime until {_when(p['protectedUntil'])}" if p["protectedUntil"] else ""
            out.append(f"    preempt: {p['by']}{waiting}{prot}")
        if "reclaim" in ev:
            if not ev["reclaim"]:
                out.append(f"    reclaim: {ev.get('reclaimNote', 'no other queue may reclaim it')}")
            for r in ev["reclaim"]:
                prot = f"; protected by min runtime until {_when(r['protectedUntil'])}" if r["protectedUntil"] else ""
                if r["now"]:
                    out.append(f"    reclaim: a job of queue {r['queue']} may reclaim it now ({r['why']}){prot}")
                else:
                    out.append(
                        f"    reclaim: a job of queue {r['queue']} may reclaim it once that queue is below its fair "
                        f"share (now: {r['why']}){prot}"
                    )
        if "consolidation" in ev:
            out.append(f"    consolidation: {ev['consolidation']}")
    return "\n".join(out)


def _when(t: float) -> str:
    from kai.api.objects import format_time

    return format_time(t)


def render_queue(doc: dict[str, Any]) -> str:
    if "notScheduled" in doc:
        return f"Queue {doc['name']}: {doc['notScheduled']}"
    out = [f"Queue {doc['name']}"]
    for row in doc["tree"]:
        pad = "  " * (row["depth"] + 1)
        standing = f" ({', '.join(row['standing'])})" if row["standing"] else ""
        out.append(f"{pad}{row['queue']}{standing}")
        out += [pad + "  " + line for line in _queue_line(row)]
    if doc["pending"]:
        out.append(f"  Waiting jobs ({len(doc['pending'])}):")
        for p in doc["pending"]:
            out.append(f"    {p['podGroup']} ({p['queue']}): {p['reason']}")
    else:
        out.append("  No waiting jobs.")
    return "\n".join(out)
