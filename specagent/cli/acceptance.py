"""`specagent acceptance ...`: the acceptance and verdict model from evidence (logs, endpoints, published figures).

Each sub-command lives in its own module and registers itself on `app` here, so the group is one place
and the commands stay one idea each.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    help="The acceptance and verdict model from evidence: fit it to verdict logs, measure it on real "
         "endpoints, calibrate it to the published protocol figures (docs/verdict-log.md).",
    no_args_is_help=True)

from specagent.cli import acceptance_calibrate as _calibrate  # noqa: E402
from specagent.cli import acceptance_fit as _fit  # noqa: E402
from specagent.cli import acceptance_measure as _measure  # noqa: E402

app.command("fit")(_fit.fit)
app.command("calibrate")(_calibrate.acceptance_search)  # the acceptance search, under the name users know
app.command("measure")(_measure.measure)
