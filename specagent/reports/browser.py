"""Open a report in headless Chromium and check that every figure really rendered, and reads.

A report that is valid HTML can still show blank boxes (a JavaScript error, plotly.js
missing, a figure that failed to draw), or draw labels a person cannot read: two labels on
top of each other, a label across an error bar or a marker, an axis title cut off at the
figure's edge, a subtitle under plotly's toolbar, a table cut at a narrow page. This opens
the file as a person would, at the width asked for, with every network request outside
the file refused (the report must work offline), checks each <figure data-figure> holds a
drawn plotly graph with traces, and measures every label's box in the page (`_LAYOUT`).
Used by the browser test and available to anyone who wants to check a report by hand.
Needs the `playwright` package and a system Chrome/Chromium (Debian's `chromium`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specagent.reports.static import find_browser

_PROBE = r"""
() => Array.from(document.querySelectorAll('figure[data-figure]')).map(f => {
  const gd = f.querySelector('.js-plotly-plot');
  const svg = gd ? gd.querySelectorAll('svg.main-svg').length : 0;
  const drawn = gd ? gd.querySelectorAll('g.trace, g.point, path.js-line, g.barlayer g.point').length : 0;
  const data = (gd && gd._fullData) ? gd._fullData.length : 0;
  const box = f.getBoundingClientRect();
  // axis titles as drawn, 'x: ...' / 'y: ...': plotly's text.xtitle, text.y2title, ... (empty ones are not titles)
  const titles = gd ? Array.from(gd.querySelectorAll('text')).filter(t => /^[xy]\d*title$/.test(t.getAttribute('class') || ''))
                        .filter(t => t.textContent.trim().length > 0).map(t => t.getAttribute('class')[0] + ': ' + t.textContent.trim()) : [];
  const axes = gd && gd._fullLayout ? Object.keys(gd._fullLayout).filter(k => /^[xy]axis\d*$/.test(k) && gd._fullLayout[k].visible !== false).length : 0;
  return {key: f.dataset.figure, graph: !!gd, svg: svg, drawn: drawn, traces: data, axis_titles: titles, axes: axes,
          width: Math.round(box.width), height: Math.round(box.height)};
})
"""

#: Every label a figure draws, measured as the browser laid it out: pairs that overlap (labels with labels, with error
#: bars, with markers), labels cut by the figure's edge, and title lines under the toolbar. Plotly lays text out in SVG
#: and never moves it to avoid another, so this is where a collision shows. Boxes meeting by less than MIN_PX in both
#: directions are not an overlap (glyph boxes include their ascent and descent).
_LAYOUT = r"""
(minPx) => Array.from(document.querySelectorAll('figure[data-figure]')).map(f => {
  const gd = f.querySelector('.js-plotly-plot');
  if (!gd) return {key: f.dataset.figure, overlaps: [], clipped: []};
  const root = gd.querySelector('svg.main-svg').getBoundingClientRect();
  const vis = e => { const s = getComputedStyle(e); return s.display !== 'none' && s.visibility !== 'hidden' && parseFloat(s.opacity || '1') > 0; };
  const box = e => { const b = e.getBoundingClientRect(); return {x0: b.left, y0: b.top, x1: b.right, y1: b.bottom}; };
  const kind = t => t.closest('.legend') ? 'legend' : t.closest('.g-gtitle') ? 'title' : t.closest('.annotation') ? 'annotation'
    : t.closest('.xtick, .ytick, [class*="xtick"], [class*="ytick"]') ? 'tick' : /title/.test(t.getAttribute('class') || '') ? 'axis title'
    : t.closest('.bartext, .textpoint, .point') ? 'value' : 'text';
  const texts = Array.from(gd.querySelectorAll('text')).filter(t => t.textContent.trim() && vis(t) && !t.closest('.hoverlayer'))
    .map(t => ({what: kind(t) + " '" + t.textContent.trim().slice(0, 40) + "'", b: box(t)})).filter(t => t.b.x1 > t.b.x0);
  const bars = Array.from(gd.querySelectorAll('g.errorbar path')).filter(vis).map(p => ({what: 'error bar', b: box(p)}))
    .filter(p => p.b.x1 - p.b.x0 + p.b.y1 - p.b.y0 > 2);
  const marks = Array.from(gd.querySelectorAll('.scatterlayer path.point')).filter(vis).map(p => ({what: 'marker', b: box(p)}));
  const hit = (a, b) => Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0) > minPx && Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0) > minPx;
  const overlaps = [];
  texts.forEach((a, i) => {
    texts.slice(i + 1).forEach(b => { if (hit(a.b, b.b)) overlaps.push(a.what + ' over ' + b.what); });
    bars.concat(marks).forEach(b => { if (hit(a.b, b.b)) overlaps.push(a.what + ' over a ' + b.what); });
  });
  const clipped = texts.filter(t => t.b.x0 < root.left - 1 || t.b.y0 < root.top - 1 || t.b.x1 > root.right + 1 || t.b.y1 > root.bottom + 1)
    .map(t => t.what + ' cut by the figure\'s edge');
  const mb = gd.querySelector('.modebar');
  if (mb) { const m = box(mb); texts.filter(t => t.what.startsWith('title') && hit(t.b, m)).forEach(t => clipped.push(t.what + ' under the toolbar')); }
  return {key: f.dataset.figure, overlaps: Array.from(new Set(overlaps)), clipped: clipped};
})
"""
#: Tables wider than the box they scroll in: cut at the page's width unless the reader scrolls sideways.
_CUT_TABLES = r"""
() => Array.from(document.querySelectorAll('div.scroll')).filter(d => !d.closest('details:not([open])'))
  .filter(d => d.clientWidth > 0 && d.scrollWidth > d.clientWidth + 1)
  .map(d => { const prev = d.previousElementSibling;
              return (prev ? prev.textContent.trim().slice(0, 60) : 'a table') + ': ' + d.scrollWidth + ' px in ' + d.clientWidth; })
