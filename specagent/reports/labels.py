"""Labels beside a scatter's points that overlap no other label, no marker and no error bar, at every width the
report is read at.

Why: plotly places a point's text at a fixed side ("top center"); four strategies within a few
hundredths of each other (SpecAgent, its exact-step variant, the router, collab) printed their
names on top of each other and across each other's error bars. Plotly cannot move them, so the
labels are annotations placed here: each at the first of a ring of spots around its point that
is clear of everything already placed, checked in pixels at each plot width the page can give
the figure (a report is read from a phone-sized 800 px to 1280 px and more; pixel offsets stay
fixed while the data's pixels stretch with the width, so a spot clear at one width is checked
at the others). A label moved away from its point keeps a thin line to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

#: Pixels per character and per line of an 11 px label (Arial-like fonts run 0.5–0.6 em per character).
CHAR_PX = 6.6
LINE_PX = 15.0
#: Room kept around a label, a marker's radius and an error bar's half-thickness (caps included), in pixels.
PAD = 2.0
MARKER_R = 8.0
BAR_HALF = 4.0


@dataclass(frozen=True)
class Point:
    """One labelled point in data units, with its error bars' ends (None: no bar on that axis)."""

    x: float
    y: float
    text: str
    x_err: tuple[float, float] | None = None
    y_err: tuple[float, float] | None = None


@dataclass(frozen=True)
class Placement:
    """Where a label goes: its centre's offset from the point in pixels (x right, y down, as plotly's ax/ay)."""

    dx: float
    dy: float
    clear: bool  # False: no spot was clear at every width; this one overlaps least


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels, y down


def _overlap(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def label_size(text: str) -> tuple[float, float]:
    return len(text) * CHAR_PX + 2 * PAD, LINE_PX + 2 * PAD


def _candidates(w: float, h: float) -> list[tuple[float, float]]:
    """Offsets of a label's centre: the eight sides of the point, nearest first, then the same further out."""
    out = []
    for ring in (0.0, 14.0, 30.0, 50.0, 75.0):
        gx, gy = w / 2 + MARKER_R + ring, h / 2 + MARKER_R + ring
        out += [(0.0, -gy), (gx, 0.0), (0.0, gy), (-gx, 0.0),
                (gx * 0.8, -gy), (gx * 0.8, gy), (-gx * 0.8, gy), (-gx * 0.8, -gy)]
    return out


def place_labels(points: Sequence[Point], x_range: tuple[float, float], y_range: tuple[float, float],
                 widths: Sequence[float], height: float) -> list[Placement]:
    """One placement per point, for a plot area `height` pixels high and each of `widths` pixels wide (linear axes
    over `x_range` and `y_range`). Greedy, in the order given: each label takes the first spot clear of the markers,
    the error bars, the plot's edges and the labels already placed, at every width; else the least overlapped one."""
    placed: list[tuple[int, tuple[float, float, float, float]]] = []  # (point, (dx, dy, w, h)) of each label placed

    def px(width: float, x: float, y: float) -> tuple[float, float]:
        return ((x - x_range[0]) / (x_range[1] - x_range[0]) * width,
                (y_range[1] - y) / (y_range[1] - y_range[0]) * height)

    def obstacles(width: float) -> list[Box]:
        boxes = []
        for p in points:
            cx, cy = px(width, p.x, p.y)
            boxes.append((cx - MARKER_R, cy - MARKER_R, cx + MARKER_R, cy + MARKER_R))
            if p.x_err is not None:
                x0, _ = px(width, p.x_err[0], p.y)
                x1, _ = px(width, p.x_err[1], p.y)
                boxes.append((min(x0, x1) - 1, cy - BAR_HALF, max(x0, x1) + 1, cy + BAR_HALF))
            if p.y_err is not None:
                _, y0 = px(width, p.x, p.y_err[0])
                _, y1 = px(width, p.x, p.y_err[1])
                boxes.append((cx - BAR_HALF, min(y0, y1) - 1, cx + BAR_HALF, max(y0, y1) + 1))
        return boxes

    fixed = {width: obstacles(width) for width in widths}
    narrow = min(widths)

    def neighbours(i: int) -> int:
        ax, ay = px(narrow, points[i].x, points[i].y)
        return sum(1 for j, q in enumerate(points) if j != i and abs(px(narrow, q.x, q.y)[0] - ax) < 90
                   and abs(px(narrow, q.x, q.y)[1] - ay) < 40)

    order = sorted(range(len(points)), key=lambda i: -neighbours(i))  # the crowded first, while spots are free
    placed_at: dict[int, Placement] = {}
    for i in order:
        p = points[i]
        w, h = label_size(p.text)
        best: tuple[float, float, float] | None = None
        for dx, dy in _candidates(w, h):
            cost = 0.0
            for width in widths:
                cx, cy = px(width, p.x, p.y)
                box = (cx + dx - w / 2, cy + dy - h / 2, cx + dx + w / 2, cy + dy + h / 2)
                outside = max(0.0, -box[0]) + max(0.0, box[2] - width) + max(0.0, -box[1]) + max(0.0, box[3] - height)
                cost += outside * h + sum(_overlap(box, o) for o in fixed[width])
                for j, (odx, ody, ow, oh) in placed:
                    ox, oy = px(width, points[j].x, points[j].y)
                    cost += _overlap(box, (ox + odx - ow / 2, oy + ody - oh / 2, ox + odx + ow / 2, oy + ody + oh / 2))
            if best is None or cost < best[2]:
                best = (dx, dy, cost)
            if cost == 0.0:
                break
        assert best is not None
        placed.append((i, (best[0], best[1], w, h)))
        placed_at[i] = Placement(best[0], best[1], best[2] == 0.0)
    return [placed_at[i] for i in range(len(points))]
