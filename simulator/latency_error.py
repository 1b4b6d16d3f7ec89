"""The latency model's own error as an uncertainty source: one lognormal factor per (model, phase) and draw.

Why: every time `predict` prints rests on the roofline and the serving-engine terms, whose
held-out error (`specagent latency validate`, leave one source out) is far larger than most
acceptance ranges. `data/latency_error.toml` holds that error per phase as a lognormal σ
(the root mean square of log(predicted / measured) over the held-out rows), written by
`tools/latency_error.py` from `measurements/latency_error_rows.csv`; nothing in it is typed
by hand.

Correlation: a draw scales the Weak model's prefill and decode times by its own two factors
and the Strong model's by two others; the same draw's factors apply to every strategy, so a
Strong model that is slower than predicted is slower in Strong-only and in SpecAgent alike
(the ratios see only what differs). A hosted (API) model's time is a price-list figure, not
the latency model's: it gets no factor.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from specagent.common.errors import InputError
from specagent.simulator.protocol.phases import (
    PHASE_NAMES, STRONG_DECODE, STRONG_PREFILL, STRONG_VERDICT, STRONG_VERIFY, WEAK_DECODE, WEAK_PREFILL,
)

PHASES = ("prefill", "decode")
#: plan phase code -> (model index, latency phase index); waits are absent (never scaled).
_EVENT_CLASS = {WEAK_PREFILL: (0, 0), WEAK_DECODE: (0, 1), STRONG_PREFILL: (1, 0), STRONG_VERIFY: (1, 0),
                STRONG_DECODE: (1, 1), STRONG_VERDICT: (1, 1)}
#: A stream of its own beside the acceptance draws (same scenario seed, independent numbers).
_STREAM = 0x1A7E


def default_path() -> Path:
    return Path(str(resources.files("specagent.simulator") / "data" / "latency_error.toml"))


@dataclass(frozen=True)
class LatencyError:
    """Lognormal σ of the latency model's error per phase, with where it came from."""

    sigma: dict[str, float]
    rows: dict[str, int]
    source: str

    def __post_init__(self) -> None:
        for p in PHASES:
            v = self.sigma.get(p)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 5):
                raise InputError(f"latency error: sigma.{p} must be a number in [0, 5), got {v!r}", f"sigma.{p}")

    @classmethod
    def load(cls, path: str | Path | None = None) -> "LatencyError":
        p = Path(path) if path is not None else default_path()
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InputError(f"{p}: cannot read the latency error file: {exc}") from None
        phases = data.get("phase", {})
        return cls({k: phases.get(k, {}).get("sigma") for k in PHASES},
                   {k: int(phases.get(k, {}).get("rows", 0)) for k in PHASES}, str(data.get("source", p.name)))

    def factors(self, n: int, seed: int, hosted: tuple[bool, bool] = (False, False)) -> np.ndarray:
        """(n, 2 models, 2 phases) lognormal factors of median 1; a hosted model's are all 1."""
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, _STREAM])))
        sig = np.array([self.sigma[p] for p in PHASES])
        f = np.exp(rng.standard_normal((n, 2, 2)) * sig)
        for m, api in enumerate(hosted):
            if api:
                f[:, m, :] = 1.0
        return f

    def describe(self) -> list[tuple[str, str, str]]:
        """(source, range, where from) rows for the printed assumptions: each phase's 90% factor range."""
        z = 1.6448536269514722
        return [(f"latency {p} (both models)", f"×{math.exp(-z * self.sigma[p]):.2f}–×{math.exp(z * self.sigma[p]):.2f} "
                 f"(lognormal σ {self.sigma[p]:.2f}, 90%)", f"{self.rows[p]} held-out rows; {self.source}") for p in PHASES]


def phase_factors(factors: np.ndarray) -> np.ndarray:
    """(n, len(PHASE_NAMES)) time factor per plan phase code and draw (1 for the waits)."""
    out = np.ones((factors.shape[0], len(PHASE_NAMES)))
    for code, (m, ph) in _EVENT_CLASS.items():
        out[:, code] = factors[:, m, ph]
    return out
