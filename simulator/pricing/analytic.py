"""Price every event of a call plan at batch 1: roofline for deployments, price list for APIs.

A served model's prefill event is one request to its serving engine: it pays the engine's
per-request overhead once (`latency.request_overhead_s`, the rule the fleet and the latency
fit follow), so a lone call here takes what the fleet's concurrency-1 call takes.

Both engines use these per-event figures, which is why they agree step for step on
uncontended resources; the fleet engine instead prices batched replica iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.latency import request_overhead_s
from specagent.costmodel.passes import Passes
from specagent.costmodel.phases import DecodeRun
from specagent.costmodel.roofline import estimate
from specagent.simulator.protocol.phases import (
    DECODE_PHASES, PHASE_NAMES, PREFILL_PHASES, STRONG_PHASES, STRONG_VERIFY, WAIT_PHASES, WEAK_PHASES,
)
from specagent.simulator.protocol.plan import CallPlan
from specagent.simulator.protocol.setting import ApiModel, Setting


@dataclass(frozen=True)
class EventCosts:
    time_s: np.ndarray
    flops: np.ndarray
    bytes_read: np.ndarray
    bytes_written: np.ndarray
    usd: np.ndarray  # API charges (0 for self-hosted models)
    request_s: np.ndarray  # the part of time_s that is the serving engine's per-request overhead (no pass: no GPU work)


def _member(phases: tuple[int, ...]) -> np.ndarray:
    """Lookup table phase code -> in `phases` (cheaper than np.isin on every event)."""
    table = np.zeros(len(PHASE_NAMES), dtype=bool)
    table[list(phases)] = True
    return table


class Pricer:
    """Holds each deployment's closed-form decode run so repeated runs reuse it."""

    def __init__(self, setting: Setting):
        self.setting = setting
        self._runs: dict[int, DecodeRun] = {}

    def _decode_run(self, dep: Deployment) -> DecodeRun:
        key = id(dep)
        if key not in self._runs:
            self._runs[key] = DecodeRun(dep, self.setting.weight_mode)
        return self._runs[key]

    def price(self, plan: CallPlan) -> EventCosts:
        n = len(plan)
        time_s = np.zeros(n)
        flops = np.zeros(n)
        rd = np.zeros(n)
        wr = np.zeros(n)
        usd = np.zeros(n)
        request = np.zeros(n)
        phase = plan.phase
        is_prefill = _member(PREFILL_PHASES)[phase]
        is_decode = _member(DECODE_PHASES)[phase]
        for model, phases in ((self.setting.weak, WEAK_PHASES), (self.setting.strong, STRONG_PHASES)):
            mine = _member(phases)[phase]
            pre = np.flatnonzero(mine & is_prefill)
            dec = np.flatnonzero(mine & is_decode)
            if isinstance(model, ApiModel):
                self._price_api(model, plan, pre, dec, time_s, usd, self.setting)
                continue
            if pre.size:
                cost = estimate(model, Passes.uniform(plan.tokens[pre], plan.context[pre]), self.setting.weight_mode)
                request[pre] = request_overhead_s(self._decode_run(model).terms, plan.tokens[pre])
                time_s[pre] = cost.time_s + request[pre]
                flops[pre] = cost.total_flops
                rd[pre] = cost.total_bytes_read
                wr[pre] = cost.total_bytes_written
            if dec.size:
                tot = self._decode_run(model).totals(plan.context[dec], plan.tokens[dec])
                time_s[dec] = tot["time_s"]
                flops[dec] = sum(v for k, v in tot.items() if k.startswith("flops_"))
                rd[dec] = sum(v for k, v in tot.items() if k.startswith("read_"))
                wr[dec] = sum(v for k, v in tot.items() if k.startswith("write_"))
        waits = _member(WAIT_PHASES)[phase]
        time_s[waits] = plan.wait_s[waits]
        return EventCosts(time_s=time_s, flops=flops, bytes_read=rd, bytes_written=wr, usd=usd, request_s=request)

    def bill(self, plan: CallPlan) -> np.ndarray:
        """`price(plan).usd` alone: the API models' charges, nothing else priced (a self-hosted model's rows: 0)."""
        n = len(plan)
        usd, time_s = np.zeros(n), np.zeros(n)
        phase = plan.phase
        is_prefill = _member(PREFILL_PHASES)[phase]
        is_decode = _member(DECODE_PHASES)[phase]
        for model, phases in ((self.setting.weak, WEAK_PHASES), (self.setting.strong, STRONG_PHASES)):
            if isinstance(model, ApiModel):
                mine = _member(phases)[phase]
                self._price_api(model, plan, np.flatnonzero(mine & is_prefill), np.flatnonzero(mine & is_decode), time_s, usd,
                                self.setting)
        return usd

    @staticmethod
    def _price_api(api: ApiModel, plan: CallPlan, pre: np.ndarray, dec: np.ndarray, time_s: np.ndarray, usd: np.ndarray,
                   setting: Setting) -> None:
        """A request sends its whole context; the cached prefix is billed at the cached-input price.

        A verification request (`setting.api_verify_sends`): "context" as above; "context_uncached"
        bills its whole context at the input price (the provider's cache misses); "segment" sends
        only what the plan has it read new (the drafted segment) plus the verifier's instructions,
        billed as cached input. The publication's MCP-Atlas figures do not say which the evaluation used,
        so each is a stated choice (docs/protocol-calibration.md shows what each does to the bill).
        """
        if pre.size:
            new, cached = plan.tokens[pre].copy(), plan.context[pre].copy()
            verify = plan.phase[pre] == STRONG_VERIFY
            if setting.api_verify_sends == "segment":
                cached[verify] = setting.verifier_system_tokens
            elif setting.api_verify_sends == "context_uncached":
                new[verify] += cached[verify]
                cached[verify] = 0
            cached_price = api.usd_per_mtok_cached_input if api.prompt_caching else api.usd_per_mtok_input
            usd[pre] = (new * api.usd_per_mtok_input + cached * cached_price) / 1e6
            time_s[pre] = api.ttft_s
        if dec.size:
            usd[dec] = plan.tokens[dec] * api.usd_per_mtok_output / 1e6
            time_s[dec] = plan.tokens[dec] / api.output_tokens_per_s


def wall_time(plan: CallPlan, event_time: np.ndarray) -> np.ndarray:
    """Per trajectory: groups run one after another; within a group, lanes run side by side."""
    if len(plan) == 0:
        return np.zeros(plan.n_traj)
    if not plan.lane.any() and bool(np.all(plan.group[1:] > plan.group[:-1])):
        # every event its own group, in order (all but the parallel-lane strategies): a plain sum
        return np.bincount(plan.traj, weights=event_time, minlength=plan.n_traj)
    key = plan.group * 4 + plan.lane
    uniq, inv = np.unique(key, return_inverse=True)
    lane_time = np.bincount(inv, weights=event_time, minlength=len(uniq))
    lane_group = uniq // 4
    g_uniq, g_inv = np.unique(lane_group, return_inverse=True)
    group_time = np.zeros(len(g_uniq))
    np.maximum.at(group_time, g_inv, lane_time)
    group_traj = np.zeros(len(g_uniq), dtype=np.int64)
    group_traj[np.unique(plan.group, return_inverse=True)[1]] = plan.traj
    return np.bincount(group_traj, weights=group_time, minlength=plan.n_traj)
