"""Hardware profiles: one TOML data file per accelerator, every figure with its source.

Profiles are data, not code, so that a user can add a machine (or `specagent calibrate`
can write one) without touching the package. Lookup order: explicit path, then the
directories given by the caller, then ``$SPECAGENT_HARDWARE_DIR`` (``os.pathsep``
separated), then the profiles shipped in this package.
"""

from __future__ import annotations

import functools
import math
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from specagent.common.errors import read_text

ENV_VAR = "SPECAGENT_HARDWARE_DIR"
SCHEMA_VERSION = 1


class HardwareProfileError(ValueError):
    """A profile file is missing, malformed, or names an unknown GPU."""


@dataclass(frozen=True)
class Sourced:
    """A figure together with where it comes from."""

    value: Any
    source: str


@dataclass(frozen=True)
class HardwareProfile:
    """Peak rates, memory and default efficiencies of one accelerator (per device)."""

    id: str
    name: str
    vendor: str
    peak_tflops: dict[str, Sourced]
    memory_capacity_gb: Sourced
    memory_bandwidth_tb_s: Sourced
    memory_kind: Sourced | None
    interconnect_kind: Sourced
    interconnect_gb_s: Sourced
    interconnect_unidirectional_gb_s: Sourced | None
    prefill_mfu: Sourced  # GEMM efficiency of every pass (decode included), unless an engine profile or curve gives one
    bandwidth_efficiency: Sourced
    pass_overhead_us: Sourced
    price_usd_per_gpu_hour: Sourced | None = None
    aliases: tuple[str, ...] = ()
    #: The GPU id whose per-GPU serving-engine terms (an engine file's ``[hardware.<id>]`` tables) this profile takes
    #: ("" = its own id, then its aliases): a copy of a shipped profile under another id keeps the copied GPU's fitted
    #: terms by naming it here (`serving_engine.EngineProfile.for_hardware`).
    terms_key: str = ""
    #: Optional calibrated compute efficiency as a function of tokens per pass:
    #: ((tokens, efficiency), ...) interpolated in log(tokens). Written by `specagent calibrate`.
    compute_efficiency_curve: tuple[tuple[float, float], ...] = ()
    #: Optional calibrated compute efficiency of pure-decode passes (every sequence adds one
    #: token) as a function of the decode batch: ((batch, efficiency), ...) interpolated in
    #: log(batch). Batched decode (recurrent state step, attention over a cache) reaches a
    #: lower efficiency than a prefill of as many tokens; absent, decode uses the curve above.
    decode_efficiency_curve: tuple[tuple[float, float], ...] = ()
    path: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)

    # --- derived figures -------------------------------------------------------------
    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype listed in the profile."""
        key = dtype.lower()
        if key not in self.peak_tflops:
            raise HardwareProfileError(
                f"{self.path or self.id}: no peak_tflops.{key} figure "
                f"(has: {', '.join(sorted(self.peak_tflops))})"
            )
        return float(self.peak_tflops[key].value) * 1e12

    @property
    def bandwidth_bytes_s(self) -> float:
        return float(self.memory_bandwidth_tb_s.value) * 1e12

    @property
    def capacity_bytes(self) -> float:
        return float(self.memory_capacity_gb.value) * 1e9

    @property
    def link_bytes_s(self) -> float:
        """One direction of the device's interconnect, which is what a ring collective uses."""
        if self.interconnect_unidirectional_gb_s is not None:
            return float(self.interconnect_unidirectional_gb_s.value) * 1e9
        return float(self.interconnect_gb_s.value) * 1e9 / 2.0

    def ridge(self, dtype: str = "bf16") -> float:
        """Arithmetic intensity (FLOP per byte) at which compute and bandwidth balance."""
        return self.peak_flops(dtype) / self.bandwidth_bytes_s

    def summary(self) -> dict[str, Any]:
        """One row of `hardware list --json`: BF16 peak, memory, bandwidth, BF16 ridge and price (None: unpriced)."""
        return dict(id=self.id, name=self.name, bf16_tflops=self.peak_tflops["bf16"].value,
                    memory_gb=self.memory_capacity_gb.value, bandwidth_tb_s=self.memory_bandwidth_tb_s.value,
                    ridge_bf16=round(self.ridge("bf16"), 1),
                    usd_per_gpu_hour=self.price_usd_per_gpu_hour.value if self.price_usd_per_gpu_hour else None)

    def figures(self) -> list[tuple[str, Any, str]]:
        """(name, value, source) of every figure the profile holds, then its ridge points (derived) and its calibrated
        curves (lists), for `hardware show`'s table and its `--json` (as `EngineProfile.figures` for an engine)."""
        items: list[tuple[str, Any, str]] = [(f"peak {k} TFLOP/s", v.value, v.source) for k, v in self.peak_tflops.items()]
        for label, v in (("memory GB", self.memory_capacity_gb), ("bandwidth TB/s", self.memory_bandwidth_tb_s),
                         ("memory kind", self.memory_kind), ("interconnect", self.interconnect_kind),
                         ("interconnect GB/s", self.interconnect_gb_s),
                         ("interconnect GB/s one way", self.interconnect_unidirectional_gb_s),
                         ("GEMM MFU (prefill_mfu)", self.prefill_mfu), ("bandwidth efficiency", self.bandwidth_efficiency),
                         ("pass overhead µs", self.pass_overhead_us), ("$/GPU-hour", self.price_usd_per_gpu_hour)):
            if v is not None:
                items.append((label, v.value, v.source))
        items += [(f"ridge {k} FLOP/B", round(self.ridge(k), 1), "derived: peak ÷ bandwidth") for k in self.peak_tflops]
        if self.compute_efficiency_curve:
            items.append(("compute efficiency curve", list(self.compute_efficiency_curve),
                          "calibration (tokens per pass → MFU)"))
        if self.decode_efficiency_curve:
            items.append(("decode efficiency curve", list(self.decode_efficiency_curve),
                          "calibration (decode batch → MFU of pure-decode passes)"))
        return items


