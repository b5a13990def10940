"""The HTML report (``--report out.html``): one self-contained page from the metrics document.

Rules: a pure function of the metrics document. Everything is inline (CSS, SVG, one short script);
a Content-Security-Policy forbids every network load, so a page that tried one would show a console
error (the Chromium test checks there is none). The script only counts the plots that were laid out
(``data-plots-rendered`` on <html>), so a headless browser can tell the page rendered.
"""

from __future__ import annotations

from html import escape
from typing import Any

from kai.sim.timesim._metrics import bucket_means
from kai.sim.timesim._svg import TimeChart, bars, color, fmt_time, grid, legend

PLOT_BUCKETS = 480
WAIT_BINS = (0, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 57600)
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd}
.sub{color:#666;margin-bottom:14px} .cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:130px}
.card b{display:block;font-size:20px} .card span{color:#666;font-size:12px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f6f6f6} td:first-child,th:first-child{text-align:left} td.l{text-align:left}
svg text{font-size:11px;fill:#444} .legend{margin:4px 0 8px;font-size:12px}
.key{margin-right:14px;white-space:nowrap}
.key i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
.key b{display:inline-block;width:18px;margin-right:4px;border-top:2px dashed;vertical-align:3px}
.warn{background:#fff4e5;border:1px solid #f0b96b;padding:8px 12px;border-radius:6px}
.note{color:#666;font-size:12px} .maps{display:flex;flex-wrap:wrap;gap:18px} figure{margin:0}
figcaption{font-size:12px;color:#444;margin-bottom:2px}
"""

STYLE = _CSS  # the report's look, shared with the live dashboard (kai.dashboard)

_SCRIPT = """
window.addEventListener('load', function () {
  var n = 0;
  document.querySelectorAll('svg.plot').forEach(function (s) {
    var r = s.getBoundingClientRect();
    if (r.width > 0 && r.height > 0 && s.childElementCount > 0) { n += 1; }
  });
  document.documentElement.setAttribute('data-plots-rendered', String(n));
});
"""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _t(x: float | None) -> str:
    return "-" if x is None else fmt_time(x)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _table(header: list[str], rows: list[list[Any]], left: int = 1) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for r in rows:
        cells = "".join(
            f'<td class="l">{escape(str(v))}</td>' if i < left else f"<td>{escape(str(v))}</td>"
            for i, v in enumerate(r)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_report(doc: dict[str, Any]) -> str:
    """The whole page."""
    sim, summary, ts = doc["simulation"], doc["summary"], doc["timeseries"]
    queues = doc["queues"]
    leaves = [q["name"] for q in queues if q["leaf"]]
    fills = {name: color(i) for i, name in enumerate(leaves)}
    end = sim["end"] or (ts["time"][-1] if ts["time"] else 0.0)
    parts = [
        f"<h1>kai sim: {escape(sim['name'])}</h1>",
        f'<div class="sub">start {escape(sim["start"])} · simulated {fmt_time(end)} · schedule period '
        f"{_num(sim['schedulePeriod'])}s · seed {sim['seed']} · {sim['cycles']} cycles run</div>",
        _cards(summary),
        _warnings(summary, sim),
        "<h2>GPU allocation over time</h2>",
        _allocation_chart(ts, leaves, fills, end, doc["nodeEvents"]),
        "<h2>Per queue: allocated vs fair share</h2>",
        _share_charts(ts, queues, leaves, fills, end),
        "<h2>Wait time distribution</h2>",
        _wait_chart(doc["jobs"], leaves),
        "<h2>Node × GPU occupancy</h2>",
        _occupancy(doc["occupancy"], fills),
        "<h2>Fragmentation and pending jobs</h2>",
        _frag_chart(doc, end),
        "<h2>Queues</h2>",
        _queue_table(queues),
        "<h2>Evictions</h2>",
        _eviction_tables(summary, doc["evictions"]),
        "<h2>Failed placements</h2>",
        _failed_table(summary),
        _node_events(doc["nodeEvents"]),
        '<p class="note">Definitions: docs/simulation.md. Allocation counts what the scheduler allocated to queues '
        "over the capacity of Ready nodes; utilization also subtracts work lost to evictions and node failures "
        "(run time since the last checkpoint).</p>",
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>kai sim report: {escape(sim['name'])}</title><style>{_CSS}</style></head><body>"
        + "".join(parts)
        + f"<script>{_SCRIPT}</script></body></html>"
    )


def _cards(s: dict[str, Any]) -> str:
    w, c = s["waitSeconds"], s["completionSeconds"]
    j = s["jobs"]
    cards = [
        (f"{s['gpuCapacity']:g}", "GPUs (at the end)"),
        (_pct(s["allocation"]), "allocation"),
        (_pct(s["utilization"]), "utilization"),
        (f"{j['completed']} / {j['submitted']}", "jobs completed / submitted"),
        (f"{_t(w['p50'])} · {_t(w['p90'])} · {_t(w['p99'])}", "wait p50 · p90 · p99"),
        (f"{_t(c['p50'])} · {_t(c['p90'])}", "completion time p50 · p90"),
        (str(s["evictions"]["pods"]), "pods evicted"),
        (f"{s['lostGpuHours']:g}", "GPU-hours lost"),
        (_pct(s["fragmentation"]["mean"]), "fragmentation (mean)"),
    ]
    return (
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{escape(v)}</b><span>{k}</span></div>' for v, k in cards)
        + "</div>"
    )


def _warnings(s: dict[str, Any], sim: dict[str, Any]) -> str:
    items = [
        f"{escape(x['podGroup'])} ({escape(x['queue'])}) can never run: {escape(x['reason'])}" for x in s["cannotRun"]
    ]
    if sim.get("stalled"):
        items.append(
            f"the run stopped early: nothing could change any more while {len(s['stuck'])} job(s) waited "
            f"({escape(', '.join(s['stuck'][:10]))}{' ...' if len(s['stuck']) > 10 else ''})"
        )
    if not items:
        return ""
    return (
        '<div class="warn"><b>Cannot make progress</b><ul>'
        + "".join(f"<li>{i}</li>" for i in items[:50])
        + "</ul></div>"
    )


def _allocation_chart(ts: dict[str, Any], leaves: list[str], fills: dict[str, str], end: float, events: list) -> str:
    times = ts["time"]
    if not times:
        return "<p>No cycle ran.</p>"
    cap_t, cap = bucket_means(times, ts["capacityGpu"], end, PLOT_BUCKETS)
    chart = TimeChart(times[0], end, max(ts["capacityGpu"] + ts["allocatedGpu"] + [1.0]) * 1.05, y_label="GPUs")
    lower = [0.0] * len(cap_t)
    for name in leaves:
        bt, vals = bucket_means(times, ts["queues"][name]["allocatedGpu"], end, PLOT_BUCKETS)
        upper = [a + b for a, b in zip(lower, vals, strict=True)]
        chart.area(bt, lower, upper, fills[name], f"{name}: allocated GPUs")
        lower = upper
    chart.line(cap_t, cap, "#222", "capacity (GPUs of Ready nodes)")
    for e in events:
        chart.marker(e["time"], f"{fmt_time(e['time'])}: {e['action']} {e['node']}")
    return chart.render("GPU allocation over time, stacked by queue") + legend(
        [(n, fills[n]) for n in leaves], dashed=[("capacity", "#222")]
    )


def _share_charts(ts: dict[str, Any], queues: list[dict], leaves: list[str], fills: dict[str, str], end: float) -> str:
    times = ts["time"]
    if not times:
        return ""
    by_name = {q["name"]: q for q in queues}
    out = []
    for name in leaves:
        q = ts["queues"][name]
        bt, alloc = bucket_means(times, q["allocatedGpu"], end, PLOT_BUCKETS)
        _, fair = bucket_means(times, q["fairShareGpu"], end, PLOT_BUCKETS)
        quota = by_name[name]["quotaGpu"]
        top = max([*alloc, *fair, quota if quota > 0 else 0.0, 1.0]) * 1.1
        chart = TimeChart(times[0], end, top, height=180, y_label="GPUs")
        chart.area(bt, [0.0] * len(bt), alloc, fills[name], f"{name}: allocated GPUs")
        chart.line(bt, fair, "#222", f"{name}: fair share (GPUs)")
        if quota > 0:
            chart.line([times[0]], [quota], "#c00", f"{name}: quota {quota:g} GPUs", dash="5 4")
        svg = chart.render(f"{name}: allocated vs fair share")
        out.append(f"<figure><figcaption>{escape(name)}</figcaption>{svg}</figure>")
    return "".join(out) + legend([("allocated", "#888")], dashed=[("fair share", "#222"), ("quota", "#c00")])


def _wait_chart(jobs: list[dict], leaves: list[str]) -> str:
    labels = [f"<{fmt_time(b)}" for b in WAIT_BINS[1:]] + [f"≥{fmt_time(WAIT_BINS[-1])}", "waiting"]
    series = []
    for name in leaves:
        counts = [0] * len(labels)
        for j in jobs:
            if j["queue"] != name:
                continue
            w = j["waitSeconds"]
            if w is None:
                counts[-1] += 1
                continue
            k = next((i for i, b in enumerate(WAIT_BINS[1:]) if w < b), len(WAIT_BINS) - 1)
            counts[k] += 1
        series.append((name, counts))
    return (
        bars(labels, series, label="jobs by wait time and queue", y_label="jobs")
        + legend([(n, color(i)) for i, n in enumerate(leaves)])
        + '<p class="note">Wait: from arrival to the first bind. "waiting": not started by the end.</p>'
    )


def _occupancy(maps: list[dict], fills: dict[str, str]) -> str:
    if not maps:
        return "<p>No instant was chosen (occupancyAt).</p>"
    figs = []
    for m in maps:
        rows = [(n["name"], n["cells"], n["schedulable"]) for n in m["nodes"]]
        used = sum(1 for _, cells, _ in rows for c in cells if c is not None)
        total = sum(len(cells) for _, cells, _ in rows)
        svg = grid(rows, fills, label=f"node x GPU occupancy at {fmt_time(m['time'])}")
        figs.append(
            f"<figure><figcaption>at {fmt_time(m['time'])}: {used} / {total} GPUs held</figcaption>{svg}</figure>"
        )
    return (
        '<div class="maps">'
        + "".join(figs)
        + "</div>"
        + legend([*fills.items(), ("free", "#f4f4f4")])
        + '<p class="note">One row per node, one square per GPU, coloured by the queue of the pod holding it; '
        "a red node name is cordoned or not Ready.</p>"
    )


def _frag_chart(doc: dict[str, Any], end: float) -> str:
    samples, ts = doc["samples"], doc["timeseries"]
    out = []
    if samples["time"]:
        chart = TimeChart(samples["time"][0], end, 100, height=160, y_label="% of free GPUs")
        chart.line(samples["time"], [100 * f for f in samples["fragmentation"]], "#b07aa1", "fragmentation (%)")
        out.append(chart.render("fragmentation over time"))
    if ts["time"]:
        bt, pend = bucket_means(ts["time"], ts["pendingJobs"], end, PLOT_BUCKETS)
        chart = TimeChart(ts["time"][0], end, max([*pend, 1.0]) * 1.1, height=160, y_label="jobs")
        chart.line(bt, pend, "#e15759", "pending jobs (mean)")
        out.append(chart.render("pending jobs over time"))
    shapes = doc["summary"]["fragmentation"]["shapes"]
    shape_text = ", ".join(f"{s['gpus']:g} GPU × {s['pods']}" for s in shapes) or "none"
    return (
        "".join(out)
        + legend(
            [("fragmentation: free GPUs the typical pod shapes cannot use", "#b07aa1"), ("pending jobs", "#e15759")]
        )
        + f'<p class="note">Typical pod shapes (GPUs × pods submitted): {escape(shape_text)}.</p>'
    )


def _queue_table(queues: list[dict]) -> str:
    rows = []
    for q in queues:
        w, c, j = q["waitSeconds"], q["completionSeconds"], q["jobs"]
        rows.append(
            [
                q["name"],
                q["parent"] or "-",
                _num(q["quotaGpu"]),
                f"{q['meanAllocatedGpu']:.2f}",
                f"{q['meanFairShareGpu']:.2f}",
                f"{q['gpuHours']:g}",
                f"{j['completed']}/{j['submitted']}",
                _t(w["p50"]),
                _t(w["p90"]),
                _t(w["p99"]),
                _t(c["p50"]),
                _t(c["p90"]),
                q["evictions"],
            ]
        )
    return _table(
        [
            "queue",
            "parent",
            "quota",
            "mean allocated",
            "mean fair share",
            "GPU-hours",
            "jobs done",
            "wait p50",
            "wait p90",
            "wait p99",
            "JCT p50",
            "JCT p90",
            "pods evicted",
        ],
        rows,
        left=2,
    )


def _eviction_tables(s: dict[str, Any], evictions: list[dict]) -> str:
    ev = s["evictions"]
    if not ev["pods"]:
        return "<p>No pod was evicted.</p>"
    by = _table(
        ["action", "victim queue", "pods"],
        [[e["action"], e["queue"], e["pods"]] for e in ev["byActionAndQueue"]],
        left=2,
    )
    first = _table(
        ["time", "pod", "action", "reason"],
        [[fmt_time(e["time"]), e["pod"], e["action"], e["reason"]] for e in evictions[:40]],
        left=4,
    )
    more = f'<p class="note">The first 40 of {ev["pods"]} evictions; all are in --metrics and --csv.</p>'
    return by + first + more


def _failed_table(s: dict[str, Any]) -> str:
    fp = s["failedPlacements"]
    if not fp:
        return "<p>Every job was placed in the first cycle that saw it.</p>"
    rows = [[r, v["jobs"], v["jobCycles"], f"{v['pendingJobHours']:g}"] for r, v in fp.items()]
    return _table(["reason", "jobs", "job-cycles", "pending job-hours"], rows) + (
        '<p class="note">A failed placement is a cycle in which a pending job got no room; the reason is its '
        "PodGroup condition's.</p>"
    )


def _node_events(events: list[dict]) -> str:
    if not events:
        return ""
    rows = [[fmt_time(e["time"]), e["node"], e["action"], e["pods"], e["note"]] for e in events]
    return "<h2>Node events</h2>" + _table(["time", "node", "action", "pods stopped", "note"], rows, left=3)
