"""Static PNG/SVG copies of the figures through kaleido, which drives a Chrome/Chromium.

Kaleido (v1) needs a browser on the machine. Where none is found the HTML report is
still written and the caller gets a message saying why there are no images and how to
get them, rather than an exception from deep inside kaleido.
"""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import plotly.graph_objects as go

from specagent.common import atomic

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FORMATS = ("png", "svg")
#: kaleido finds its browser through the process's $BROWSER_PATH, which an export sets for its render and restores:
#: two exports on two threads interleaving the set and the restore left a stale path behind for the whole process
#: (every later export and browser check then launched it), so the set-render-restore runs one thread at a time.
_BROWSER_ENV = threading.Lock()


def find_browser() -> str | None:
    """A Chrome/Chromium executable: $BROWSER_PATH (kaleido's own override) first, then PATH."""
    env = os.environ.get("BROWSER_PATH")
    if env and os.access(env, os.X_OK):
        return env
    for name in BROWSER_NAMES:
        p = shutil.which(name)
        if p:
            return p
    return None


@dataclass
class ImageExport:
    written: list[Path] = field(default_factory=list)
    message: str = ""
    failed: list[str] = field(default_factory=list)  # images kaleido did not render (their HTML figures are fine)

    @property
    def ok(self) -> bool:
        return bool(self.written)


def export_images(figures: Mapping[str, go.Figure], out_dir: str | Path, formats: Sequence[str] = FORMATS,
                  width: int = 1200, scale: float = 1.0) -> ImageExport:
    """Write each figure as <out_dir>/<name>.<fmt>; every file is written to a temp name, then renamed."""
    bad = [f for f in formats if f not in ("png", "svg", "pdf", "jpeg", "webp")]
    if bad:
        raise ValueError(f"unknown image format(s) {', '.join(bad)}; use png, svg, pdf, jpeg or webp")
    if not figures or not formats:
        return ImageExport(message="no figures to export")
    browser = find_browser()
    if browser is None:
        return ImageExport(message="static images not written: no Chrome/Chromium found (looked for $BROWSER_PATH and "
                                   f"{', '.join(BROWSER_NAMES)} on PATH); install one, e.g. Debian's `chromium` "
                                   "(tools/install-browser.sh), to get PNG/SVG copies. The HTML report does not need it.")
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return ImageExport(message="static images not written: the `kaleido` package is not installed (pip install kaleido)")

    out = Path(out_dir)
    figs, tmp_paths, final = [], [], []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in figures.items():
            for fmt in formats:
                dst = out / f"{name}.{fmt}"
                figs.append(fig)
                tmp_paths.append(atomic.temp_beside(dst, suffix=f".{fmt}"))  # kaleido reads the format from the suffix
                final.append(dst)
    except OSError as exc:  # the images are optional: the HTML is still written
        _remove(tmp_paths)
        return ImageExport(message=f"static images not written: {atomic.output_error(out, exc)}")
    with _BROWSER_ENV:
        return _render(figs, tmp_paths, final, out, browser, width, scale)


def _render(figs: list, tmp_paths: list[Path], final: list[Path], out: Path, browser: str, width: int,
            scale: float) -> ImageExport:
    """kaleido's render with $BROWSER_PATH set to `browser` for its duration (the caller holds _BROWSER_ENV)."""
    import plotly.io as pio

    old = os.environ.get("BROWSER_PATH")
    os.environ["BROWSER_PATH"] = browser
    try:
        heights = [int(f.layout.height or 500) for f in figs]
        # kaleido renders the figures concurrently; a render that fails or times out (a loaded machine) is *returned*,
        # not raised, after kaleido has deleted that figure's file: the cause of the intermittent
        # ".fig1.png.<hash>.png: No such file or directory". So every file is checked before its rename, below.
        pio.write_images(figs, tmp_paths, format=[p.suffix[1:] for p in tmp_paths], width=[width] * len(figs),
                         height=heights, scale=[scale] * len(figs))
    except Exception as exc:  # kaleido/choreographer raise many kinds; the HTML must still be written
        _remove(tmp_paths)
        return ImageExport(message=f"static images not written: kaleido failed with {browser}: {type(exc).__name__}: {exc}")
    finally:
        if old is None:
            os.environ.pop("BROWSER_PATH", None)
        else:
            os.environ["BROWSER_PATH"] = old
    return _publish(tmp_paths, final, out, browser)


def _publish(tmp_paths: Sequence[Path], final: Sequence[Path], out: Path, browser: str) -> ImageExport:
    """Rename each rendered temp file onto its name; a missing or empty one (kaleido's silent failure) is reported,
    never raised, and no temp file is ever left behind."""
    written, missing = [], []
    try:
        for tmp, dst in zip(tmp_paths, final):
            try:
                if tmp.stat().st_size == 0:
                    missing.append(dst.name)
                    continue
                os.replace(tmp, dst)
                written.append(dst)
            except OSError:
                missing.append(dst.name)
    finally:
        _remove(tmp_paths)
    msg = f"wrote {len(written)} static image(s) to {out} using {browser}"
    if missing:
        msg += (f"; {len(missing)} not rendered by kaleido ({', '.join(missing)}): the HTML has every figure; rerun for the "
                "PNG/SVG copies")
    return ImageExport(written=written, message=msg, failed=missing)


def _remove(paths: Sequence[Path]) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass
