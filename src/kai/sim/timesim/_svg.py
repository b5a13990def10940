"""Small inline-SVG charts for the HTML report: a time chart (stacked areas and lines), grouped bars,
and a cell grid. No external scripts, fonts or images: the page must render offline.

Rules: functions return SVG text; every text from data is escaped; coordinates are rounded to one
decimal to keep the page small. A chart's ``<title>`` elements give hover tooltips without script.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
_NICE_TIME = (60, 300, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def fmt_time(s: float) -> str:
    """Seconds as a short clock-free label: 45s, 12m, 3h, 3h30m, 2d4h."""
    s = round(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    d, rest = divmod(s, 86400)
    h, rest = divmod(rest, 3600)
    m = rest // 60
    if d:
        return f"{d}d{h}h" if h else f"{d}d"
    return f"{h}h{m:02d}m" if m else f"{h}h"


def _nice(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _n(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


class TimeChart:
    """A chart over simulated time: x in seconds, y in the data's unit."""

    def __init__(self, t0: float, t1: float, y_max: float, *, width: int = 900, height: int = 260, y_label: str = ""):
        self.t0, self.t1 = t0, max(t1, t0 + 1)
        self.y_max = y_max if y_max > 0 else 1.0
        self.w, self.h = width, height
        self.left, self.right, self.top, self.bottom = 52, 12, 12, 30
        self.y_label = y_label
        self.parts: list[str] = []

    def x(self, t: float) -> float:
        return self.left + (t - self.t0) / (self.t1 - self.t0) * (self.w - self.left - self.right)

    def y(self, v: float) -> float:
        return self.top + (1 - v / self.y_max) * (self.h - self.top - self.bottom)

    def area(self, ts: Sequence[float], lower: Sequence[float], upper: Sequence[float], fill: str, title: str) -> None:
        """The band between two step series (value i holds from ts[i] to ts[i+1])."""
        if not ts:
            return
        top, bottom = [], []
        for i, t in enumerate(ts):
            t_next = ts[i + 1] if i + 1 < len(ts) else self.t1
            top += [(self.x(t), self.y(upper[i])), (self.x(t_next), self.y(upper[i]))]
            bottom += [(self.x(t), self.y(lower[i])), (self.x(t_next), self.y(lower[i]))]
        pts = " ".join(f"{_n(a)},{_n(b)}" for a, b in [*top, *reversed(bottom)])
        self.parts.append(
            f'<polygon points="{pts}" fill="{fill}" fill-opacity="0.85"><title>{escape(title)}</title></polygon>'
        )

    def line(
        self, ts: Sequence[float], vs: Sequence[float], stroke: str, title: str, *, dash: str = "", step: bool = True
    ) -> None:
        if not ts:
            return
        pts = []
        for i, t in enumerate(ts):
            if step:
                t_next = ts[i + 1] if i + 1 < len(ts) else self.t1
                pts += [(self.x(t), self.y(vs[i])), (self.x(t_next), self.y(vs[i]))]
            else:
                pts.append((self.x(t), self.y(vs[i])))
        d = " ".join(f"{_n(a)},{_n(b)}" for a, b in pts)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<polyline points="{d}" fill="none" stroke="{stroke}" stroke-width="1.8"{dash_attr}>'
            f"<title>{escape(title)}</title></polyline>"
        )

    def marker(self, t: float, label: str) -> None:
        x = self.x(t)
        self.parts.append(
            f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{self.top}" y2="{self.h - self.bottom}" stroke="#888" '
            f'stroke-dasharray="2 3"><title>{escape(label)}</title></line>'
        )

    def render(self, label: str) -> str:
        axis = []
        inner_w = self.w - self.left - self.right
        step = min((n for n in _NICE_TIME if (self.t1 - self.t0) / n <= 8), default=_NICE_TIME[-1])
        t = math.ceil(self.t0 / step) * step
        while t <= self.t1 + 1e-9:
            x = self.x(t)
            axis.append(
                f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{self.top}" y2="{self.h - self.bottom}" stroke="#eee"/>'
                f'<text x="{_n(x)}" y="{self.h - 10}" text-anchor="middle">{fmt_time(t)}</text>'
            )
            t += step
        ystep = _nice(self.y_max, 5)
        v = 0.0
        while v <= self.y_max + 1e-9:
            y = self.y(v)
            axis.append(
                f'<line x1="{self.left}" x2="{self.left + inner_w}" y1="{_n(y)}" y2="{_n(y)}" stroke="#eee"/>'
                f'<text x="{self.left - 6}" y="{_n(y + 4)}" text-anchor="end">{_n(v)}</text>'
            )
            v += ystep
        mid = self.top + (self.h - self.top - self.bottom) / 2
        ylab = (
            f'<text x="12" y="{mid:.0f}" text-anchor="middle" '
            f'transform="rotate(-90 12 {mid:.0f})">{escape(self.y_label)}</text>'
        )
        frame = (
            f'<rect x="{self.left}" y="{self.top}" width="{inner_w}" height="{self.h - self.top - self.bottom}" '
            f'fill="none" stroke="#999"/>'
        )
        return (
            f'<svg class="plot" role="img" aria-label="{escape(label)}" viewBox="0 0 {self.w} {self.h}" '
            f'width="{self.w}" height="{self.h}" xmlns="http://www.w3.org/2000/svg">'
            + "".join(axis)
            + "".join(self.parts)
            + frame
            + ylab
            + "</svg>"
        )


