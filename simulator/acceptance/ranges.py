"""A distribution over acceptance parameters: what is known about the verdict model, as ranges or a set.

Nobody knows the acceptance model's parameters before deploying, so every answer that rests
on them is printed with a range. Three sources produce the same type, `AcceptanceDistribution`:

- **priors** (the default): documented ranges around the scenario's own values
  (`data/acceptance_priors.toml`, a rationale per range); uniform, independent;
- **fitted intervals** (`acceptance fit`): a file of 95% intervals around the fitted point,
  each read as a normal (`shape = "normal"`), truncated to the parameter's domain;
- **a calibrated set** (`acceptance calibrate`): a file of points, each a parameter set
  consistent with the published figures; draws pick points uniformly.

A ranges file (`--acceptance-ranges FILE`) is TOML: a top-level `source`, then either
`[ranges."PATH"]` tables (`low`, `high`, optional `shape` = "uniform" | "normal",
`source`) or `[[points]]` tables of acceptance fields (over the scenario's acceptance).
PATH is a field of the acceptance model (`position_decay`, `verdict_tokens`) or a kind
of one of its tables (`accept.read`). Sampling is seeded; whole-token fields are rounded.
"""

from __future__ import annotations

import math
import numbers
import tomllib
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from specagent.common.errors import InputError
from specagent.simulator.acceptance.model import MAX_TASK_SD, MAX_WEAK_TOKEN_RATIO, AcceptanceModel
from specagent.traces.vocabulary import MAX_CONTEXT_TOKENS

SHAPES = ("uniform", "normal")
PRIORS = "priors"
AUTO = "auto"
FITTED = "fitted"
#: The uncertainty sources an interval can include (`Uncertainty.sources`).
SOURCES = ("acceptance", "latency")
#: Largest number of Monte Carlo draws: a guard against a typo (each draw plans the workload once more).
MAX_DRAWS = 10_000


class RangesError(InputError):
    """A ranges file or a range that cannot be used; `where` names the parameter."""


@dataclass(frozen=True)
class Uncertainty:
    """How `predict` propagates what is not known (the acceptance parameters, the latency model's error) into its intervals."""

    draws: int = field(default=100, metadata={
        "flag": "draws", "help": "Monte Carlo draws behind each printed interval (of every source in --uncertainty-sources; 0: no intervals)."})
    level: float = field(default=0.9, metadata={
        "flag": "interval-level", "help": "Coverage of the printed intervals (0.9: the 5th to the 95th percentile of the draws)."})
    ranges: str = field(default=AUTO, metadata={
        "flag": "acceptance-ranges",
        "help": "Where the acceptance parameters' uncertainty comes from: 'auto' (the 95% intervals `acceptance fit` stored "
                "with the acceptance model where it has them, the documented priors for the rest; for the shipped calibrated "
                "point, its calibrated set, simulator/data/calibrated_set_tau2.toml, where shipped), 'priors' "
                "(simulator/data/acceptance_priors.toml), 'fitted' (the stored intervals only) or a ranges file (fitted "
                "intervals or a calibrated set; docs/uncertainty.md)."})

    sources: str = field(default="acceptance,latency", metadata={
        "flag": "uncertainty-sources",
        "help": "What the printed intervals include, a comma list: 'acceptance' (the acceptance parameters' ranges, "
                "--acceptance-ranges), 'latency' (the latency model's held-out error per phase, "
                "simulator/data/latency_error.toml); 'none': no intervals."})

    def __post_init__(self) -> None:
        if not isinstance(self.sources, str) or any(s not in SOURCES for s in self.source_set()) or (
                not self.source_set() and self.sources.strip() != "none"):
            raise InputError(f"uncertainty.sources must be a comma list of {', '.join(SOURCES)} (or 'none'), "
                             f"got {self.sources!r}", "sources")
        if not (isinstance(self.draws, numbers.Integral) and not isinstance(self.draws, bool) and 0 <= self.draws <= MAX_DRAWS):
            raise InputError(f"uncertainty.draws must be a whole number in [0, {MAX_DRAWS:,}], got {self.draws!r}", "draws")
        if not (_real(self.level) and 0.0 < self.level < 1.0):
            raise InputError(f"uncertainty.level must be a number in (0, 1), got {self.level!r}", "level")
        if not (isinstance(self.ranges, str) and (self.ranges in (AUTO, PRIORS, FITTED) or self.ranges.endswith(".toml"))):
            raise InputError(f"uncertainty.ranges must be '{AUTO}', '{PRIORS}', '{FITTED}' or a ranges file (.toml), "
                             f"got {self.ranges!r}", "ranges")

    def source_set(self) -> tuple[str, ...]:
        """The sources named, in SOURCES order ('none': none)."""
        given = {x.strip() for x in str(self.sources).split(",") if x.strip() and x.strip() != "none"}
        return tuple(s for s in SOURCES if s in given) + tuple(sorted(given - set(SOURCES)))

    def distribution(self, base: AcceptanceModel) -> "AcceptanceDistribution":
        if self.ranges == PRIORS:
            return AcceptanceDistribution.priors(base)
        if self.ranges in (AUTO, FITTED):
            fitted = AcceptanceDistribution.fitted(base)
            if self.ranges == FITTED:
                if not fitted.ranges:
                    raise RangesError("uncertainty.ranges = 'fitted', but the acceptance model carries no fitted intervals "
                                      "(write one with `specagent acceptance fit`)", "ranges")
                return fitted
            if fitted.ranges:
                return AcceptanceDistribution.priors(base).overlaid(fitted)
            shipped = calibrated_set_for(base)
            return AcceptanceDistribution.from_file(base, shipped) if shipped else AcceptanceDistribution.priors(base)
        return AcceptanceDistribution.from_file(base, self.ranges)