"""
#: Below this many pixels of shared width and height, two boxes touch rather than overlap.
MIN_PX = 1.5

#: Where the reader's eye lands: the bounding box of the report's headline (the bottom line), if it has one.
_HEADLINE = """
() => { const h = document.querySelector('.headline') || document.querySelector('#bottom-line');
        if (!h) return null; const b = h.getBoundingClientRect();
        return {top: Math.round(b.top), bottom: Math.round(b.bottom), text: h.textContent.trim()}; }
"""


@dataclass
class BrowserCheck:
    figures: list[dict] = field(default_factory=list)
    js_errors: list[str] = field(default_factory=list)
    blocked_requests: list[str] = field(default_factory=list)
    screenshot: Path | None = None
    figure_shots: dict[str, Path] = field(default_factory=dict)
    browser: str = ""
    #: The headline's box at load, before any scrolling (None: the page has none), and the viewport's height.
    headline: dict | None = None
    viewport_height: int = 900
    #: Per figure key: labels overlapping each other, an error bar or a marker; labels cut or under the toolbar.
    overlaps: dict[str, list[str]] = field(default_factory=dict)
    clipped: dict[str, list[str]] = field(default_factory=dict)
    #: Tables cut at this width (wider than their box).
    cut_tables: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        out = [f"JavaScript error: {e}" for e in self.js_errors]
        out += [f"request outside the file (report must work offline): {u}" for u in self.blocked_requests]
        for f in self.figures:
            if not f["graph"] or f["svg"] == 0 or f["drawn"] == 0 or f["traces"] == 0:
                out.append(f"figure {f['key']} did not render (graph={f['graph']}, svg={f['svg']}, drawn={f['drawn']}, traces={f['traces']})")
            elif f["height"] < 200:
                out.append(f"figure {f['key']} is only {f['height']} px high")
        return out

    @property
    def unreadable(self) -> list[str]:
        """Every label that cannot be read as drawn, and every table cut at this width."""
        out = [f"figure {k}: {o}" for k, v in self.overlaps.items() for o in v]
        out += [f"figure {k}: {c}" for k, v in self.clipped.items() for c in v]
        return out + [f"table cut: {t}" for t in self.cut_tables]


def check_report(html_path: str | Path, screenshot: str | Path | None = None, figure_dir: str | Path | None = None,
                 executable: str | None = None, width: int = 1300, timeout_ms: int = 60000, height: int = 900) -> BrowserCheck:
    """Load the report, probe every figure, optionally save a full-page screenshot and one per figure."""
    from playwright.sync_api import sync_playwright

    exe = executable or find_browser()
    if exe is None:
        raise FileNotFoundError("no Chrome/Chromium found ($BROWSER_PATH or chromium on PATH); run tools/install-browser.sh")
    url = Path(html_path).resolve().as_uri()
    res = BrowserCheck(browser=exe, viewport_height=height)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("pageerror", lambda e: res.js_errors.append(str(e)))
            page.on("console", lambda m: res.js_errors.append(m.text) if m.type == "error" else None)

            def route(r):
                if r.request.url.startswith("file:") or r.request.url.startswith("data:"):
                    r.continue_()
                else:
                    res.blocked_requests.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.goto(url, wait_until="load", timeout=timeout_ms)
            if not page.evaluate("() => typeof Plotly !== 'undefined'"):
                res.js_errors.append("plotly.js is not loaded in the page")
            page.wait_for_timeout(500)  # let plotly finish layout of responsive figures
            res.figures = page.evaluate(_PROBE)
            res.headline = page.evaluate(_HEADLINE)
            for f in page.evaluate(_LAYOUT, MIN_PX):
                res.overlaps[f["key"]], res.clipped[f["key"]] = f["overlaps"], f["clipped"]
            res.cut_tables = page.evaluate(_CUT_TABLES)
            if screenshot:
                res.screenshot = Path(screenshot)
                res.screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(res.screenshot), full_page=True)
            if figure_dir:
                d = Path(figure_dir)
                d.mkdir(parents=True, exist_ok=True)
                for f in res.figures:
                    p = d / f"{f['key']}.png"
                    page.locator(f"figure[data-figure='{f['key']}']").screenshot(path=str(p))
                    res.figure_shots[f["key"]] = p
        finally:
            browser.close()
    return res