def bars(
    groups: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], *, label: str, y_label: str, width: int = 900
) -> str:
    """Grouped bars: one group per label in *groups*, one bar per (name, values) series."""
    h, left, bottom, top = 240, 52, 40, 12
    y_max = max([v for _, vs in series for v in vs] + [1.0])
    ystep = _nice(y_max, 5)
    y_top = math.ceil(y_max / ystep) * ystep
    inner_w, inner_h = width - left - 12, h - top - bottom
    gw = inner_w / max(len(groups), 1)
    bw = gw * 0.8 / max(len(series), 1)
    parts = []
    v = 0.0
    while v <= y_top + 1e-9:
        y = top + (1 - v / y_top) * inner_h
        parts.append(
            f'<line x1="{left}" x2="{left + inner_w}" y1="{_n(y)}" y2="{_n(y)}" stroke="#eee"/>'
            f'<text x="{left - 6}" y="{_n(y + 4)}" text-anchor="end">{_n(v)}</text>'
        )
        v += ystep
    for gi, g in enumerate(groups):
        x0 = left + gi * gw + gw * 0.1
        parts.append(f'<text x="{_n(left + gi * gw + gw / 2)}" y="{h - 22}" text-anchor="middle">{escape(g)}</text>')
        for si, (name, vs) in enumerate(series):
            val = vs[gi]
            bh = val / y_top * inner_h
            parts.append(
                f'<rect x="{_n(x0 + si * bw)}" y="{_n(top + inner_h - bh)}" width="{_n(bw * 0.92)}" height="{_n(bh)}" '
                f'fill="{color(si)}"><title>{escape(name)}, {escape(g)}: {_n(val)}</title></rect>'
            )
    parts.append(f'<rect x="{left}" y="{top}" width="{inner_w}" height="{inner_h}" fill="none" stroke="#999"/>')
    parts.append(
        f'<text x="12" y="{top + inner_h / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + inner_h / 2:.0f})">{escape(y_label)}</text>'
    )
    return (
        f'<svg class="plot" role="img" aria-label="{escape(label)}" viewBox="0 0 {width} {h}" width="{width}" '
        f'height="{h}" xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>"
    )


def grid(rows: Sequence[tuple[str, Sequence[str | None], bool]], fills: dict[str, str], *, label: str) -> str:
    """A node x GPU map: one row per (node, cells, schedulable); a cell is a queue name or None (free)."""
    cell, gap, left = 14, 2, 90
    n_cols = max((len(c) for _, c, _ in rows), default=1)
    per_col = max(1, min(len(rows), 50))  # long clusters wrap into columns of 50 nodes
    blocks = math.ceil(len(rows) / per_col) if rows else 1
    block_w = left + n_cols * (cell + gap) + 16
    width = blocks * block_w
    height = per_col * (cell + gap) + 4
    parts = []
    for i, (name, cells, ok) in enumerate(rows):
        bx = (i // per_col) * block_w
        y = (i % per_col) * (cell + gap)
        style = "" if ok else ' fill="#b00"'
        parts.append(
            f'<text x="{bx + left - 6}" y="{y + cell - 3}" text-anchor="end" font-size="10"{style}>'
            f"{escape(name)}</text>"
        )
        for j, q in enumerate(cells):
            fill = fills.get(q, "#999") if q is not None else "#f4f4f4"
            tip = f"{name} GPU {j}: {q if q is not None else 'free'}"
            parts.append(
                f'<rect x="{bx + left + j * (cell + gap)}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" '
                f'stroke="#ccc"><title>{escape(tip)}</title></rect>'
            )
    return (
        f'<svg class="plot grid" role="img" aria-label="{escape(label)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>"
    )


def legend(items: Sequence[tuple[str, str]], *, dashed: Sequence[tuple[str, str]] = ()) -> str:
    """An HTML legend: colour swatches (and dashed line samples) with names."""
    out = [f'<span class="key"><i style="background:{c}"></i>{escape(n)}</span>' for n, c in items]
    out += [f'<span class="key"><b style="border-top-color:{c}"></b>{escape(n)}</span>' for n, c in dashed]
    return '<div class="legend">' + "".join(out) + "</div>"
