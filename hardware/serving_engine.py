"""Serving-engine profiles: the fixed costs a real serving system adds to the roofline, as data.

A roofline prices bytes and FLOPs; a served decode step also pays kernel launches, work per
layer that does not shrink with bytes, collective latencies and the engine's own CPU work
per iteration. Those depend on the software (which kernels, CUDA graphs or not, which
all-reduce), so they live in one TOML file per engine (``hardware/engines/``), loaded and
validated like hardware profiles, every coefficient with its source or its fit.

Where a figure lives: a GPU's datasheet peaks and its best achieved GEMM MFU and streaming
bandwidth stay in the hardware profile (any kernels can reach them; `calibrate` measures
them). Everything that depends on the kernels and runtime an engine uses — per-layer fixed
time, launches, collective α, attention and grouped-GEMM kernel efficiency, the achieved-
bandwidth ramp of small kernels, per-iteration CPU work — belongs to the engine. A value
measured or fitted for one (engine, GPU) pair goes in a ``[hardware.<gpu id>.<section>]``
table of the engine file and replaces the engine-wide value on that GPU only, so one file
answers for every GPU and the pairs the data supports are visible in it.

Lookup order: explicit path, the directories given by the caller, ``$SPECAGENT_ENGINE_DIR``,
then the shipped profiles. How the terms enter a pass's time: `costmodel.latency`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import stat
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from specagent.hardware.profile import HardwareProfile, Sourced, check_unique_names, find_profile, read_toml

ENGINE_ENV_VAR = "SPECAGENT_ENGINE_DIR"
#: vLLM: the most widely deployed open-source serving engine (and the first one the
#: Qwen3.5 model cards give serving commands for), so the default answer is what most
#: users would measure; `--serving-engine` picks another.
DEFAULT_ENGINE = "vllm"
#: Layer kinds with their own fixed time and kernel count: a decoder layer is one token
#: mixer (full attention or Gated DeltaNet) plus one FFN (dense MLP or MoE).
LAYER_KINDS = ("full_attention", "linear_attention", "dense_mlp", "moe")


class EngineProfileError(ValueError):
    """An engine profile file is missing, malformed, or names an unknown engine."""


class FittedTermsNotApplied(UserWarning):
    """A GPU profile none of an engine's per-GPU fitted terms are keyed to, though the engine has some: the
    engine-wide terms price it. The message names the profile file and how to key it (`terms_key`)."""


def _fingerprint(hw: HardwareProfile) -> tuple:
    """The datasheet figures that make two profiles the same GPU, whatever their ids."""
    return (float(hw.memory_capacity_gb.value), float(hw.memory_bandwidth_tb_s.value), float(hw.interconnect_gb_s.value),
            tuple(sorted((k, float(v.value)) for k, v in hw.peak_tflops.items())))


#: (path, mtime_ns, size) of a shipped GPU profile -> its `_fingerprint`: `terms_key` compares a GPU against every
#: shipped GPU an engine has per-GPU terms for, on every `for_hardware` call (a fit's every trial); the file is parsed
#: again only when it changed.
_FINGERPRINTS: dict[tuple[str, int, int], tuple] = {}


def _shipped_fingerprint(f: Path) -> tuple | None:
    """`_fingerprint` of the profile file `f` (None: no such file), cached while the file is unchanged."""
    from specagent.hardware.profile import load_profile_file

    try:
        st = f.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    key = (str(f), st.st_mtime_ns, st.st_size)
    if key not in _FINGERPRINTS:
        _FINGERPRINTS[key] = _fingerprint(load_profile_file(f))
    return _FINGERPRINTS[key]


# name -> (section, key, kind, required). Kinds: us (>= 0 float), count (int >= 0),
# batch (int >= 1), bool, fraction (0, 1.5], factor (0, 4], tokens (>= 0 float), mb (>= 0 float), tflops (> 0 float).
_SCALARS: dict[str, tuple[str, str, str, bool]] = {
    "cuda_graphs": ("cuda_graphs", "decode", "bool", True),
    "cuda_graph_max_batch": ("cuda_graphs", "max_batch", "batch", True),
    "cuda_graphs_mixed": ("cuda_graphs", "mixed", "bool", True),
    "iteration_us": ("per_pass", "iteration_us", "us", False),
    "per_sequence_us": ("per_pass", "per_sequence_us", "us", True),
    "launch_us": ("per_pass", "launch_us", "us", True),
    "request_us": ("per_request", "request_us", "us", True),
    "pass_kernels": ("per_pass", "kernels", "count", True),
    "allreduce_alpha_us": ("collectives", "allreduce_alpha_us", "us", True),
    "all_to_all_alpha_us": ("collectives", "all_to_all_alpha_us", "us", True),
    "moe_pad_tokens": ("kernels", "moe_pad_tokens", "tokens", True),
    "bandwidth_half_mb": ("kernels", "bandwidth_half_mb", "mb", True),
    "attention_mfu": ("kernels", "attention_mfu", "fraction", False),
    "moe_mfu": ("kernels", "moe_mfu", "fraction", False),
    "moe_tflops": ("kernels", "moe_tflops", "tflops", False),
    "gemm_mfu": ("kernels", "gemm_mfu", "fraction", False),
    "bandwidth": ("kernels", "bandwidth", "fraction", False),
    "weight_stream": ("kernels", "weight_stream", "factor", False),
    "floor_overlaps_reads": ("kernels", "floor_overlaps_reads", "bool", False),
}
_PER_KIND = {"layer_us": ("per_layer_us", "us"), "layer_kernels": ("kernels_per_layer", "count")}
#: Collective latencies: a profile limited to one GPU ([limits] max_gpus = 1, e.g. one calibrated
#: on a single GPU, where no collective can be measured) may leave them out; no pass it prices runs one.
_COLLECTIVES = ("allreduce_alpha_us", "all_to_all_alpha_us")
_GIB = 2.0**30


@dataclass(frozen=True)
class SchedulerDefault:
    """The batching limits an engine picks by itself when its server is started without them, for one class of GPU.

    Engines choose these by the GPU they find (vLLM: total device memory and the device
    name; SGLang: device memory), so a profile lists rows, first match wins; the last row
    matches every GPU. The memory compared is the hardware profile's capacity in GiB.
    """

    min_gpu_memory_gib: float  # the row applies to GPUs with at least this much memory ...
    not_gpus: tuple[str, ...]  # ... whose id and name contain none of these (lower case)
    max_num_seqs: int  # running sequences per replica (vLLM max_num_seqs, SGLang max_running_requests)
    max_batched_tokens: int  # tokens per iteration, decodes plus prefill chunks (vLLM max_num_batched_tokens)
    source: str

    def matches(self, hw: HardwareProfile) -> bool:
        names = f"{hw.id} {hw.name}".lower()
        return hw.capacity_bytes / _GIB >= self.min_gpu_memory_gib and not any(n in names for n in self.not_gpus)

    def describe(self) -> str:
        gpus = f"GPUs with >= {self.min_gpu_memory_gib:g} GiB" if self.min_gpu_memory_gib > 0 else "any GPU"
        if self.not_gpus:
            gpus += f" except {', '.join(self.not_gpus)}"
        return gpus


@dataclass(frozen=True)
class EngineProfile:
    """Fixed costs and kernel efficiencies of one serving engine (engine-wide, or resolved for one GPU).

    Optional fields fall back to the hardware profile: no ``iteration_us`` means the
    hardware's ``pass_overhead_us``; no ``gemm_mfu`` / ``bandwidth`` means the hardware's
    ``prefill_mfu`` / ``bandwidth``; no ``attention_mfu`` / ``moe_mfu`` means attention / the
    grouped expert GEMMs run at the GEMM efficiency; no ``moe_tflops``: no throughput ceiling. The ``ideal`` profile
    sets none of them and zeroes the rest, which is the
    roofline as it was before engine profiles existed.
    """

    id: str
    name: str
    version: str
    cuda_graphs: Sourced  # bool: pure-decode batches replay CUDA graphs (no launch cost)
    cuda_graph_max_batch: Sourced  # largest captured graph, in tokens per pass (= the decode batch for pure decode)
    cuda_graphs_mixed: Sourced  # bool: passes with prefill tokens replay graphs too (up to max_batch tokens)
    iteration_us: Sourced | None  # CPU work per iteration: scheduling, input preparation, sampling
    per_sequence_us: Sourced  # CPU work per sequence in the batch
    launch_us: Sourced  # CPU time to launch one kernel (exposed only without CUDA graphs)
    pass_kernels: Sourced  # kernels per pass outside the layers (embedding, final norm, LM head, sampling)
    request_us: Sourced  # per request before its first token, outside any pass: API server, tokenisation, admission, first detokenised chunk
    layer_us: dict[str, Sourced]  # GPU-side fixed time per layer by kind (LAYER_KINDS)
    layer_kernels: dict[str, Sourced]  # kernels launched per layer by kind
    allreduce_alpha_us: Sourced  # latency α of one tensor-parallel all-reduce
    all_to_all_alpha_us: Sourced  # latency α of one expert-parallel all-to-all (dispatch or combine)
    moe_pad_tokens: Sourced  # rows a grouped-GEMM MoE kernel computes per touched expert beyond its tokens
    bandwidth_half_mb: Sourced  # weight-streaming kernel size (per GPU) at which achieved bandwidth is half its asymptote
    attention_mfu: Sourced | None = None
    moe_mfu: Sourced | None = None  # asymptotic efficiency of the grouped MoE GEMMs (padding apart)
    #: ceiling of the grouped MoE GEMMs' throughput in TFLOP/s per GPU (None: none): published fused_moe kernel times
    #: reach about the same TFLOP/s on GPUs whose datasheet peaks differ 6-fold (measurements/moe_kernels.csv), so
    #: the efficiency is min(moe_mfu, moe_tflops / peak) of the compute dtype's peak
    moe_tflops: Sourced | None = None
    gemm_mfu: Sourced | None = None
    bandwidth: Sourced | None = None
    #: factor on `bandwidth` for the dense weight stream (every weight but the routed experts, and the LM head): one GEMV
    #: reading tens of MB in order runs nearer the copy rate than the paged KV reads and the scattered expert reads the
    #: shared term also prices (`costmodel.latency.weight_stream_s`; capped at the datasheet); None: 1, one rate for all
    weight_stream: Sourced | None = None
    #: bool: a weight-streaming kernel's per-layer floor overlaps its own weight reads (it takes max(floor, bytes time),
    #: `costmodel.latency.hidden_floor_s`), as a GPU kernel's fixed latency and its memory traffic do; None or false: they
    #: add, as a CPU's eager per-op dispatch does before the op runs (the `calibrate` profiles of a CPU), and as every
    #: profile was priced before this field.
    floor_overlaps_reads: Sourced | None = None
    #: Batching limits the engine uses when none are given, by GPU class (first match wins; the last row matches any GPU).
    scheduler: tuple[SchedulerDefault, ...] = ()
    overrides: dict[str, dict[str, Sourced]] = field(default_factory=dict)  # gpu id -> field name -> value
    #: Largest GPU count the profile may price ([limits] max_gpus; None: any). A profile whose
    #: collective latencies were measured on N GPUs (or not at all, on 1) says so; Deployment refuses more.
    max_gpus: Sourced | None = None
    resolved_for: str = ""  # the GPU id whose overrides are applied ("" = engine-wide)
    aliases: tuple[str, ...] = ()
    path: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)
    #: An engine generation's profile (`extends`): the id of the engine whose file it overlays, and the versions of that
    #: engine it prices (those below `versions_below`; `for_version` maps a measured row's engine and version to it).
    extends: str = ""
    versions_below: Sourced | None = None

    @property
    def lineage(self) -> tuple[str, ...]:
        """This engine's id and the id it extends: a fitted engine term keyed to either applies to it."""
        return (self.id, self.extends) if self.extends else (self.id,)

    def terms_key(self, hw: HardwareProfile) -> tuple[str, str]:
        """(key, warning) of GPU `hw`: the ``[hardware.<key>]`` table that prices it — its `terms_key`, else its id,
        else an alias, else the shipped GPU with the same datasheet figures (a copy under another id) — or its own id
        when none applies; the warning ("" = none) says so when the engine has fitted terms for other GPUs and `hw`
        is not a shipped profile (a FittedTermsNotApplied the scenario emits once per deployment)."""
        for k in (hw.terms_key, hw.id, *hw.aliases):
            if k and k in self.overrides:
                return k, ""
        have = ", ".join(sorted(self.overrides)) or "none"
        if hw.terms_key:
            return hw.id, (f"{hw.path or hw.id}: terms_key '{hw.terms_key}' names no per-GPU table of engine '{self.id}' "
                           f"({self.path or 'shipped'}; it has {have}): its engine-wide terms price this GPU")
        if not self.overrides:
            return hw.id, ""
        from specagent.hardware.profile import shipped_profile_dir

        mine = _fingerprint(hw)
        shipped = shipped_profile_dir()
        for gid in sorted(self.overrides):
            if _shipped_fingerprint(shipped / f"{gid}.toml") == mine:
                return gid, ""
        if hw.path and Path(hw.path).parent != shipped:
            return hw.id, (f"{hw.path}: engine '{self.id}' has fitted per-GPU terms for {have} but none for '{hw.id}' (no "
                           "terms_key, id, alias or identical datasheet figures match): its engine-wide terms price this "
                           "GPU; add terms_key = \"<id>\" to the profile to take that GPU's fitted terms")
        return hw.id, ""

    def for_hardware(self, hardware: "str | HardwareProfile") -> "EngineProfile":
        """This engine on one GPU: its ``[hardware.<key>]`` values replace the engine-wide ones. Given a profile, the
        key is `terms_key(profile)`; given an id, that id."""
        hid = self.terms_key(hardware)[0] if isinstance(hardware, HardwareProfile) else hardware.lower()
        if self.resolved_for == hid:
            return self
        if self.resolved_for:
            raise EngineProfileError(f"{self.path or self.id}: already resolved for '{self.resolved_for}', not '{hid}'")
        changes: dict[str, Any] = {"resolved_for": hid}
        for name, value in self.overrides.get(hid, {}).items():
            if "." in name:
                group, kind = name.split(".", 1)
                changes[group] = {**changes.get(group, getattr(self, group)), kind: value}
            else:
                changes[name] = value
        return dataclasses.replace(self, **changes)

    def scheduler_for(self, hw: HardwareProfile) -> SchedulerDefault:
        """The batching limits this engine starts with on GPU `hw` (the first `scheduler` row that matches)."""
        for row in self.scheduler:
            if row.matches(hw):
                return row
        raise EngineProfileError(f"{self.path or self.id}: no [[scheduler]] row matches {hw.name} (the last row must have "
                                 "min_gpu_memory_gib = 0 and no not_gpus)")

    def describe(self) -> str:
        graphs = f"CUDA graphs for decode ≤ {int(self.cuda_graph_max_batch.value)}" if self.cuda_graphs.value else "no CUDA graphs"
        return f"{self.name} ({self.version}; {graphs})"

    def figures(self) -> list[tuple[str, Any, str]]:
        """(name, value, source) of every term, for tables and `--json`."""
        out: list[tuple[str, Any, str]] = []
        for name in _SCALARS:
            v = getattr(self, name)
            if v is not None:
                out.append((name, v.value, v.source))
        if self.max_gpus is not None:
            out.append(("max_gpus", self.max_gpus.value, self.max_gpus.source))
        for group in _PER_KIND:
            for kind in LAYER_KINDS:
                v = getattr(self, group)[kind]
                out.append((f"{group}.{kind}", v.value, v.source))
        for row in self.scheduler:
            out.append((f"scheduler.max_num_seqs ({row.describe()})", row.max_num_seqs, row.source))
            out.append((f"scheduler.max_batched_tokens ({row.describe()})", row.max_batched_tokens, row.source))
        return out


