"""The verdict-token cost predictor, checked against the full accounting.

Claim under test (Wang et al., arXiv:2610.21463): because Strong decode dominates the Strong model's memory
traffic, counting the Strong model's verdict and repair tokens predicts the Strong share
of total memory traffic. The prediction uses only decoded token counts and each model's
per-token decode bytes (batch 1, at the run's mean decode context); the full accounting
also counts prefills and verification prefills, which — in `union` weight mode — read
nearly every expert of a 512-expert model. The error is reported, not assumed small.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from specagent.costmodel.phases import decode
from specagent.costmodel.roofline import WEIGHT_MODES
from specagent.simulator.run import simulate, to_episodes
from specagent.simulator.scenario import Scenario
from specagent.simulator.protocol.setting import Setting
from specagent.traces.schema import Trajectory
from specagent.common.lazy_import import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:  # loaded on first use: this module is on the CLI's start-up path
    pd = lazy_module("pandas")


def decode_bytes_per_token(dep, context: float, weight_mode: str) -> float:
    return float(decode(dep, context=max(context, 0.0), weight_mode=weight_mode).total_bytes_read[0])


def predict_strong_share(frame: pd.DataFrame, setting: Setting) -> pd.DataFrame:
    """Predicted vs accounted Strong share of memory reads, per trajectory of a simulate() frame."""
    if setting.strong_is_api:
        raise ValueError("the predictor needs a self-hosted Strong deployment (an API hides its memory traffic)")
    strong_tokens = frame["tokens_strong_verdict"] + frame["tokens_strong_decode"]
    weak_tokens = frame["tokens_weak_decode"]
    # mean decode context per model, from the total context summed over decode steps ≈ committed context / 2
    ctx = frame["committed_context_tokens"].mean() / 2.0
    b_s = decode_bytes_per_token(setting.strong, ctx, setting.weight_mode)
    b_w = decode_bytes_per_token(setting.weak, ctx, setting.weight_mode)
    pred_s = strong_tokens * b_s
    pred_w = weak_tokens * b_w
    predicted = pred_s / (pred_s + pred_w).where(pred_s + pred_w > 0, np.nan)
    actual = frame["strong_bytes_read"] / frame["total_bytes_read"]
    return pd.DataFrame({
        "traj": frame["traj"], "strong_verdict_repair_tokens": strong_tokens, "weak_decode_tokens": weak_tokens,
        "strong_decode_bytes_per_token": b_s, "weak_decode_bytes_per_token": b_w,
        "predicted_strong_share": predicted, "accounted_strong_share": actual,
        "abs_error": (predicted - actual).abs(),
    })


def protocol_log_k(name: str, trajs: Sequence[Trajectory]) -> int | None:
    """K a workload of protocol logs was run with (None: reference trajectories).

    A protocol log (a `specagent live` run, or any log whose committed steps carry
    speculation labels) records SpecAgent's own decisions: it is priced as SpecAgent at the
    K it ran with (`live_k` in its metadata), never under another strategy.
    """
    logs = [t for t in trajs if t.is_protocol_log]
    if not logs:
        return None
    if len(logs) != len(trajs):
        raise ValueError(f"{name}: {len(logs)} of {len(trajs)} trajectories are protocol logs; validate logs and reference "
                         "trajectories as separate workloads")
    ks = {t.metadata.get("live_k") for t in logs}
    if len(ks) != 1:
        raise ValueError(f"{name}: protocol logs run with different K ({sorted(map(str, ks))}); validate them separately")
    k = ks.pop()
    if k is not None and (not isinstance(k, int) or k < 1):
        raise ValueError(f"{name}: metadata field 'live_k' must be a positive integer, got {k!r}")
    return k


def validate_predictor(workloads: dict[str, Iterable[Trajectory]], scenario: Scenario | None = None,
                       strategies: Sequence[str] = ("specagent",), weight_modes: Sequence[str] = WEIGHT_MODES,
                       setting: Setting | None = None) -> pd.DataFrame:
    """One row per (workload, strategy, weight mode): aggregate predicted vs accounted share and its error.

    A workload of protocol logs (`protocol_log_k`) is checked under SpecAgent only, with the
    verdicts and K it recorded (its `source` column says so); reference trajectories under
    every strategy in `strategies`. The scenario (the default one when None) gives the deployments, acceptance, seed, K and
    review policy; `setting`, when given, replaces its deployments.
    """
    sc = scenario or Scenario()
    base = setting or sc.setting(fit_context=None)
    rows = []
    for wname, trajs in workloads.items():
        trajs = list(trajs)
        log_k = protocol_log_k(wname, trajs)
        is_log = any(t.is_protocol_log for t in trajs)
        episodes = to_episodes(trajs)
        for mode in weight_modes:
            s = dataclasses.replace(base, weight_mode=mode)
            for strat in (("specagent",) if is_log else strategies):
                frame = simulate(episodes, strat, s, sc.acceptance, sc.seed, k=log_k or sc.k, review=sc.review)
                per = predict_strong_share(frame, s)
                pred_s = (per["strong_verdict_repair_tokens"] * per["strong_decode_bytes_per_token"]).sum()
                pred_w = (per["weak_decode_tokens"] * per["weak_decode_bytes_per_token"]).sum()
                predicted = pred_s / (pred_s + pred_w) if pred_s + pred_w > 0 else np.nan
                actual = frame["strong_bytes_read"].sum() / frame["total_bytes_read"].sum()
                rows.append({
                    "workload": wname, "source": "protocol log (recorded verdicts)" if is_log else "trajectories",
                    "strategy": strat, "weight_mode": mode, "trajectories": len(frame),
                    "strong_verdict_repair_tokens": int(per["strong_verdict_repair_tokens"].sum()),
                    "weak_decode_tokens": int(per["weak_decode_tokens"].sum()),
                    "predicted_strong_share": predicted, "accounted_strong_share": actual,
                    "abs_error": abs(predicted - actual),
                    "mean_abs_error_per_trajectory": float(per["abs_error"].mean()),
                    "strong_share_from_decode": float((frame["bytes_read_strong_decode"] + frame["bytes_read_strong_verdict"]).sum() / frame["strong_bytes_read"].sum()) if frame["strong_bytes_read"].sum() else np.nan,
                })
    return pd.DataFrame(rows)
