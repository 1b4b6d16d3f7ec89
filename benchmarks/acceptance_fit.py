"""`acceptance fit` speed: reading and fitting simulated verdict logs of 800 and 3,200 verifications.

Run: .venv/bin/python benchmarks/acceptance_fit.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.acceptance.fit import fit_acceptance, read_logs
from specagent.simulator.acceptance.verdict_records import simulate_verdict_log
from specagent.traces.verdict_log import write_verdict_log


def main() -> int:
    truth = AcceptanceModel(position_decay=0.9, verify_reasoning_tokens=300, repair_reasoning_tokens=200, weak_token_ratio=0.8)
    with tempfile.TemporaryDirectory() as d:
        for tasks in (100, 400):
            log = write_verdict_log(simulate_verdict_log(truth, tasks, seed=1), Path(d) / f"v{tasks}.jsonl")
            t0 = time.perf_counter()
            data = read_logs([log])
            t1 = time.perf_counter()
            res = fit_acceptance(data)
            t2 = time.perf_counter()
            print(f"{data.records:>5} verifications: read {t1 - t0:.2f} s, fit {t2 - t1:.2f} s "
                  f"({len(res.params)} parameters, {sum(p.how.startswith('profile likelihood') for p in res.params)} profile intervals, task_sd {res.model.task_sd:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
