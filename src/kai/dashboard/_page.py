"""The dashboard page: one self-contained HTML document (inline CSS and script, no CDN: the cluster may
be offline) in the look of ``kai sim --report``. Its script asks its own origin for ``api/overview``
every few seconds and draws the queue tree, the waiting jobs (filterable by queue and namespace), the
node x GPU map, the evictions and the cycles' timings. Everything it shows comes from that one document.

Rules: the page is constant (no data inlined); the script writes text with ``textContent`` only, so no
name from the cluster is ever parsed as HTML. ``CSP`` is sent as a header by the server: the script may
fetch from its own origin and nowhere else.
"""

from __future__ import annotations

from importlib import resources

from kai.sim.timesim._report import STYLE
from kai.sim.timesim._svg import PALETTE

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
POLL_MS = 3000

_EXTRA_CSS = """
body{max-width:1200px} .bar{display:flex;gap:16px;align-items:center;flex-wrap:wrap}
.live{font-size:12px;padding:2px 8px;border-radius:10px;background:#e6f4ea;color:#1e6b34}
.live.stale{background:#fdecea;color:#a1281c}
select{font:inherit;font-size:13px} .q0{font-weight:600}
.map{display:flex;flex-direction:column;gap:2px;font-size:11px}
.node{display:flex;align-items:center;gap:4px} .node>span{width:150px;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap;color:#444} .gpu{width:18px;height:14px;border:1px solid #bbb;background:#fafafa;display:flex;
flex-direction:column-reverse;overflow:hidden} .gpu i{display:block;width:100%}
.gpu i.rel{opacity:.4} td.reason{text-align:left;max-width:560px;font-size:12px}
"""

_BODY = """
<div class="bar"><h1>kai dashboard</h1><span id="live" class="live">connecting</span></div>
<div class="sub" id="sub">read-only</div>
<div class="cards" id="cards"></div>
<h2>Queues: quota / fair share / allocated / requested</h2><div id="queues"></div>
<h2>GPU allocation over time</h2><div id="chart"></div>
<h2>Waiting jobs</h2>
<div class="bar"><label>queue <select id="fq"><option value="">all</option></select></label>
<label>namespace <select id="fn"><option value="">all</option></select></label></div>
<div id="pending"></div>
<h2>Node × GPU map</h2><div class="note">one box per GPU, filled by the share each pod holds, colored by queue;
faded: being released</div><div class="map" id="map"></div>
<h2>Recent evictions</h2><div id="evictions"></div>
<h2>Cycles</h2><div id="cycles"></div>
<p class="note">Read-only: this page and its one endpoint (api/overview) only read. Reasons are the scheduler's
own (kai explain prints the whole story of one job: docs/explain.md).</p>
"""


def page() -> str:
    script = (
        resources.files("kai.dashboard")
        .joinpath("dashboard.js")
        .read_text(encoding="utf-8")
        .replace("__PALETTE__", "[" + ",".join(f"'{c}'" for c in PALETTE) + "]")
        .replace("__POLL_MS__", str(POLL_MS))
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>kai dashboard</title>'
        f"<style>{STYLE}{_EXTRA_CSS}</style></head><body>{_BODY}<script>{script}</script></body></html>"
    )