#: Every key a profile may hold, by section ("" = top level), so a typo is refused, not ignored.
_TOP_KEYS = {"schema_version", "id", "name", "vendor", "aliases", "terms_key", "peak_tflops", "memory", "interconnect", "efficiency",
             "price", "provenance"}
_SECTION_KEYS = {
    "memory": {"capacity_gb", "bandwidth_tb_s", "kind"},
    "interconnect": {"kind", "bandwidth_gb_s", "unidirectional_gb_s"},
    "efficiency": {"prefill_mfu", "bandwidth", "pass_overhead_us", "compute_curve", "decode_curve"},
    "price": {"usd_per_gpu_hour"},
}
#: Compute formats a peak may be given for (the ones `costmodel.dtypes` maps weights to, and their neighbours).
PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")
#: (section, key) -> (low, high, unit): the range a figure must lie in. Finite always; the bounds are typo guards
#: a factor of ~100 beyond any accelerator shipped or announced (an RTX 5090's 32 GB to an MI355X's 288 GB;
#: 0.05 TB/s for a CPU's DRAM to 8 TB/s for a B200), not physical limits; the advice for a deployment that does
#: not fit is capped at MAX_GPUS whatever the capacity (costmodel.deployment).
#: The typo guard on a price, in a profile and in every `--price` flag alike: a dollar figure past it (1e308 made
#: replay's cost per request infinite) is a slip of the keyboard, not a rental.
MAX_USD_PER_GPU_HOUR = 10_000.0
_RANGES: dict[tuple[str, str], tuple[float, float, str]] = {
    ("memory", "capacity_gb"): (1e-6, 100_000.0, "GB"),  # from a kilobyte: calibration's fake devices are that small
    ("memory", "bandwidth_tb_s"): (0.001, 1_000.0, "TB/s"),
    ("interconnect", "bandwidth_gb_s"): (0.01, 1_000_000.0, "GB/s"),
    ("interconnect", "unidirectional_gb_s"): (0.01, 1_000_000.0, "GB/s"),
    ("efficiency", "pass_overhead_us"): (0.0, 1_000_000.0, "us"),
    ("price", "usd_per_gpu_hour"): (0.0, MAX_USD_PER_GPU_HOUR, "USD per GPU-hour"),
    # from a megaFLOP/s: a calibration measures what its device runs, and a CPU emulating fp8 GEMMs (torch._scaled_mm,
    # 256-cubed, this project's 2-core test machine) measured 5.7e-5 TFLOP/s
    ("peak_tflops", "*"): (1e-6, 1_000_000.0, "TFLOP/s"),
}