def calibrated_set_for(base: AcceptanceModel) -> Path | None:
    """The shipped calibrated set (`acceptance calibrate --points-out`) `base` is the documented point of, if it exists.

    Only the shipped default point itself: a model with any field changed (a flag, a fit) is not a point of that set.
    """
    p = Path(str(resources.files("specagent.simulator") / "data" / "calibrated_set_tau2.toml"))
    plain = replace(AcceptanceModel(), source="")
    return p if p.is_file() and replace(base, source="") == plain else None


@dataclass(frozen=True)
class ParameterRange:
    """One parameter's range: uniform over [low, high], or a normal whose 95% interval is [low, high]."""

    path: str
    low: float
    high: float
    shape: str = "uniform"
    source: str = ""


@dataclass(frozen=True)
class AcceptanceDistribution:
    """Independent ranges around `base`, or a set of `points`; `sample` draws acceptance models from it."""

    base: AcceptanceModel
    ranges: tuple[ParameterRange, ...] = ()
    points: tuple[AcceptanceModel, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        for r in self.ranges:
            lo, hi = domain(self.base, r.path)
            v = value_of(self.base, r.path)
            if r.shape not in SHAPES:
                raise RangesError(f"{r.path}: shape must be one of {', '.join(SHAPES)}, got {r.shape!r}", r.path)
            if not (_real(r.low) and _real(r.high) and lo <= r.low <= r.high <= hi):
                raise RangesError(f"{r.path}: expected {_bound(lo)} <= low <= high <= {_bound(hi)}, got low {r.low!r}, high "
                                  f"{r.high!r}", r.path)
            if not r.low <= v <= r.high:
                raise RangesError(f"{r.path}: the range [{r.low:g}, {r.high:g}] must contain the scenario's value {v:g}", r.path)

    # --- constructors --------------------------------------------------------------------------
    @classmethod
    def priors(cls, base: AcceptanceModel, path: str | Path | None = None) -> "AcceptanceDistribution":
        """The documented prior ranges, placed around `base`'s own values (so they always contain it), clipped to each
        parameter's domain and drawn as written: asymmetric where the file or a domain bound makes them so."""
        p = Path(path) if path is not None else Path(str(resources.files("specagent.simulator") / "data" / "acceptance_priors.toml"))
        data = _read_toml(p)
        out = []
        for key, entry in data.get("prior", {}).items():
            paths = _expand(base, key)
            if paths is None:  # a field this acceptance model does not have (yet)
                if entry.get("optional"):
                    continue
                raise RangesError(f"{p}: prior.{key}: not a numeric field of the acceptance model", key)
            for path_ in paths:
                out.append(_prior_range(base, path_, entry, p, key))
        return cls(base, tuple(out), source=f"prior ranges ({p.name}): {data.get('source', '')}".strip())

    @classmethod
    def fitted(cls, base: AcceptanceModel) -> "AcceptanceDistribution":
        """The 95% intervals `acceptance fit` stored in `base.fit["intervals"]`, each a normal around the fitted value.

        A profile-likelihood interval may be asymmetric; it is drawn as a two-piece normal (each side its own width). An interval
        that misses the stored value (rounding of a whole-token field) is widened to hold it.
        """
        intervals = (getattr(base, "fit", None) or {}).get("intervals", {})
        out = []
        for key, (lo, hi) in intervals.items():
            if _expand(base, key) != [key]:
                raise RangesError(f"acceptance.fit.intervals: {key!r} is not a numeric field (or table entry) of the acceptance "
                                  "model", f"fit.intervals.{key}")
            v = value_of(base, key)
            d_lo, d_hi = domain(base, key)
            out.append(ParameterRange(key, max(d_lo, min(float(lo), v)), min(d_hi, max(float(hi), v)), "normal",
                                      f"95% interval fitted by `specagent acceptance fit` ({len(base.fit.get('logs', []))} logs)"))
        return cls(base, tuple(out), source=f"fitted intervals: {base.source}")

    def overlaid(self, other: "AcceptanceDistribution") -> "AcceptanceDistribution":
        """These ranges with every parameter `other` has a range for taken from `other` instead."""
        mine = {r.path: r for r in self.ranges}
        mine.update({r.path: r for r in other.ranges})
        return replace(self, ranges=tuple(mine.values()),
                       source=f"{other.source}; the others: {self.source}" if other.ranges else self.source)

    @classmethod
    def from_file(cls, base: AcceptanceModel, path: str | Path) -> "AcceptanceDistribution":
        """A ranges file: fitted intervals (`[ranges."PATH"]`) or a calibrated set (`[[points]]`)."""
        p = Path(path)
        data = _read_toml(p)
        unknown = sorted(set(data) - {"source", "ranges", "points"})
        if unknown:
            raise RangesError(f"{p}: unknown key(s) {', '.join(unknown)}; expected source, ranges, points", unknown[0])
        source = data.get("source", str(p))
        if "ranges" in data and "points" in data:
            raise RangesError(f"{p}: give ranges or points, not both")
        if "points" in data:
            pts = data["points"]
            if not isinstance(pts, list) or not pts:
                raise RangesError(f"{p}: points must be a non-empty array of tables ([[points]])", "points")
            models = []
            for i, pt in enumerate(pts):
                if not isinstance(pt, dict):
                    raise RangesError(f"{p}: points[{i}] must be a table of acceptance fields", "points")
                try:
                    models.append(model_over(base, {k: v for k, v in pt.items() if k != "candidate"}))  # a label
                except InputError as exc:
                    raise RangesError(f"{p}: points[{i}]: {exc}", f"points.{exc.where}") from None
            return cls(base, (), tuple(models), source)
        out = []
        for key, entry in data.get("ranges", {}).items():
            if not isinstance(entry, dict):
                raise RangesError(f"{p}: ranges.{key} must be a table (low, high, shape, source)", key)
            if _expand(base, key) != [key]:
                raise RangesError(f"{p}: ranges.{key}: not a numeric field (or table entry) of the acceptance model", key)
            extra = sorted(set(entry) - {"low", "high", "shape", "source"})
            if extra:
                raise RangesError(f"{p}: ranges.{key}: unknown key(s) {', '.join(extra)}; expected low, high, shape, source", key)
            if "low" not in entry or "high" not in entry:
                raise RangesError(f"{p}: ranges.{key}: needs low and high", key)
            out.append(ParameterRange(key, entry["low"], entry["high"], entry.get("shape", "uniform"), entry.get("source", source)))
        try:
            return cls(base, tuple(out), (), source)
        except RangesError as exc:
            raise RangesError(f"{p}: ranges.{exc}", exc.where) from None

    # --- using ---------------------------------------------------------------------------------
    def sample(self, n: int, seed: int) -> list[AcceptanceModel]:
        """n acceptance models drawn from this distribution (same seed, same models)."""
        rng = np.random.Generator(np.random.PCG64(seed))
        if self.points:
            idx = rng.integers(0, len(self.points), size=n)
            return [self.points[i] for i in idx.tolist()]
        cols: dict[str, np.ndarray] = {}
        for r in self.ranges:
            lo, hi = domain(self.base, r.path)
            if r.shape == "uniform":
                x = rng.uniform(r.low, r.high, size=n)
            else:
                x = _two_piece_normal(rng, value_of(self.base, r.path), r.low, r.high, lo, hi, n)
            cols[r.path] = x
        return [model_over(self.base, {p: float(v[i]) for p, v in cols.items()}, dotted=True) for i in range(n)]

    def narrowed(self, factor: float) -> "AcceptanceDistribution":
        """Every range shrunk toward the scenario's value by `factor` (1: unchanged, 0: no uncertainty)."""
        def shrink(r: ParameterRange) -> ParameterRange:
            v = value_of(self.base, r.path)
            return replace(r, low=v - factor * (v - r.low), high=v + factor * (r.high - v))
        return replace(self, ranges=tuple(shrink(r) for r in self.ranges))

    def describe(self) -> list[tuple[str, str, str]]:
        """(parameter, range, source) rows for the printed assumptions."""
        if self.points:
            return [("calibrated set", f"{len(self.points)} points", self.source)]
        return [(r.path, f"{r.low:.4g}–{r.high:.4g}" + (" (normal, 95%)" if r.shape == "normal" else ""), r.source) for r in self.ranges]


# ------------------------------------------------------------------------------------------------
def _bound(x: float) -> str:
    """A domain bound as written: a token cap in full (10,485,760, not 1.04858e+07), a probability as is."""
    return f"{x:,.0f}" if x == int(x) and abs(x) >= 1e4 else f"{x:g}"


def _real(v: object) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)  # type: ignore[arg-type]


