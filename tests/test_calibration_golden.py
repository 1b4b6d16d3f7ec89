"""`acceptance calibrate`'s outputs are pinned bit for bit on a small seeded case.

The candidate sweep was rewritten for speed (issue 34: every candidate of a batch planned and
priced in one lockstep run instead of one run per candidate). This test holds it to what the
per-candidate loop wrote before the rewrite (captured from commit e3316f1 with
`specagent acceptance calibrate -n 8 --seed 0` on the shipped figures and scenarios): every
simulated figure value as a float's hex, and the SHA-256 of candidates.csv and summary.json as
written. Any optimisation that moves a single float fails here. A deliberate change to the
simulator, the published figures or the scenarios moves them too; then, after the other
calibration tests pass, regenerate with `python tests/test_calibration_golden.py` (which prints
the new pins).
"""

from __future__ import annotations

import csv
import hashlib
import io
import sys
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from specagent.cli import app

ARGS = ["acceptance", "calibrate", "-n", "8", "--seed", "0"]


def run_case(out: Path) -> dict:
    r = CliRunner().invoke(app, [*ARGS, "-o", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    csv_bytes, json_bytes = (out / "candidates.csv").read_bytes(), (out / "summary.json").read_bytes()
    rows = list(csv.DictReader(io.StringIO(csv_bytes.decode("utf-8"))))
    first = list(rows[0])
    values_from = first.index("repair_reasoning_tokens") + 1  # after the parameters: the simulated figure values
    cols = [c for c in first[values_from:] if not c.startswith("meets_")]
    return {
        "values": {c: [float(r[c]).hex() for r in rows] for c in cols},
        "candidates.csv": hashlib.sha256(csv_bytes).hexdigest(),
        "summary.json": hashlib.sha256(json_bytes).hexdigest(),
    }


def test_calibrate_outputs_are_unchanged(tmp_path):
    got = run_case(tmp_path / "cal")
    assert list(got["values"]) == list(GOLDEN["values"])
    for col, pinned in GOLDEN["values"].items():  # the first moved figure named, before the digests
        assert got["values"][col] == pinned, col
    assert got["candidates.csv"] == GOLDEN["candidates.csv"]
    assert got["summary.json"] == GOLDEN["summary.json"]


GOLDEN: dict = {'values': {'tau2_memory_ratio': ['0x1.6a199c2244a38p+0',
                                  '0x1.fcbc67410db3bp-1',
                                  '0x1.605b7e963034ep-1',
                                  '0x1.f255c87da81bep-1',
                                  '0x1.214654951273ep+0',
                                  '0x1.6b1fa5af037b2p-1',
                                  '0x1.72925491c0c8bp-1',
                                  '0x1.def136572d9ecp-1'],
            'tau2_strong_share': ['0x1.2ce518e108366p-1',
                                  '0x1.1abfa200241c4p-1',
                                  '0x1.d95f736a0f71dp-2',
                                  '0x1.1296e4694ba96p-2',
                                  '0x1.46bf784b75e61p-2',
                                  '0x1.b2392eda29a1fp-1',
                                  '0x1.485dffb0a8633p-1',
                                  '0x1.37977bfba6707p-4'],
            'tau2_weak_share': ['0x1.a635ce3def934p-2',
                                '0x1.ca80bbffb7c78p-2',
                                '0x1.1350464af8472p-1',
                                '0x1.76b48dcb5a2b5p-1',
                                '0x1.5ca043da450d0p-1',
                                '0x1.371b449759783p-3',
                                '0x1.6f44009eaf39bp-2',
                                '0x1.d90d10808b31fp-1'],
            'tau2_wall_ratio': ['0x1.cecb3ba212ccep+0',
                                '0x1.4c5b19d2e4552p+0',
                                '0x1.e34943b5be646p-1',
                                '0x1.6e1770835e382p+0',
                                '0x1.9f7ffe6cdc612p+0',
                                '0x1.a1b4550b16501p-1',
                                '0x1.d5c5ba66d910cp-1',
                                '0x1.7a487a8c7ed32p+0'],
            'tau2_flops_ratio': ['0x1.09915db5f59e3p+1',
                                 '0x1.89ccf09a91214p+0',
                                 '0x1.792334060d19ep+0',
                                 '0x1.a9b82ac4479ddp+0',
                                 '0x1.c4044dba3771bp+0',
                                 '0x1.aa4bfc8871922p+0',
                                 '0x1.d1be576173bd0p+0',
                                 '0x1.8fe075ef44c13p+0'],
            'predictor_error': ['0x1.1ca9ad3309200p-9',
                                '0x1.3dd9f28f6ac00p-9',
                                '0x1.7c035331b5d80p-8',
                                '0x1.a0a0e2e7d0600p-8',
                                '0x1.3437909628a40p-8',
                                '0x1.424e2c567d000p-11',
                                '0x1.4d5da68495680p-8',
                                '0x1.22b5e18109ef0p-7'],
            'retail_exact_flops': ['0x1.11a5e775fcac4p+0',
                                   '0x1.0a7ec43da836ep+0',
                                   '0x1.0d6dbbdf2e22dp+0',
                                   '0x1.6bb8e411dfea5p+0',
                                   '0x1.248987857460ap+0',
                                   '0x1.0fbe48d445c8fp+0',
                                   '0x1.1064f7dc56d00p+0',
                                   '0x1.545633364c8eep+0'],
            'review_replies_calls': ['0x1.4eea4e1a08ad9p+2',
                                     '0x1.680c907da4e87p+2',
                                     '0x1.630a02dc3eed7p+2',
                                     '0x1.590b21642c859p+2',
                                     '0x1.4d673445b2430p+2',
                                     '0x1.636db6db6db6ep+2',
                                     '0x1.58e38e38e38e4p+2',
                                     '0x1.53018d3018d30p+2'],
            'review_every_chunk_calls': ['0x1.6a08ad8f2fba9p+2',
                                         '0x1.83ed274388a35p+2',
                                         '0x1.805b87ddad0cep+2',
                                         '0x1.69642c8590b21p+2',
                                         '0x1.5fd51c25875f3p+2',
                                         '0x1.8524924924925p+2',
                                         '0x1.7a4fa4fa4fa50p+2',
                                         '0x1.615b8a15b8a16p+2'],
            'review_replies_wall': ['0x1.6114654d0eaecp+2',
                                    '0x1.080d017db558fp+2',
                                    '0x1.126543d764f9bp+1',
                                    '0x1.4decb09df2dd7p+1',
                                    '0x1.607e60b402515p+1',
                                    '0x1.ce4a5c26a7713p+1',
                                    '0x1.72f76654cf567p+1',
                                    '0x1.d08501f3a03adp+0'],
            'review_every_chunk_wall': ['0x1.7c347e3bd69dap+2',
                                        '0x1.1d222c0acccc7p+2',
                                        '0x1.2ae64e26fd229p+1',
                                        '0x1.5a6596e7489e2p+1',
                                        '0x1.70ed02f5c3106p+1',
                                        '0x1.f8e1cc53df065p+1',
                                        '0x1.93fc66fb7e32dp+1',
                                        '0x1.dbbf0865bfe1ep+0'],
            'tau2_below_strong_bytes': ['0x1.6a199c2244a38p+0',
                                        '0x1.fcbc67410db3bp-1',
                                        '0x1.605b7e963034ep-1',
                                        '0x1.f255c87da81bep-1',
                                        '0x1.214654951273ep+0',
                                        '0x1.6b1fa5af037b2p-1',
                                        '0x1.72925491c0c8bp-1',
                                        '0x1.def136572d9ecp-1'],
            'tau2_below_strong_wall': ['0x1.cecb3ba212ccep+0',
                                       '0x1.4c5b19d2e4552p+0',
                                       '0x1.e34943b5be646p-1',
                                       '0x1.6e1770835e382p+0',
                                       '0x1.9f7ffe6cdc612p+0',
                                       '0x1.a1b4550b16501p-1',
                                       '0x1.d5c5ba66d910cp-1',
                                       '0x1.7a487a8c7ed32p+0'],
            'mcp_strong_decode': ['0x1.a721c6e33a816p+0',
                                  '0x1.3a07d20b364dfp+0',
                                  '0x1.2f5fc099e0e5fp-1',
                                  '0x1.2951435d4fcbdp-1',
                                  '0x1.3575b50f2cb18p-1',
                                  '0x1.6379d8a4a325bp+0',
                                  '0x1.ebd965f84c46ep-1',
                                  '0x1.0c7eca14b2c23p-3'],
            'mcp_api_cost': ['0x1.450cf53934b78p+0',
                             '0x1.13489e42aa449p+0',
                             '0x1.4df76626f7cafp-1',
                             '0x1.1cb1f58415159p-1',
                             '0x1.345bf62e5eacap-1',
                             '0x1.263250f6f0e24p+0',
                             '0x1.a1880e61550c4p-1',
                             '0x1.344434183c4a3p-2'],
            'mcp_api_cost@context': ['0x1.450cf53934b78p+0',
                                     '0x1.13489e42aa449p+0',
                                     '0x1.4df76626f7cafp-1',
                                     '0x1.1cb1f58415159p-1',
                                     '0x1.345bf62e5eacap-1',
                                     '0x1.263250f6f0e24p+0',
                                     '0x1.a1880e61550c4p-1',
                                     '0x1.344434183c4a3p-2'],
            'mcp_wall_not_lower': ['0x1.f83b934bc15e2p+0',
                                   '0x1.96d39fca1ccd5p+0',
                                   '0x1.13ef8ff16ddb4p+0',
                                   '0x1.45a3aa05c4005p+0',
                                   '0x1.5a05903fa19f4p+0',
                                   '0x1.6c5bf20adba8ep+0',
                                   '0x1.3c0e6f7f8cb58p+0',
                                   '0x1.1220e447cbcaap+0'],
            'mcp_api_cost@context_uncached': ['0x1.a2caa37f64aadp+0',
                                              '0x1.766fa68828980p+0',
                                              '0x1.0586576f7a40ap+0',
                                              '0x1.afe6f8b3cdfa9p-1',
                                              '0x1.d37f4533f0873p-1',
                                              '0x1.917b9915e9fadp+0',
                                              '0x1.33291d1f7105ep+0',
                                              '0x1.2be897895ddf7p-1'],
            'mcp_api_cost@segment': ['0x1.30dc4a7d47b8dp+0',
                                     '0x1.fbda625671778p-1',
                                     '0x1.256f2c97081fdp-1',
                                     '0x1.f9f47fd2e102ep-2',
                                     '0x1.11fc7af2611f2p-1',
                                     '0x1.0f47b742b531bp+0',
                                     '0x1.777737a743a95p-1',
                                     '0x1.ea660a6a14c44p-3']},
 'candidates.csv': '29043eef881c0becc9cc6f48982f0cd9caa1154bd03043c27ba9b43d2e111b14',
 'summary.json': '8eff2eaf096f21e9fa114b381fc8085df77151ae9ee028c87314ee99a676a88d'}


if __name__ == "__main__":  # print fresh pins (after a deliberate change; see the module docstring)
    import pprint

    with tempfile.TemporaryDirectory() as d:
        pprint.pprint(run_case(Path(d) / "cal"), width=120, sort_dicts=False)
    sys.exit(0)
