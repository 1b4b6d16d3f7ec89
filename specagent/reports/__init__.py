"""Reports: plotly figures, a self-contained HTML report, static images, for results of every kind.

The names below load their module (and plotly) on first use: `specagent predict --help` imports this package.
"""

from __future__ import annotations

from specagent.common.lazy_import import lazy_exports

_HOME = {"ReportData": "data", "ReportInputError": "data", "load_results": "data", "ReportResult": "html", "write_report": "html"}

__all__ = ["ReportData", "ReportInputError", "ReportResult", "load_results", "write_report"]


__getattr__ = lazy_exports(__name__, _HOME, globals())