def _int_field(name: str) -> bool:
    f = next((f for f in fields(AcceptanceModel) if f.name == name), None)
    return f is not None and f.type in ("int", "int | None", int)


def _numeric_fields(base: AcceptanceModel) -> list[str]:
    return [f.name for f in fields(base) if _real(getattr(base, f.name))]


def _expand(base: AcceptanceModel, key: str) -> list[str] | None:
    """A prior's key as parameter paths: 'accept.*' is every kind of the accept table; None if not a parameter."""
    if "." in key:
        table, kind = key.split(".", 1)
        t = getattr(base, table, None)
        if not isinstance(t, dict):
            return None
        if kind == "*":
            return [f"{table}.{k}" for k in t]
        return [key] if kind in t else None
    return [key] if key in _numeric_fields(base) else None


def value_of(base: AcceptanceModel, path: str) -> float:
    if "." in path:
        table, kind = path.split(".", 1)
        return float(getattr(base, table)[kind])
    return float(getattr(base, path))


def domain(base: AcceptanceModel, path: str) -> tuple[float, float]:
    """The values a parameter can take (the acceptance model's own validation, as an interval)."""
    name = path.split(".", 1)[0]
    if name == "weak_token_ratio":
        return (1e-9, MAX_WEAK_TOKEN_RATIO)
    if name == "task_sd":  # an sd on the logit scale, not a probability
        return (0.0, MAX_TASK_SD)
    if _int_field(name):
        return (0.0, float(MAX_CONTEXT_TOKENS))
    return (0.0, 1.0)


