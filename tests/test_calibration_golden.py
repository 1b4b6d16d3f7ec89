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
            'tau2_wall_ratio': ['0x1.c0b6fb174b682p+0',
                                '0x1.418d0aa4db844p+0',
                                '0x1.d12c841d36e15p-1',
                                '0x1.5d0704d942033p+0',
                                '0x1.8d1986d77eca5p+0',
                                '0x1.9bf55e6acdddfp-1',
                                '0x1.c8cdae5e29d5dp-1',
                                '0x1.65b278c857216p+0'],
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
            'review_replies_wall': ['0x1.5cd1a0396635bp+2',
                                    '0x1.04ae8714c3026p+2',
                                    '0x1.0ca9046ad7d63p+1',
                                    '0x1.448d41d7c82bfp+1',
                                    '0x1.56217a358927fp+1',
                                    '0x1.cc38e4476c0a4p+1',
                                    '0x1.6ecc883052c09p+1',
                                    '0x1.ba35f9bcfb9cep+0'],
            'review_every_chunk_wall': ['0x1.778eaffe0b0fep+2',
                                        '0x1.19765848d40b8p+2',
                                        '0x1.249db1f6fa90ap+1',
                                        '0x1.50cdad6e4be3dp+1',
                                        '0x1.6633e9b8f9ae7p+1',
                                        '0x1.f690b7896aca9p+1',
                                        '0x1.8f57fb66a5288p+1',
                                        '0x1.c50cbc5a53118p+0'],
            'tau2_below_strong_bytes': ['0x1.6a199c2244a38p+0',
                                        '0x1.fcbc67410db3bp-1',
                                        '0x1.605b7e963034ep-1',
                                        '0x1.f255c87da81bep-1',
                                        '0x1.214654951273ep+0',
                                        '0x1.6b1fa5af037b2p-1',
                                        '0x1.72925491c0c8bp-1',
                                        '0x1.def136572d9ecp-1'],
            'tau2_below_strong_wall': ['0x1.c0b6fb174b682p+0',
                                       '0x1.418d0aa4db844p+0',
                                       '0x1.d12c841d36e15p-1',
                                       '0x1.5d0704d942033p+0',
                                       '0x1.8d1986d77eca5p+0',
                                       '0x1.9bf55e6acdddfp-1',
                                       '0x1.c8cdae5e29d5dp-1',
                                       '0x1.65b278c857216p+0'],
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
            'mcp_wall_not_lower': ['0x1.f4facfc2fb815p+0',
                                   '0x1.943daa513b795p+0',
                                   '0x1.11ccba4b3c3cfp+0',
                                   '0x1.41f0aaf6eb959p+0',
                                   '0x1.55fc56f224b1ep+0',
                                   '0x1.6baf914c9593dp+0',
                                   '0x1.3a8846b67a027p+0',
                                   '0x1.0dc1d5709fe18p+0'],
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
 'candidates.csv': 'bc9b5ebd76b2e0de6ecbe52f6ceb55ebb014ba251b0c00e6dd7640e13cdf6d7d',
 'summary.json': 'ded214952e9abf109f73f30e9e86b8dc4eda9e56ae94bc9912774a219d1dd23b'}


if __name__ == "__main__":  # print fresh pins (after a deliberate change; see the module docstring)
    import pprint

    with tempfile.TemporaryDirectory() as d:
        pprint.pprint(run_case(Path(d) / "cal"), width=120, sort_dicts=False)
    sys.exit(0)