def toml_location(name: str) -> tuple[str, list[str]]:
    """(section, keys) of an EngineProfile field in the TOML file; "layer_us.*" names every layer kind."""
    if name.startswith("layer_us"):
        return _PER_KIND["layer_us"][0], list(LAYER_KINDS) if name == "layer_us.*" else [name.split(".", 1)[1]]
    if name not in _SCALARS:
        raise EngineProfileError(f"no engine profile field '{name}' (known: {', '.join(_SCALARS)}, layer_us.<kind>)")
    return _SCALARS[name][0], [_SCALARS[name][1]]


#: Typo guards per kind: far beyond any engine's figure (the slowest fixed cost fitted is a few ms; vLLM's largest
#: CUDA graph is 8,192 tokens), so a value past them is a slip of units or digits, not a measurement.
_UPPER: dict[str, tuple[float, str]] = {"us": (10_000_000.0, "us (10 s)"), "count": (1_000_000, "kernels"),
                                        "batch": (10_000_000, ""), "fraction": (1.5, ""), "factor": (4.0, ""), "tokens": (1_000_000.0, "tokens"),
                                        "mb": (1_000_000.0, "MB"), "tflops": (1_000_000.0, "TFLOP/s")}


def _check(value: Any, kind: str, where: str, path: str) -> Any:
    if kind == "bool":
        if not isinstance(value, bool):
            raise EngineProfileError(f"{path}: field '{where}' must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EngineProfileError(f"{path}: field '{where}' must be a number, got {value!r}")
    if not math.isfinite(value):  # TOML's nan/inf: NaN fails every comparison below, so it must be named here
        raise EngineProfileError(f"{path}: field '{where}' must be a finite number, got {value!r}")
    hi, unit = _UPPER[kind]
    if value > hi:
        raise EngineProfileError(f"{path}: field '{where}' must be at most {hi:,g}{' ' + unit if unit else ''} (a guard against typos), got {value!r}")
    if kind in ("count", "batch"):
        if int(value) != value or value < (1 if kind == "batch" else 0):
            raise EngineProfileError(f"{path}: field '{where}' must be an integer >= {1 if kind == 'batch' else 0}, got {value!r}")
        return int(value)
    if kind == "tflops" and not value > 0:
        raise EngineProfileError(f"{path}: field '{where}' must be a throughput > 0 TFLOP/s, got {value!r}")
    if kind == "fraction" and not 0 < value <= 1.5:
        raise EngineProfileError(f"{path}: field '{where}' must be in (0, 1.5], got {value!r}")
    if kind == "factor" and not value > 0:
        raise EngineProfileError(f"{path}: field '{where}' must be a factor > 0, got {value!r}")
    if value < 0:
        raise EngineProfileError(f"{path}: field '{where}' must be non-negative, got {value!r}")
    return float(value)


def _item(table: dict[str, Any], section: str, key: str, kind: str, path: str, prefix: str = "") -> Sourced:
    where = f"{prefix}{section}.{key}"
    item = table[key]
    if not isinstance(item, dict) or "value" not in item or "source" not in item:
        raise EngineProfileError(f"{path}: field '{where}' must be an inline table {{ value = ..., source = \"...\" }}, got {item!r}")
    if not str(item["source"]).strip():
        raise EngineProfileError(f"{path}: field '{where}' has an empty source")
    extra = set(item) - {"value", "source"}
    if extra:
        raise EngineProfileError(f"{path}: field '{where}' has unknown keys {sorted(extra)} (expected value, source)")
    return Sourced(value=_check(item["value"], kind, where, path), source=str(item["source"]))


def _sections(data: dict[str, Any], path: str, prefix: str, required: bool, optional: frozenset[str] = frozenset()) -> dict[str, Sourced]:
    """Every known field present in `data` (a profile or one override table), by field name (`optional`: required ones that may be absent)."""
    known_sections = {s for s, *_ in _SCALARS.values()} | {s for s, _ in _PER_KIND.values()}
    out: dict[str, Sourced] = {}
    for section, table in data.items():
        if section not in known_sections:
            continue
        if not isinstance(table, dict):
            raise EngineProfileError(f"{path}: [{prefix}{section}] must be a table")
        known = {k for s, k, *_ in _SCALARS.values() if s == section}
        known |= set(LAYER_KINDS) if section in {s for s, _ in _PER_KIND.values()} else set()
        unknown = set(table) - known
        if unknown:
            raise EngineProfileError(f"{path}: [{prefix}{section}] has unknown fields {sorted(unknown)} (known: {sorted(known)})")
    for name, (section, key, kind, req) in _SCALARS.items():
        table = data.get(section, {})
        if key in table:
            out[name] = _item(table, section, key, kind, path, prefix)
        elif req and required and name not in optional:
            raise EngineProfileError(f"{path}: missing field '{prefix}{section}.{key}' (expected {{ value = ..., source = \"...\" }})")
    for group, (section, kind) in _PER_KIND.items():
        table = data.get(section, {})
        for lk in LAYER_KINDS:
            if lk in table:
                out[f"{group}.{lk}"] = _item(table, section, lk, kind, path, prefix)
            elif required:
                raise EngineProfileError(f"{path}: missing field '{prefix}{section}.{lk}' (one per layer kind: {', '.join(LAYER_KINDS)})")
    return out


_SCHEDULER_KEYS = {"min_gpu_memory_gib", "not_gpus", "max_num_seqs", "max_batched_tokens", "source"}


def _scheduler_rows(data: dict[str, Any], path: str) -> tuple[SchedulerDefault, ...]:
    """The [[scheduler]] rows: each a GPU class and the limits the engine picks on it, with one source."""
    rows = data.get("scheduler")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise EngineProfileError(f"{path}: missing [[scheduler]] rows (each: min_gpu_memory_gib, max_num_seqs, max_batched_tokens, "
                                 "source; optional not_gpus), the batching limits the engine picks by itself")
    out = []
    for i, r in enumerate(rows):
        where = f"{path}: [[scheduler]] row {i + 1}"
        unknown = set(r) - _SCHEDULER_KEYS
        if unknown:
            raise EngineProfileError(f"{where} has unknown keys {sorted(unknown)} (known: {sorted(_SCHEDULER_KEYS)})")
        for key in ("min_gpu_memory_gib", "max_num_seqs", "max_batched_tokens", "source"):
            if key not in r:
                raise EngineProfileError(f"{where}: missing '{key}'")
        mem = r["min_gpu_memory_gib"]
        if isinstance(mem, bool) or not isinstance(mem, (int, float)) or not math.isfinite(mem) or not 0 <= mem <= 100_000:
            raise EngineProfileError(f"{where}: 'min_gpu_memory_gib' must be a finite number in [0, 100,000] GiB, got {mem!r}")
        for key in ("max_num_seqs", "max_batched_tokens"):
            if isinstance(r[key], bool) or not isinstance(r[key], int) or r[key] < 1:
                raise EngineProfileError(f"{where}: '{key}' must be a whole number >= 1, got {r[key]!r}")
        if r["max_batched_tokens"] < r["max_num_seqs"]:
            raise EngineProfileError(f"{where}: max_batched_tokens ({r['max_batched_tokens']}) must be >= max_num_seqs "
                                     f"({r['max_num_seqs']}) so every running decode fits one iteration")
        names = r.get("not_gpus", [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise EngineProfileError(f"{where}: 'not_gpus' must be a list of GPU name fragments, got {names!r}")
        if not str(r["source"]).strip():
            raise EngineProfileError(f"{where}: empty 'source'")
        out.append(SchedulerDefault(float(mem), tuple(n.lower() for n in names), r["max_num_seqs"], r["max_batched_tokens"],
                                    str(r["source"])))
    if out[-1].min_gpu_memory_gib != 0 or out[-1].not_gpus:
        raise EngineProfileError(f"{path}: the last [[scheduler]] row must match every GPU (min_gpu_memory_gib = 0, no not_gpus)")
    return tuple(out)


def parse_engine(data: dict[str, Any], path: str = "<memory>") -> EngineProfile:
    """Validate an engine profile's TOML table, naming the file and field on any problem."""
    for key in ("id", "name", "version"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise EngineProfileError(f"{path}: missing field '{key}' (expected a string)")
    known_top = {"schema_version", "id", "name", "version", "aliases", "hardware", "scheduler", "limits", "provenance", "extends",
                 "versions"}
    known_top |= {s for s, *_ in _SCALARS.values()} | {s for s, _ in _PER_KIND.values()}
    unknown = set(data) - known_top
    if unknown:  # a misspelt [colectives] would otherwise be skipped and its terms reported missing
        raise EngineProfileError(f"{path}: unknown key(s) {sorted(unknown)} (known: {sorted(known_top)})")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise EngineProfileError(f"{path}: field 'aliases' must be a list of names, got {aliases!r}")
    max_gpus = _limits(data, path)
    single = max_gpus is not None and max_gpus.value == 1
    fields = _sections(data, path, "", required=True, optional=frozenset(_COLLECTIVES) if single else frozenset())
    for name in _COLLECTIVES:
        if name not in fields:  # only possible with max_gpus = 1
            fields[name] = Sourced(0.0, f"not applicable: [limits] max_gpus = 1 ({max_gpus.source}); a single GPU runs no collective")
    overrides: dict[str, dict[str, Sourced]] = {}
    hw = data.get("hardware", {})
    if not isinstance(hw, dict):
        raise EngineProfileError(f"{path}: [hardware] must be a table of [hardware.<gpu id>] tables")
    for hid, table in hw.items():
        if not isinstance(table, dict):
            raise EngineProfileError(f"{path}: [hardware.{hid}] must be a table")
        prefix = f"hardware.{hid}."
        known = {s for s, *_ in _SCALARS.values()} | {s for s, _ in _PER_KIND.values()}
        bad = set(table) - known
        if bad:
            raise EngineProfileError(f"{path}: [hardware.{hid}] has unknown sections {sorted(bad)} (known: {sorted(known)})")
        overrides[hid.lower()] = _sections(table, path, prefix, required=False)
    per_kind = {g: {lk: fields.pop(f"{g}.{lk}") for lk in LAYER_KINDS} for g in _PER_KIND}
    fields = {name: fields.get(name) for name in _SCALARS}  # optional ones absent: None (the hardware's value)
    return EngineProfile(
        id=data["id"].lower(), name=data["name"], version=data["version"], **fields, **per_kind,  # type: ignore[arg-type]
        scheduler=_scheduler_rows(data, path), overrides=overrides, aliases=tuple(str(a).lower() for a in data.get("aliases", [])),
        path=path, provenance=dict(data.get("provenance", {})), max_gpus=max_gpus, extends=str(data.get("extends", "")).lower(),
        versions_below=_versions(data, path),
    )


def _versions(data: dict[str, Any], path: str) -> Sourced | None:
    """The optional [versions] table of an engine generation: below = { value = "0.5", source = "..." }."""
    table = data.get("versions")
    if table is None:
        return None
    if not data.get("extends"):
        raise EngineProfileError(f"{path}: [versions] needs 'extends' (the engine whose versions it covers)")
    if not isinstance(table, dict) or set(table) != {"below"}:
        raise EngineProfileError(f"{path}: [versions] must hold one field, below = {{ value = \"0.5\", source = \"...\" }}")
    item = table["below"]
    if not isinstance(item, dict) or set(item) != {"value", "source"} or not str(item["source"]).strip():
        raise EngineProfileError(f"{path}: field 'versions.below' must be an inline table {{ value = \"0.5\", source = \"...\" }}")
    if version_key(item["value"]) is None:
        raise EngineProfileError(f"{path}: field 'versions.below' must be a version such as \"0.5\", got {item['value']!r}")
    return Sourced(str(item["value"]), str(item["source"]))


def version_key(version: Any) -> tuple[int, ...] | None:
    """The leading release numbers of a version string ("0.4.6.post1" -> (0, 4, 6)); None when it states none ("", "main
    as of 2025-08-19")."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version) if isinstance(version, str) else None
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _overlay(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`base` with `top` written over it, nested tables merged (a {value, source} item replaces whole)."""
    out = dict(base)
    for k, v in top.items():
        out[k] = _overlay(out[k], v) if isinstance(v, dict) and "value" not in v and isinstance(out.get(k), dict) else v
    return out


def _limits(data: dict[str, Any], path: str) -> Sourced | None:
    """The optional [limits] table: max_gpus = { value = N, source = "..." }."""
    table = data.get("limits")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise EngineProfileError(f"{path}: [limits] must be a table")
    unknown = set(table) - {"max_gpus"}
    if unknown:
        raise EngineProfileError(f"{path}: [limits] has unknown fields {sorted(unknown)} (known: ['max_gpus'])")
    return _item(table, "limits", "max_gpus", "batch", path) if "max_gpus" in table else None


def load_engine_file(path: str | Path) -> EngineProfile:
    """One engine profile file; a generation's file (`extends = "<id>"`) is read over `<id>.toml` from its own folder, else
    the shipped one: it states only the terms where that generation differs."""
    data = read_toml(path, EngineProfileError, "engine profile")
    return parse_engine(with_base(data, Path(path)), str(path))


def with_base(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """`data` (one profile file's table) read over the file it `extends`, if it names one; else `data` itself."""
    base_id = data.get("extends")
    if base_id is None:
        return data
    if not isinstance(base_id, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", base_id):
        raise EngineProfileError(f"{path}: field 'extends' must be an engine id, got {base_id!r}")
    shipped = Path(str(resources.files("specagent.hardware") / "engines"))
    for d in (path.parent, shipped):
        f = d / f"{base_id.lower()}.toml"
        if f.is_file() and f.resolve() != path.resolve():
            break
    else:
        raise EngineProfileError(f"{path}: extends '{base_id}', but no {base_id.lower()}.toml is beside it or shipped")
    base = read_toml(f, EngineProfileError, "engine profile")
    if "extends" in base:
        raise EngineProfileError(f"{path}: extends '{base_id}' ({f}), which itself extends '{base['extends']}': one level only")
    own = {k: v for k, v in data.items() if k != "provenance"}
    merged = _overlay({k: v for k, v in base.items() if k not in ("aliases", "provenance")}, own)
    merged["provenance"] = {**({"base": {"file": str(f), **base.get("provenance", {})}}), **data.get("provenance", {})}
    return merged


def _search_dirs(extra_dirs: Iterable[str | Path] | None) -> list[Path]:
    dirs = [Path(d) for d in (extra_dirs or [])]
    dirs += [Path(d) for d in os.environ.get(ENGINE_ENV_VAR, "").split(os.pathsep) if d]
    dirs.append(Path(str(resources.files("specagent.hardware") / "engines")))
    return dirs


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def list_engines(extra_dirs: Iterable[str | Path] | None = None) -> list[EngineProfile]:
    """All engine profiles visible from the search path; earlier directories shadow later ones."""
    return EngineCatalog(extra_dirs).profiles()


def load_engine(name_or_path: str | Path = DEFAULT_ENGINE, extra_dirs: Iterable[str | Path] | None = None) -> EngineProfile:
    """Find an engine profile by id, alias or file path; unknown names list the known ones."""
    return EngineCatalog(extra_dirs).load(name_or_path)


def engine_dirs(hardware_dirs: Iterable[str | Path] | None) -> list[Path]:
    """The engine-profile folders of user hardware dirs: each `--hardware-dir D` lends `D/engines/` (GPU profiles sit
    in D itself, so an engine profile beside them would be read as a GPU)."""
    return [Path(d) / "engines" for d in (hardware_dirs or [])]


class EngineCatalog:
    """The serving-engine profiles visible from one search path, each file read and parsed at most once.

    One catalog serves one run (`Scenario.setting` makes one and resolves both deployments
    through it), so a run reads the engine folders once, and an edited profile is read
    afresh by the next run: a memo owned by the caller, not process-wide state.
    `extra_dirs` are engine folders searched before $SPECAGENT_ENGINE_DIR and the shipped
    ones; `EngineCatalog.for_hardware_dirs` takes `--hardware-dir` folders instead.
    """

    def __init__(self, extra_dirs: Iterable[str | Path] | None = None):
        self.dirs = _search_dirs(extra_dirs)
        self._listed: list[EngineProfile] | None = None
        self._files: dict[str, EngineProfile] = {}

    @staticmethod
    def with_mode(profile: EngineProfile, name: str) -> EngineProfile:
        """`profile` as the name selects it: NAME:eager is the same engine with CUDA graphs off."""
        if not name.lower().endswith(":eager"):
            return profile
        return dataclasses.replace(profile, cuda_graphs=Sourced(False, f"selected with '{name}': CUDA graphs off"))

    @classmethod
    def for_hardware_dirs(cls, hardware_dirs: Iterable[str | Path] | None) -> "EngineCatalog":
        return cls(engine_dirs(hardware_dirs))

    def _file(self, path: str | Path) -> EngineProfile:
        key = str(Path(path).resolve())
        prof = self._files.get(key)
        if prof is None:
            prof = self._files[key] = load_engine_file(path)
        return prof

    def profiles(self) -> list[EngineProfile]:
        """Every profile on the search path; earlier directories shadow later ones."""
        if self._listed is None:
            seen: dict[str, EngineProfile] = {}
            for d in self.dirs:
                if d.is_dir():
                    for f in sorted(d.glob("*.toml")):
                        prof = self._file(f)
                        seen.setdefault(prof.id, prof)
            self._listed = list(seen.values())
            check_unique_names(self._listed, EngineProfileError, "serving engine")
        return self._listed

    def for_version(self, name: str, version: str) -> EngineProfile:
        """The profile that prices engine `name` at `version`: a visible generation profile that extends it and whose
        [versions] below covers the version, else `name`'s own. A version that states no release number (empty, "main as
        of ...") is priced by `name`'s own profile, the current engine."""
        eng = self.load(name)
        key = version_key(version)
        if key is None or eng.extends:
            return eng
        for prof in self.profiles():
            below = version_key(prof.versions_below.value) if prof.versions_below is not None else None
            if prof.extends == eng.id and below is not None and key < below:
                return prof
        return eng

    def load(self, name_or_path: str | Path = DEFAULT_ENGINE) -> EngineProfile:
        """An engine profile by id, alias or file path (NAME:eager: CUDA graphs off); unknown names list the known ones."""
        text = str(name_or_path)
        if text.lower().endswith(":eager"):  # the same engine with CUDA graphs off (e.g. vLLM --enforce-eager)
            return self.with_mode(self.load(text[: -len(":eager")]), text)
        if text.endswith(".toml") or os.sep in text:
            return self._file(text)
        engines = self.profiles()
        prof = find_profile(engines, text, EngineProfileError, "serving engine")
        if prof is not None:
            return prof
        known = ", ".join(sorted(p.id for p in engines))
        raise EngineProfileError(f"unknown serving engine '{text}'; known: {known} (or pass a .toml path)")
