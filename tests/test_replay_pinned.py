"""`specagent replay`'s answers pinned on small fixed traces (issue #34: replay's start-up and result path were cut for
speed; the figures and every per-request row must stay the same bytes). A change of method updates the pins, and says
why in its commit."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specagent.cli import app
from specagent.traces.requests import save_requests, synthetic_requests

runner = CliRunner()

#: (extra flags, SHA-256 of the --json output, SHA-256 of the per-request rows' values from -o)
CASES = {
    "chunked": (["--chunk", "700", "--overlap", "150"],
                "83ef54779945d7e180be9cdbd3b0c8347de92dbdcf6e3b70b7b3b7a051eabcfc",
                "85db12be36adc9472daeddcc782ae7640658308a5d24e3131e2a776b1631939b"),
    "whole, 2 replicas, limits": (["--chunk", "0", "--replicas", "2", "--max-seqs", "64", "--max-tokens", "2048"],
                                  "9be2626da9fd93eb925c3ba77c33290147b760344f5171f4a021434c3b8d2c24",
                                  "3973f05c5ee738466386e9a6769f65e555ca15ad37ee3d4f535da10d8b69541d"),
    "max-concurrency": (["--chunk", "0", "--max-concurrency", "40"],
                        "491cf6464d0c30843e1ef7597d4c7e05c116edac0b656d6048f29b377b41ec55",
                        "3f52323480d2d5c2bef2f07f8024ca4bc2824020286242ad6844d5dc30d028cd"),
}


def _rows_digest(frame: pd.DataFrame) -> str:
    h = hashlib.sha256(",".join(frame.columns).encode())
    for c in frame.columns:
        h.update(np.ascontiguousarray(frame[c].to_numpy()).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("case", sorted(CASES))
def test_replay_output_is_pinned(case, tmp_path):
    flags, want_json, want_rows = CASES[case]
    csv = tmp_path / "r.csv"
    save_requests(csv, synthetic_requests(2000, 4.0, seed=11))
    out = tmp_path / "r.parquet"
    r = runner.invoke(app, ["replay", str(csv), "--json", "-o", str(out), *flags])
    assert r.exit_code == 0, r.output
    got_json = hashlib.sha256(r.output.encode()).hexdigest()
    got_rows = _rows_digest(pd.read_parquet(out))
    assert (got_json, got_rows) == (want_json, want_rows)
