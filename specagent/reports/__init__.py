"""Reports: plotly figures, a self-contained HTML report, static images, for results of every kind.

The names below load their module (and plotly) on first use: `specagent predict --help` imports this package.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {"ReportData": "data", "ReportInputError": "data", "load_results": "data", "ReportResult": "html", "write_report": "html"}

__all__ = ["ReportData", "ReportInputError", "ReportResult", "load_results", "write_report"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
