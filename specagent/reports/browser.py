"""Open a report in headless Chromium and check that every figure really rendered.

A report that is valid HTML can still show blank boxes (a JavaScript error, plotly.js
missing, a figure that failed to draw). This opens the file as a person would, with
every network request outside the file refused (the report must work offline), and
checks each <figure data-figure> holds a drawn plotly graph with traces. Used by the
browser test and available to anyone who wants to check a report by hand.
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
