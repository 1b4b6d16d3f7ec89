"""The plan job from Python (issue #50): resume, the estimate and a clean ^C are the job's, not the command line's; a bad
field is named as the field (the CLI names its flag); one capacity search is a class whose parts run alone."""

from __future__ import annotations

import math

import pytest

from specagent.cli.requests import error_text
from specagent.simulator.capacity.fleet_build import episodes_of
from specagent.simulator.fleet.config import STRONG_POOL
from specagent.simulator.jobs import plan
from specagent.simulator.jobs.base import JobError, Provenance
from specagent.simulator.jobs.plan import PlanInterrupted, PlanRequest
from specagent.simulator.jobs.plan_search import CapacitySearch, PoolSetup, PoolSizing, pool_columns
from specagent.simulator.scenario import Scenario
from specagent.traces import default_workload_path, load_trajectories

SMALL = load_trajectories(default_workload_path())[:2]  # a search over two trajectories takes a fraction of a second


def _request(**kw) -> PlanRequest:
    return PlanRequest(**{"rate": "0.5/s,1/s", "strategy": ("strongonly",), "gpu": ("h20",), "n_tasks": 6, "workers": 1,
                          "workload": SMALL, **kw})


def test_a_python_caller_gets_resume_the_estimate_and_a_clean_interrupt(tmp_path, monkeypatch):
    req, real, calls = _request(), plan.search_job, []

    def the_second_search_is_interrupted(*args):
        calls.append(args[2:6])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(plan, "search_job", the_second_search_is_interrupted)
    with pytest.raises(PlanInterrupted) as e:  # a KeyboardInterrupt still: a caller that does not catch it stops
        plan.run(req, folder=tmp_path)
    assert (e.value.kept, e.value.total, e.value.folder) == (1, 2, tmp_path / "searches")
    assert len(list((tmp_path / "searches").glob("*.json"))) == 1 and not list(tmp_path.glob("plan.json"))
    monkeypatch.setattr(plan, "search_job", real)

    steps: list = []
    resumed = plan.run(req, steps.append, folder=tmp_path)
    kinds, said = [s.kind for s in steps], [s.what for s in steps if s.kind == "say"]
    assert kinds == ["say", "say", "start", "search", "say"], kinds  # what it will do, the estimate, then the searches
    assert "1 already done in" in said[0] and said[1].startswith("estimated wall time")
    assert said[-1] == f"1 search(es) reused from {tmp_path / 'searches'}, 1 run"
    assert resumed.estimate is not None and resumed.estimate.searches == 1  # only the search still to run
    assert steps[2].done == 1 and steps[2].total == 2 and steps[3].done == 2
    assert resumed.json_text() == plan.run(req).json_text()  # resumed = uninterrupted, byte for byte
    resumed.write(tmp_path)
    assert (tmp_path / "plan.json").read_text(encoding="utf-8") == resumed.json_text()


@pytest.mark.parametrize("kw, field, flag", [
    ({"n_tasks": 0}, "n_tasks", "--tasks"),
    ({"strategy": ("nope",)}, "strategy", "--strategy"),
    ({"address": "host:1", "backend": "local"}, "address", "--ray-address"),
    ({"points": 1, "rate": "1/s..2/s"}, "points", "--points"),
    ({"size_on": "ci"}, "size_on", "--size-on"),
])
def test_a_bad_field_is_named_as_the_field_and_on_the_command_line_by_its_flag(kw, field, flag):
    with pytest.raises(JobError) as e:
        PlanRequest(**{"rate": "1/s", **kw})
    assert e.value.field == field and "--" not in str(e.value)  # the simulator names no flag
    assert error_text(PlanRequest, e.value) == f"{flag}: {e.value}".replace("`backend`", "--backend")


def test_a_field_the_error_names_is_named_by_its_flag_too():
    """--gpu beside --weak-hardware: the job names the scenario field, the command line the flag the user typed."""
    with pytest.raises(JobError) as e:
        PlanRequest(rate="1/s", gpu=("h20",), provenance=Provenance(given=frozenset({"weak.hardware"})))
    assert e.value.field == "gpu" and "`scenario.weak.hardware` fixes one pairing" in str(e.value)
    assert error_text(PlanRequest, e.value) == (
        "--gpu: searches GPU types, while --weak-hardware fixes one pairing: give one or the other")
    sc = Scenario().override({"strong.hardware": "h200"})
    given = PlanRequest(rate="1/s", scenario=sc, provenance=Provenance(given=frozenset({"strong.hardware"})))
    assert given.pairings == ((sc.weak.hardware, "h200"),) and given.gpus == (sc.weak.hardware, "h200")  # one pairing


def test_one_search_measures_each_fleet_once_and_rejects_an_overloaded_one_unsimulated():
    req = _request(rate="5/s")
    s = CapacitySearch(list(episodes_of(SMALL)), req, "strongonly", "h20", "h20", 5.0)
    assert s.stage == "pilot" and s.log == [] and 0 < s.floor_s < math.inf and s.lower[STRONG_POOL] > 1
    over = s.measure(0, 1)  # one replica at 5 tasks/s: over its analytic capacity, rejected before any simulation
    assert not over.meets and over.result is None and over.verdict.startswith("unstable: Strong load is")
    assert s.measure(0, 1) is over and len(s.log) == 1  # measured (and logged) once
    n = s.search_strong()
    assert s.stage == "Strong replicas" and n is not None and n >= s.lower[STRONG_POOL]
    assert s.measure(0, n).meets and not s.measure(0, n - 1).meets
    out = s.run()
    assert s.stage == "done" and out["row"]["strong_replicas"] == n and out["evaluations"] is s.log
    assert out["row"]["evaluations"] == len(s.cache) == len(s.log)


def test_a_pools_fields_become_columns_named_by_pool():
    cols = pool_columns([("weak", PoolSetup()), ("strong", PoolSetup(gpus_per_replica=8, bound="x"))])
    assert list(cols)[:2] == ["weak_gpus_per_replica", "weak_max_num_seqs"] and cols["strong_gpus_per_replica"] == 8
    assert cols["strong_bound"] == "x" and math.isnan(cols["weak_bound_batch"])
    assert pool_columns([("weak", PoolSizing(0.5, "why", "SLO"))]) == {"weak_load_share": 0.5, "weak_why": "why", "weak_sized_by": "SLO"}
