"""Independent jobs on a local process pool: results in submission order, finished jobs kept when one fails."""

from __future__ import annotations

import pytest

from specagent.simulator.parallel import run_jobs


def _square_or_fail(x: int) -> int:
    if x < 0:
        raise ValueError(f"job {x} fails")
    return x * x


def test_results_come_back_in_submission_order_on_one_process_and_on_a_pool():
    jobs = [(x,) for x in range(7)]
    assert run_jobs(_square_or_fail, jobs) == run_jobs(_square_or_fail, jobs, workers=2) == [x * x for x in range(7)]
    seen: list[tuple[int, int]] = []
    run_jobs(_square_or_fail, jobs, workers=2, on_done=lambda i, v: seen.append((i, v)))
    assert sorted(seen) == [(x, x * x) for x in range(7)]  # every job reported once, whatever the completion order
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_jobs(_square_or_fail, jobs, workers=0)
    with pytest.raises(ValueError, match="backend must be one of"):
        run_jobs(_square_or_fail, jobs, backend="slurm")


def test_a_failing_job_raises_after_the_finished_ones_are_reported():
    """The sweep writes each cell as it is reported, so an interrupted or failing run keeps what finished."""
    seen: dict[int, int] = {}
    with pytest.raises(ValueError, match="job -1 fails"):
        run_jobs(_square_or_fail, [(-1,)] + [(x,) for x in range(3)], workers=2, on_done=seen.__setitem__)
    assert all(seen[i] == (i - 1) ** 2 for i in seen) and 0 not in seen  # only true results, never the failed job's