def _number_in(value: Any, lo: float, hi: float, low_open: bool = False) -> bool:
    """A finite int/float (not a bool) in [lo, hi] ((lo, hi] when `low_open`): NaN fails every comparison, so test it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return (lo < value if low_open else lo <= value) and value <= hi


def _sourced(data: dict[str, Any], section: str, key: str, path: str, required: bool = True) -> Sourced | None:
    table = data.get(section, {}) if section else data
    where = f"{section}.{key}" if section else key
    if not isinstance(table, dict):
        raise HardwareProfileError(f"{path}: [{section}] must be a table")
    if key not in table:
        if required:
            raise HardwareProfileError(f"{path}: missing field '{where}' (expected {{ value = ..., source = \"...\" }})")
        return None
    item = table[key]
    if not isinstance(item, dict) or "value" not in item or "source" not in item:
        raise HardwareProfileError(f"{path}: field '{where}' must be an inline table {{ value = ..., source = \"...\" }}, got {item!r}")
    extra = set(item) - {"value", "source"}
    if extra:
        raise HardwareProfileError(f"{path}: field '{where}' has unknown keys {sorted(extra)} (expected value, source)")
    if not isinstance(item["source"], str) or not item["source"].strip():
        raise HardwareProfileError(f"{path}: field '{where}' has an empty source (expected the figure's origin as text)")
    value = item["value"]
    rng = _RANGES.get((section, key)) or _RANGES.get((section, "*"))
    if rng is not None:
        lo, hi, unit = rng
        if not _number_in(value, lo, hi):
            raise HardwareProfileError(f"{path}: field '{where}' must be a finite number in [{lo:g}, {hi:,g}] {unit}, got {value!r}")
    elif section and key == "kind" and not isinstance(value, str):
        raise HardwareProfileError(f"{path}: field '{where}' must be text, got {value!r}")
    return Sourced(value=value, source=str(item["source"]))


def _curve(data: dict[str, Any], key: str, path: str, need_source: bool = False) -> tuple[tuple[float, float], ...]:
    raw = data.get("efficiency", {}).get(key)
    if raw is None:
        return ()
    if need_source and (not isinstance(raw, dict) or not str(raw.get("source", "")).strip() or "value" not in raw):
        raise HardwareProfileError(f"{path}: field 'efficiency.{key}' must be an inline table "
                                   f"{{ value = [[x, efficiency], ...], source = \"...\" }} with a non-empty source, got {raw!r}")
    points = raw.get("value") if isinstance(raw, dict) else raw
    try:
        curve = tuple((float(x), float(y)) for x, y in points)
    except (TypeError, ValueError) as exc:
        raise HardwareProfileError(f"{path}: field 'efficiency.{key}' must be a list of [x, efficiency] pairs") from exc
    if not curve or any(not _number_in(x, 0.0, 1e9, low_open=True) or not _number_in(y, 0.0, 1.5, low_open=True) for x, y in curve):
        raise HardwareProfileError(f"{path}: field 'efficiency.{key}' needs finite x in (0, 1e9] and efficiencies in (0, 1.5]")
    return tuple(sorted(curve))


def _check_keys(data: dict[str, Any], path: str) -> None:
    """Unknown keys refused with the key as written: a misspelt `bandwith_tb_s` must not fall back to nothing."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise HardwareProfileError(f"{path}: unknown key(s) {sorted(unknown)} (known: {sorted(_TOP_KEYS)})")
    for section, known in _SECTION_KEYS.items():
        table = data.get(section)
        if isinstance(table, dict):
            bad = set(table) - known - ({"decode_mfu"} if section == "efficiency" else set())
            if bad:
                raise HardwareProfileError(f"{path}: [{section}] has unknown key(s) {sorted(bad)} (known: {sorted(known)})")
        elif table is not None:
            raise HardwareProfileError(f"{path}: [{section}] must be a table, got {table!r}")
    peaks = data.get("peak_tflops")
    if isinstance(peaks, dict):
        bad = set(peaks) - set(PEAK_DTYPES)
        if bad:
            raise HardwareProfileError(f"{path}: [peak_tflops] has unknown format(s) {sorted(bad)} (known: {', '.join(PEAK_DTYPES)})")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise HardwareProfileError(f"{path}: field 'aliases' must be a list of names, got {aliases!r}")
    if "provenance" in data and not isinstance(data["provenance"], dict):
        raise HardwareProfileError(f"{path}: [provenance] must be a table")
    if "terms_key" in data and not (isinstance(data["terms_key"], str) and data["terms_key"].strip()):
        raise HardwareProfileError(f"{path}: field 'terms_key' must be a GPU id (the one whose fitted serving-engine terms "
                                   f"this profile takes), got {data['terms_key']!r}")


