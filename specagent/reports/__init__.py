"""Reports: plotly figures, a self-contained HTML report, static images, for results of every kind."""

from specagent.reports.data import ReportData, ReportInputError, load_results
from specagent.reports.html import ReportResult, write_report

__all__ = ["ReportData", "ReportInputError", "ReportResult", "load_results", "write_report"]
