"""Rates and prices as a person writes them (`2/s`, `0.5/s..1000/s`, `h20=2.1`), parsed once at the boundary."""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from specagent.hardware.profile import MAX_USD_PER_GPU_HOUR, HardwareProfile, HardwareProfileError, load_hardware

_UNITS = {None: 1.0, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}
_RATE = r"\s*([0-9.]+(?:e-?\d+)?)\s*(?:/\s*(s|sec|min|h|hour))?\s*"
#: A price as a person types it: ASCII digits, one optional point and exponent. `float` also reads Arabic-Indic or
#: full-width digits and underscores (`١٢`, `１２`, `1_2` are all 12): a price that reads one way and counts another.
_PRICE = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")


def parse_rate(text: str) -> float:
    """'2/s', '120/min', '7200/h' or a bare number of tasks per second."""
    m = re.fullmatch(_RATE, str(text))
    if not m:
        raise ValueError(f"rate '{text}': expected tasks per time, e.g. 2/s, 120/min or 7200/h")
    try:
        v = float(m.group(1)) / _UNITS[m.group(2)]
    except ValueError:
        raise ValueError(f"rate '{text}': '{m.group(1)}' is not a number") from None
    if not v > 0 or not math.isfinite(v):
        raise ValueError(f"rate '{text}' must be > 0")
    return v


def round_rates(rates: Sequence[float]) -> tuple[float, ...]:
    """Log-spaced rates as a reader would pick them: the ends unchanged, the points between at two significant figures
    (more where two would make two rates equal), so a curve's rows read 1.6/s and 5/s, not 1.587/s and 5.04/s (issue #51).
    The curve's points are where it is sampled, not figures of the workload: a round rate reads at a glance and is typed
    again as it prints (`--rate 1.6/s`)."""
    rates = [float(r) for r in rates]
    for digits in range(2, 16):
        inner = [float(f"{r:.{digits}g}") for r in rates[1:-1]]
        out = tuple([rates[0], *inner, rates[-1]][:len(rates)])
        if len(set(out)) == len(out) and list(out) == sorted(out):
            return out
    return tuple(rates)


def parse_rates(text: str, points: int = 6) -> tuple[float, ...]:
    """One rate, a comma-separated list ('2/s,50/s'), or a range 'LO..HI' of `points` log-spaced rates ('0.5/s..1000/s'),
    the ends as given and the points between rounded (`round_rates`: 1.6/s, not 1.587/s)."""
    text = str(text)
    if ".." in text:
        lo_s, hi_s = text.split("..", 1)
        lo, hi = parse_rate(lo_s), parse_rate(hi_s)
        if not hi > lo:
            raise ValueError(f"rate range '{text}': the upper end must exceed the lower")
        if points < 2:
            raise ValueError(f"rate range '{text}' needs at least 2 points, got {points}")
        return round_rates(np.geomspace(lo, hi, points))
    rates = tuple(parse_rate(t) for t in text.split(",") if t.strip())
    if not rates:
        raise ValueError(f"rate '{text}': give at least one rate")
    if len(set(rates)) != len(rates):
        raise ValueError(f"rate '{text}': a rate is given twice")
    return tuple(sorted(rates))


def parse_prices(items: Sequence[str]) -> dict[str, float]:
    """['h20=2.1', 'h200=3.5,b200=6'] -> {'h20': 2.1, 'h200': 3.5, 'b200': 6.0}: each item one or a comma list.

    Every key must name a GPU profile (by id, alias or file, as `--gpu` does), and no GPU twice
    (``h200=3,h200_sxm=4`` names one GPU by two names): a typo or a second price would otherwise be ignored."""
    out: dict[str, float] = {}
    for item in items:
        if not item.strip():
            raise ValueError("price '': expected GPU=USD_PER_GPU_HOUR (or a comma list of them), e.g. h20=1.04,h200=3.5")
    given: dict[str, str] = {}  # profile id -> the item that priced it
    for it in (part.strip() for item in items for part in item.split(",")):
        if not it:
            continue
        if "=" not in it:
            raise ValueError(f"price '{it}': expected GPU=USD_PER_GPU_HOUR (or a comma list of them), e.g. h20=1.04,h200=3.5")
        k, v = it.split("=", 1)
        key = k.strip().lower()
        if not key:
            raise ValueError(f"price '{it}': no GPU type before '='")
        try:
            out[key] = float(v)
        except ValueError as exc:
            raise ValueError(f"price '{it}': '{v}' is not a number of USD per GPU-hour") from exc
        if not 0 <= out[key] < math.inf:
            raise ValueError(f"price '{it}' must be a finite number >= 0 of USD per GPU-hour")
        if out[key] > MAX_USD_PER_GPU_HOUR:  # the profiles' own typo guard: 1e308 made a replay's cost infinite
            raise ValueError(f"price '{it}': {out[key]:g} USD per GPU-hour is past the {MAX_USD_PER_GPU_HOUR:,.0f} a GPU "
                             "profile may state (a typo guard, not a market limit)")
        if not _PRICE.fullmatch(v):
            raise ValueError(f"price '{it}': write '{v.strip()}' in ASCII digits (e.g. 12 or 1.5e3): other digits and "
                             "underscores are refused, not guessed")
        try:
            prof = load_hardware(key)
        except HardwareProfileError:
            raise ValueError(f"price '{it}': '{key}' is not a GPU type (see `specagent hardware list`)") from None
        if prof.id in given:
            raise ValueError(f"price '{it}': {prof.id} is already priced by '{given[prof.id]}' (a GPU given twice, "
                             "perhaps by an alias); give each GPU one price")
        given[prof.id] = it
    return out


def unused_prices(prices: dict[str, float], used: Sequence[HardwareProfile]) -> list[str]:
    """The `--price` items no GPU of `used` takes (as `resolve_price` matches them: by id or alias), as `KEY=USD`:
    a command says it ignored them rather than leave a price the user gave silently out of every figure."""
    names = {n for hw in used for n in (hw.id, *hw.aliases)}
    return [f"{k}={v:g}" for k, v in prices.items() if k not in names]