def parse_profile(data: dict[str, Any], path: str = "<memory>") -> HardwareProfile:
    """Validate a profile's TOML table, naming the file and field on any problem."""
    for key in ("id", "name"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise HardwareProfileError(f"{path}: missing field '{key}' (expected a string)")
    _check_keys(data, path)
    peaks_raw = data.get("peak_tflops")
    if not isinstance(peaks_raw, dict) or "bf16" not in peaks_raw:
        raise HardwareProfileError(f"{path}: missing field 'peak_tflops.bf16'")
    if isinstance(data.get("efficiency"), dict) and "decode_mfu" in data["efficiency"]:
        raise HardwareProfileError(
            f"{path}: field 'efficiency.decode_mfu' is no longer read: a decode pass's GEMMs run at the GEMM efficiency for "
            f"their token count (prefill_mfu, or efficiency.compute_curve / decode_curve from calibration), attention at the "
            f"serving engine's attention_mfu; delete the field (see specagent.costmodel.roofline)")
    peaks = {k: _sourced(data, "peak_tflops", k, path) for k in peaks_raw}
    prof = HardwareProfile(
        id=data["id"].lower(),
        name=data["name"],
        vendor=str(data.get("vendor", "")),
        peak_tflops=peaks,  # type: ignore[arg-type]
        memory_capacity_gb=_sourced(data, "memory", "capacity_gb", path),  # type: ignore[arg-type]
        memory_bandwidth_tb_s=_sourced(data, "memory", "bandwidth_tb_s", path),  # type: ignore[arg-type]
        memory_kind=_sourced(data, "memory", "kind", path, required=False),
        interconnect_kind=_sourced(data, "interconnect", "kind", path),  # type: ignore[arg-type]
        interconnect_gb_s=_sourced(data, "interconnect", "bandwidth_gb_s", path),  # type: ignore[arg-type]
        interconnect_unidirectional_gb_s=_sourced(data, "interconnect", "unidirectional_gb_s", path, required=False),
        prefill_mfu=_sourced(data, "efficiency", "prefill_mfu", path),  # type: ignore[arg-type]
        bandwidth_efficiency=_sourced(data, "efficiency", "bandwidth", path),  # type: ignore[arg-type]
        pass_overhead_us=_sourced(data, "efficiency", "pass_overhead_us", path),  # type: ignore[arg-type]
        price_usd_per_gpu_hour=_sourced(data, "price", "usd_per_gpu_hour", path, required=False),
        aliases=tuple(str(a).lower() for a in data.get("aliases", [])),
        terms_key=str(data.get("terms_key", "")).strip().lower(),
        compute_efficiency_curve=_curve(data, "compute_curve", path),
        decode_efficiency_curve=_curve(data, "decode_curve", path, need_source=True),
        path=path,
        provenance=dict(data.get("provenance", {})),
    )
    for fld, key in (("prefill_mfu", "efficiency.prefill_mfu"), ("bandwidth_efficiency", "efficiency.bandwidth")):
        v = getattr(prof, fld).value
        if not _number_in(v, 0.0, 1.5, low_open=True):
            raise HardwareProfileError(f"{path}: field '{key}' must be an efficiency in (0, 1.5], got {v!r}")
    return prof


def read_toml(path: str | Path, error: type[ValueError], what: str) -> dict[str, Any]:
    """A profile file's TOML table; unreadable or invalid files raise `error` naming the file."""
    p = Path(path)
    text = read_text(p, error, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{p}: not valid TOML: {exc}") from exc
    except RecursionError:
        raise error(f"{p}: not valid TOML: nested too deeply") from None


def load_profile_file(path: str | Path) -> HardwareProfile:
    return parse_profile(read_toml(path, HardwareProfileError, "hardware profile"), str(path))


def _search_dirs(extra_dirs: Iterable[str | Path] | None) -> list[Path]:
    dirs = [Path(d) for d in (extra_dirs or [])]
    env = os.environ.get(ENV_VAR, "")
    dirs += [Path(d) for d in env.split(os.pathsep) if d]
    dirs.append(shipped_profile_dir())
    return dirs


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


@functools.cache  # the installed package's folder does not move while a process runs; a fit asks for it on every trial
def shipped_profile_dir() -> Path:
    return Path(str(resources.files("specagent.hardware") / "profiles"))


def list_profiles(extra_dirs: Iterable[str | Path] | None = None) -> list[HardwareProfile]:
    """All profiles visible from the search path; earlier directories shadow later ones."""
    seen: dict[str, HardwareProfile] = {}
    for d in _search_dirs(extra_dirs):
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.toml")):
            prof = load_profile_file(f)
            seen.setdefault(prof.id, prof)
    out = list(seen.values())
    check_unique_names(out, HardwareProfileError, "hardware profile")
    return out


def find_profile(profiles: list[Any], text: str, error: type[ValueError], what: str) -> Any:
    """The profile `text` names: by id or alias (unique, `check_unique_names`), else by display name when one has it."""
    want = _normalise(text)
    for prof in profiles:
        if want in {_normalise(prof.id)} | {_normalise(a) for a in prof.aliases}:
            return prof
    named = [p for p in profiles if _normalise(p.name) == want]
    if len(named) > 1:
        raise error(f"{what} '{text}' is the name of {len(named)} profiles ({', '.join(f'{p.id} in {p.path}' for p in named)}); "
                    "select one by its id")
    return named[0] if named else None


def check_unique_names(profiles: Iterable[Any], error: type[ValueError], what: str) -> None:
    """Refuse two visible profiles answering to one name: an alias must not take over another profile's id, name or alias.

    A profile with the *same id* as a shipped one replaces it on purpose (earlier directories shadow
    later ones); an alias that silently captured `--hardware h200` would price another GPU."""
    owner: dict[str, tuple[Any, str]] = {}
    for prof in profiles:  # in search order: the first owner of a name is the one that would shadow the later
        names = [("id", prof.id)] + [("alias", a) for a in prof.aliases]  # display names may repeat: see `find_profile`
        for kind, name in names:
            key = _normalise(name)
            other, okind = owner.get(key, (None, ""))
            if other is not None and other.id != prof.id:
                raise error(f"{other.path or other.id}: {okind} '{name}' is also the {kind} of {what} '{prof.id}' "
                            f"({prof.path or 'shipped'}); a name may select one profile only: rename it")
            owner.setdefault(key, (prof, kind))


def load_hardware(name_or_path: str | Path, extra_dirs: Iterable[str | Path] | None = None) -> HardwareProfile:
    """Find a profile by id, alias or file path; unknown names list the known ones."""
    text = str(name_or_path)
    if text.endswith(".toml") or os.sep in text:
        return load_profile_file(text)
    profiles = list_profiles(extra_dirs)
    prof = find_profile(profiles, text, HardwareProfileError, "hardware")
    if prof is not None:
        return prof
    known = ", ".join(sorted(p.id for p in profiles))
    raise HardwareProfileError(f"unknown hardware '{text}'; known profiles: {known} (or pass a .toml path / --hardware-dir)")