def model_over(base: AcceptanceModel, values: Mapping[str, Any], dotted: bool = False) -> AcceptanceModel:
    """`base` with some fields changed: dotted paths ('accept.read') or a table of fields (tables merged)."""
    changes: dict[str, Any] = {}
    for key, v in values.items():
        if dotted and "." in key:
            table, kind = key.split(".", 1)
            changes.setdefault(table, dict(getattr(base, table)))[kind] = v
            continue
        if not hasattr(base, key) or key == "source":
            raise InputError(f"unknown acceptance field {key!r}", key)
        if isinstance(getattr(base, key), dict) and isinstance(v, dict):
            v = {**getattr(base, key), **v}
        elif _int_field(key) and _real(v):
            v = int(round(v))
        changes[key] = v
    return replace(base, **changes)


def _prior_range(base: AcceptanceModel, path: str, entry: Mapping[str, Any], p: Path, key: str) -> ParameterRange:
    v = value_of(base, path)
    lo_dom, hi_dom = domain(base, path)
    if "minus" in entry or "plus" in entry:
        lo, hi = v - float(entry.get("minus", 0.0)), v + float(entry.get("plus", 0.0))
    elif "factor_low" in entry or "factor_high" in entry:
        lo, hi = v * float(entry.get("factor_low", 1.0)), v * float(entry.get("factor_high", 1.0))
    else:
        raise RangesError(f"{p}: prior.{key}: give minus/plus (absolute) or factor_low/factor_high (relative)", key)
    if not entry.get("rationale"):
        raise RangesError(f"{p}: prior.{key}: every prior range needs its rationale", key)
    # the documented range, clipped to the domain only: never re-centred on the value, so a prior that sits mostly on one
    # side of the scenario's value (correlation 0 +0.3, a probability near 1) is drawn as documented, asymmetric
    lo, hi = max(lo_dom, lo), min(hi_dom, hi)
    if _int_field(path):
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
    return ParameterRange(path, lo, hi, "uniform", str(entry["rationale"]))


def _two_piece_normal(rng: np.random.Generator, mid: float, low: float, high: float, d_lo: float, d_hi: float,
                      n: int) -> np.ndarray:
    """n draws whose 95% interval is [low, high] on each side of `mid` (an asymmetric interval stays asymmetric),
    truncated to the domain by redrawing (clipping would pile draws on a bound)."""
    z95 = 1.959963984540054
    s_lo, s_hi = (mid - low) / z95, (high - mid) / z95

    def draw(m: int) -> np.ndarray:
        z = rng.standard_normal(m)
        return mid + np.where(z < 0, z * s_lo, z * s_hi)

    x = draw(n)
    for _ in range(50):
        bad = (x < d_lo) | (x > d_hi)
        if not bad.any():
            break
        x[bad] = draw(int(bad.sum()))
    return np.clip(x, d_lo, d_hi)


def _read_toml(p: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RangesError(f"{p}: no such ranges file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RangesError(f"{p}: cannot read ranges file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RangesError(f"{p}: not valid TOML: {exc}") from None
