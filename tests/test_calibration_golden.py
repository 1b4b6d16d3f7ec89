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


GOLDEN: dict = {'values': {'tau2_memory_ratio': ['0x1.6903196957aa9p+0',
                                  '0x1.fd829b26b8234p-1',
                                  '0x1.6101cd40e24e3p-1',
                                  '0x1.f106a336042aep-1',
                                  '0x1.20c79cbe57c77p+0',
                                  '0x1.6a6f7c4479bbdp-1',
                                  '0x1.6fbd9d041f048p-1',
                                  '0x1.deb214f2c2f76p-1'],
            'tau2_strong_share': ['0x1.2c423c4eac658p-1',
                                  '0x1.1b18d026b8e1ep-1',
                                  '0x1.da62dc32185f0p-2',
                                  '0x1.109d9027f24fap-2',
                                  '0x1.458d830ba546ap-2',
                                  '0x1.b2136132edea1p-1',
                                  '0x1.46f41bbe97449p-1',
                                  '0x1.35a46565c4449p-4'],
            'tau2_weak_share': ['0x1.a77b8762a734cp-2',
                                '0x1.c9ce5fb28e3c5p-2',
                                '0x1.12ce91e6f3d06p-1',
                                '0x1.77b137ec06d82p-1',
                                '0x1.5d393e7a2d5cap-1',
                                '0x1.37b27b344857dp-3',
                                '0x1.7217c882d176cp-2',
                                '0x1.d94b735347777p-1'],
            'tau2_wall_ratio': ['0x1.69e09367f34f2p+0',
                                '0x1.28ad07bc1894fp+0',
                                '0x1.f5d9d7cb3951ap-1',
                                '0x1.3b0066195f678p+0',
                                '0x1.53f79d6c0a73dp+0',
                                '0x1.d0df0fbc8066dp-1',
                                '0x1.ec38eabb6d46ep-1',
                                '0x1.4252a1699af6bp+0'],
            'tau2_flops_ratio': ['0x1.4d039ee3b98b5p+0',
                                 '0x1.1d6e759160b65p+0',
                                 '0x1.f5bd211b7afd1p-1',
                                 '0x1.16b765202adbcp+0',
                                 '0x1.2a231951b218dp+0',
                                 '0x1.fdd5d7529aa66p-1',
                                 '0x1.fc4dfb729ba0cp-1',
                                 '0x1.1344edf74854ap+0'],
            'predictor_error': ['0x1.e7346b5ce1000p-11',
                                '0x1.9708192430600p-9',
                                '0x1.bcdd8533f1240p-8',
                                '0x1.224bd29179f00p-8',
                                '0x1.cf74814401900p-9',
                                '0x1.562f1ecf3b000p-12',
                                '0x1.30d75af80c300p-9',
                                '0x1.131d2cd1f8900p-7'],
            'retail_exact_flops': ['0x1.08eeeff095188p+0',
                                   '0x1.0551eb7fde523p+0',
                                   '0x1.05d0b62399000p+0',
                                   '0x1.32a85615e4ccap+0',
                                   '0x1.108b50ee0c09cp+0',
                                   '0x1.08cb319719ab1p+0',
                                   '0x1.05cb737433c9ap+0',
                                   '0x1.1eb8521723b7cp+0'],
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
            'review_replies_wall': ['0x1.9d5dfe3e4f572p+1',
                                    '0x1.454680460e35fp+1',
                                    '0x1.8d35524fb55d9p+0',
                                    '0x1.c9594f260a745p+0',
                                    '0x1.dc68a13fc9496p+0',
                                    '0x1.2278b0bb5ad5ap+1',
                                    '0x1.eab3788c45833p+0',
                                    '0x1.655846bf2c366p+0'],
            'review_every_chunk_wall': ['0x1.b84c1ba596ba3p+1',
                                        '0x1.5a2ccb6e537a7p+1',
                                        '0x1.a55780055bb8cp+0',
                                        '0x1.d587505f5a330p+0',
                                        '0x1.ec95e08d57a4dp+0',
                                        '0x1.3759dcff55cc7p+1',
                                        '0x1.058ccb278879bp+1',
                                        '0x1.6abca3d23e00dp+0'],
            'tau2_below_strong_bytes': ['0x1.6903196957aa9p+0',
                                        '0x1.fd829b26b8234p-1',
                                        '0x1.6101cd40e24e3p-1',
                                        '0x1.f106a336042aep-1',
                                        '0x1.20c79cbe57c77p+0',
                                        '0x1.6a6f7c4479bbdp-1',
                                        '0x1.6fbd9d041f048p-1',
                                        '0x1.deb214f2c2f76p-1'],
            'tau2_below_strong_wall': ['0x1.69e09367f34f2p+0',
                                       '0x1.28ad07bc1894fp+0',
                                       '0x1.f5d9d7cb3951ap-1',
                                       '0x1.3b0066195f678p+0',
                                       '0x1.53f79d6c0a73dp+0',
                                       '0x1.d0df0fbc8066dp-1',
                                       '0x1.ec38eabb6d46ep-1',
                                       '0x1.4252a1699af6bp+0'],
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
            'mcp_wall_not_lower': ['0x1.f73361b62301ep+0',
                                   '0x1.960551012d01dp+0',
                                   '0x1.1347b2c1892fbp+0',
                                   '0x1.4470117225758p+0',
                                   '0x1.58b4586f865e7p+0',
                                   '0x1.6c2d27b9a97ddp+0',
                                   '0x1.3b9a010675e55p+0',
                                   '0x1.10ae44bcc88e1p+0'],
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
 'candidates.csv': 'a1d203c5e0e7af48746287c687e987db89a5afe886123d9717ae5956984756b2',
 'summary.json': 'd19cf252f53edf89f217e4edab22d00cde52c504d410720c3cf0343eff77aab0'}


if __name__ == "__main__":  # print fresh pins (after a deliberate change; see the module docstring)
    import pprint

    with tempfile.TemporaryDirectory() as d:
        pprint.pprint(run_case(Path(d) / "cal"), width=120, sort_dicts=False)
    sys.exit(0)
