"""What a verification call to a hosted Strong API sends is priced as stated (scenario field `api_verify_sends`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specagent.simulator.acceptance.model import AcceptanceModel
from specagent.simulator.protocol.phases import STRONG_VERIFY
from specagent.simulator.pricing.analytic import Pricer
from specagent.simulator.run import plan_strategy, to_episodes
from specagent.simulator.scenario import Scenario, ScenarioError
from specagent.simulator.strategies.catalog import make_strategy


@pytest.fixture(scope="module")
def edge_on_tau2():
    """The edge scenario on 30 of its MCP-like trajectories (many verifications with the Strong model's cache warm)."""
    edge = Scenario.load("edge")
    sc = edge.replace(workload=dataclasses.replace(edge.workload, trajectories=30))
    return sc, to_episodes(sc.load_workload()[0])


def _cost(sc, eps, strategy, mode):
    setting = sc.replace(api_verify_sends=mode).setting(fit_context=None)
    plan = plan_strategy(eps, make_strategy(strategy), setting, AcceptanceModel(), 0)
    return plan, setting, Pricer(setting).price(plan).usd


def test_strong_only_bill_does_not_depend_on_the_verify_mode(edge_on_tau2):
    sc, eps = edge_on_tau2
    bills = [_cost(sc, eps, "strongonly", m)[2].sum() for m in ("context", "context_uncached", "segment")]
    assert bills[0] > 0 and bills[0] == bills[1] == bills[2]


def test_verify_modes_priced_by_hand(edge_on_tau2):
    sc, eps = edge_on_tau2
    plan, setting, hit = _cost(sc, eps, "specagent", "context")
    _, _, miss = _cost(sc, eps, "specagent", "context_uncached")
    _, _, seg = _cost(sc, eps, "specagent", "segment")
    api = setting.strong
    v = plan.phase == STRONG_VERIFY
    assert v.sum() > 30 and (plan.context[v] > 0).mean() > 0.5
    # only verification rows change; a miss bills the cached context at the input price, the segment bills none of it
    assert np.array_equal(hit[~v], miss[~v]) and np.array_equal(hit[~v], seg[~v])
    ctx = plan.context[v]
    assert miss[v] - hit[v] == pytest.approx(ctx * (api.usd_per_mtok_input - api.usd_per_mtok_cached_input) / 1e6)
    assert hit[v] - seg[v] == pytest.approx((ctx - setting.verifier_system_tokens) * api.usd_per_mtok_cached_input / 1e6)
    assert hit.sum() < miss.sum()
    # the segment bills the verifier's instructions instead of the context: cheaper once the context is longer
    assert ((seg[v] < hit[v]) == (ctx > setting.verifier_system_tokens)).all()


def test_unknown_mode_is_a_located_scenario_error():
    with pytest.raises(ScenarioError, match="api_verify_sends must be one of context, context_uncached, segment") as e:
        Scenario().replace(api_verify_sends="all")
    assert e.value.where == "api_verify_sends"
    with pytest.raises(ScenarioError, match="api_verify_sends"):
        Scenario.from_dict({"api_verify_sends": 3})
