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

#: (extra flags, SHA-256 of the --json output, SHA-256 of the per-request rows' values from -o). Re-pinned when the current
#: engines' H20 term was fitted apart from SGLang 0.4's (issue 32: bandwidth@h20 0.3816 -> 0.5535; mean TPOT 24.64 -> 16.51 ms
#: chunked, 24.65 -> 16.51 ms max-concurrency, 12.70 -> 10.24 ms whole on 2 replicas; the old pins reproduce with main's profiles),
#: and again when a weight kernel's floor began to overlap its reads and the terms were refitted (issue 49: 16.51 -> 16.16 ms
#: chunked, 16.51 -> 16.17 ms max-concurrency, 10.24 -> 10.01 ms whole on 2 replicas), and when SGLang's Gated DeltaNet layer
#: was counted from SGLang's own decode path and the terms refitted (issue 49, second pass: per-kernel floor 3.778 -> 3.968 us;
#: 16.16 -> 17.14 ms chunked, 16.17 -> 17.15 ms max-concurrency, 10.01 -> 10.54 ms whole on 2 replicas), and when the dense
#: weight stream got its own rate and the terms were refitted (issue 49, third pass: 17.14 -> 17.09 ms chunked, 17.15 -> 17.08
#: ms max-concurrency, 10.54 -> 10.35 ms whole on 2 replicas).
#: The --json digests were re-pinned when the JSON took `vllm bench serve`'s result keys (issue 51: completed, duration,
#: total_input_tokens, mean_e2el_ms in ms, std_*_ms, p99 only by default): the rows' digests did not move, and every
#: figure of the old JSON equals its renamed one within 1e-12 (E2E x 1000), P95 now asked by --metric-percentiles 95,99,
#: but ITL's median and p99, which the engine's first-and-last-token records cannot give, now null (the mean is kept).
CASES = {
    "chunked": (["--chunk", "700", "--overlap", "150"],
                "3d1883ececc013cc97aed53acde97e53e1936de6d93b26781d1a03f590395a5e",
                "b338f937c49d9111f2f817df3bc92c1bf243ff6e6f0e2c6bc1f6efddf13aed1b"),
    "whole, 2 replicas, limits": (["--chunk", "0", "--replicas", "2", "--max-seqs", "64", "--max-tokens", "2048"],
                                  "1c0b95734c0820f1e8fba77266f32b146a58c6634a1be410284be671518cbc54",
                                  "6e1973893c3d39b8d2c3dfc13eb9743991366e926b5ba1f5c5788491cc8ddffb"),
    "max-concurrency": (["--chunk", "0", "--max-concurrency", "40"],
                        "2505a2607df4c581df5211de5761743a7ac7347761b77792976c5d01a8fb54c9",
                        "1d0815010553b17fb50f2f45dab558e184121312f945f445ac729885a357e044"),
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
