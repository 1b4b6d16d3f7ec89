"""Published serving rows as targets of the cost model, and the closed-loop prediction of each (latency_fit.py fits it).

How a published row becomes a prediction (every time through `roofline.estimate`, the
same pass-time function everything else uses):

* the deployment: the row's model config, GPU profile, GPU count, TP (EP > 1 → tp+ep),
  weight and KV dtypes, the recurrent-state dtype (`--mamba-ssm-dtype` in its recorded flags, else
  float32), and its engine profile (CUDA graphs off where the row says so);
* closed loop at concurrency C (``--max-concurrency C``, or an open-loop request rate λ
  turned into C = λ × mean end-to-end latency by Little's law): the running batch B is C,
  capped by how many sequences of I + O tokens fit in memory (`Deployment.max_sequences`).
  With d one decode iteration of B sequences at context I + O/2 and P one prefill of I
  tokens, each client starts a new request when its last one ends, so the other B − 1
  running requests arrive at λ = (B − 1)/L (L the request lifetime, TTFT + (O − 1)·TPOT)
  and their prefills take a fraction ρ = λP of the engine's time (`closed_loop`):
  - TPOT = d / (1 − ρ): the decode iterations of a request's output, stalled by the other
    requests' prefills (whether a prefill runs as its own batch, as in SGLang, or in
    chunks of the scheduler's token budget mixed with decodes, as in vLLM, the prefill
    work per unit time is the same, so the budget changes the spread of TPOT, not its
    mean); solved exactly with L, which itself depends on TPOT;
  - TTFT = the engine's per-request overhead (`request_us`: API server, tokenisation,
    admission, first detokenised chunk) + the rest of the iteration in progress when the
    request arrives (R: a decode iteration with probability 1 − ρ, another request's
    prefill with probability ρ, each half done on average; 0 when nothing else runs, as
    at concurrency 1) + its own prefill, batched with the prefills of the requests that
    arrived during R (P·(1 + λR));
  - output throughput = B × O / L;
  - a row that gives only a **median** inter-token latency (no TPOT) is one decode iteration d: the other requests'
    prefills stall a share ρ of the gaps (under half wherever the model is used), so the median gap has none;
* a static batch of B (``benchmark_latency``): end-to-end latency = one prefill of B × I
  tokens plus O − 1 decode iterations of B sequences at contexts I + 1 … I + O − 1.

Rows the tool cannot describe (unknown model, GPU, engine or dtype, data parallelism, a
deployment that does not fit, no running batch stated) are skipped with the reason; so
are rows tagged ``[queued]`` by the dataset (their mean TTFT is over ten times the
concurrency-1 TTFT of the same setup: requests waited behind an admission limit the
source does not state, so the running batch, on which TPOT and TTFT both depend, is
unknown), and open-loop rows whose measured output throughput is under 90% of the offered rate × output
length (`OPEN_LOOP_SERVED_SHARE`: the queue grew for the whole run, so Little's law gives no running batch). The
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from specagent.costmodel.deployment import Deployment
from specagent.costmodel.dtypes import canonical_dtype, dtype_bytes
from specagent.costmodel.latency import latency_terms, request_overhead_s
from specagent.costmodel.model_spec import ModelSpecError, load_model_spec
from specagent.costmodel.passes import Passes
from specagent.costmodel.roofline import Coefficients, coefficients, estimate
from specagent.hardware.serving_engine import EngineCatalog, EngineProfile, EngineProfileError
from specagent.hardware.profile import HardwareProfile, HardwareProfileError, Sourced, load_hardware
from specagent.measurements import ServingRow

METRICS = ("tpot", "ttft", "e2e", "throughput")
class Skip(ValueError):
    """A row the cost model cannot describe; the message is the reason."""


#: The dataset's tag for runs whose requests queued behind an unstated admission limit (measurements/README.md).
QUEUED_TAG = "[queued]"
#: An open-loop run is a steady state only while the engine serves what arrives. A finite run that does falls short of the
#: offered output rate (request rate x output tokens) only by its drain, the B running requests of N (a few per cent in
#: the dataset); one that serves less than this share of it was queueing, its latency growing for as long as it ran.
OPEN_LOOP_SERVED_SHARE = 0.9
#: The serving engines the fit has coefficients for (each has a shipped profile in hardware/engines/).
FIT_ENGINES = ("vllm", "sglang", "tensorrt-llm")
#: Engines a row names that run another engine's kernels, with the source that says so.
ENGINE_BACKENDS = {
    "nim": ("tensorrt-llm", "NVIDIA NIM for LLMs runs pre-compiled TensorRT-LLM engines for its optimized profiles (one per GPU, "
            "GPU count and precision, e.g. H100 fp8 TP2) and falls back to a generic backend only where none exists "
            "(docs.nvidia.com/nim/large-language-models/1.5.0/profiles.html, 'Model Profiles')"),
}


@dataclass(frozen=True)
class Target:
    """One measured figure of one row, with everything needed to predict it."""

    row: ServingRow
    metric: str  # tpot | ttft | e2e | throughput
    measured: float  # seconds, or tokens/s for throughput
    dep: Deployment
    concurrency: float  # requests in flight (static batch: the batch)
    batch: int  # running batch B
    input_tokens: float
    output_tokens: float
    key: tuple  # deployment key: targets that share it are priced in one `estimate` call
    #: Clients of a closed loop waiting for a sequence slot: concurrency − B where the engine's own limit on running
    #: sequences (its [[scheduler]] max_num_seqs) caps the batch below the concurrency, else 0 (`closed_loop_queued`).
    queued: float = 0.0

    @property
    def static(self) -> bool:
        """A static batch (`benchmark_latency`): one prefill of the batch, then its decode steps; not a closed loop."""
        return self.row.batch is not None and self.row.concurrency is None

    @property
    def model_class(self) -> str:
        m = self.dep.model
        return ("hybrid " if m.num_linear_layers else "") + ("MoE" if m.is_moe else "dense")

    @property
    def load_class(self) -> str:
        """The issue's target classes: TPOT by concurrency, TTFT; e2e and throughput by concurrency too."""
        if self.metric == "ttft":
            return "ttft"
        name = "e2e_loop" if self.metric == "e2e" and not self.static else self.metric  # a request's lifetime in a closed loop
        return f"{name}_c<=16" if self.concurrency <= 16 else f"{name}_c>16"


@dataclass(frozen=True)
class Skipped:
    row: ServingRow
    reason: str


# ------------------------------------------------------------------------- rows -> targets
def cached_hardware(gpu: str, cache: dict[str, HardwareProfile | None]) -> HardwareProfile | None:
    """`gpu`'s profile, loaded once per GPU for a whole file of rows; None: no such profile."""
    if gpu not in cache:
        try:
            cache[gpu] = load_hardware(gpu)
        except HardwareProfileError:
            cache[gpu] = None
    return cache[gpu]


def _deployment(row: ServingRow, engines: dict[str, EngineProfile], profiles: dict[str, HardwareProfile | None],
                catalog: EngineCatalog) -> Deployment:
    try:
        spec = load_model_spec(row.model)
    except ModelSpecError as exc:
        raise Skip(f"model not describable: {exc}") from None
    hw = cached_hardware(row.gpu, profiles)
    if hw is None:
        raise Skip(f"no hardware profile for GPU '{row.gpu}'")
    name = ENGINE_BACKENDS.get(row.engine, (row.engine, ""))[0]
    eng = engines.get(name)
    if eng is None:  # the engine's own profile, or the generation profile that covers the row's version (sglang-0.4)
        try:
            eng = catalog.for_version(name, row.engine_version)
        except EngineProfileError:
            raise Skip(f"no serving-engine profile for '{row.engine}'") from None
    if row.cuda_graphs is False:
        eng = dataclasses.replace(eng, cuda_graphs=Sourced(False, f"row {row.row_id}: CUDA graphs off"))
    weight_dtype, kv_dtype = (canonical_dtype(d or "bf16") for d in (row.weight_dtype, row.kv_dtype))
    for d, name in ((weight_dtype, row.weight_dtype), (kv_dtype, row.kv_dtype)):
        try:
            dtype_bytes(d)
        except ValueError:
            raise Skip(f"dtype '{name}' not modelled") from None
    if row.dp and row.dp > 1:
        raise Skip(f"data parallelism (dp={row.dp}) not modelled")
    tp = row.tp or row.gpus
    if tp != row.gpus:
        raise Skip(f"tp={tp} on {row.gpus} GPUs (pipeline or data parallelism) not modelled")
    par = "tp+ep" if (row.ep and row.ep > 1 and spec.is_moe) else "tp"
    try:
        return Deployment(spec, hw, gpus=row.gpus, parallelism=par, weight_dtype=weight_dtype, kv_dtype=kv_dtype, serving_engine=eng,
                          state_dtype=state_dtype_of(row))
    except ValueError as exc:
        raise Skip(str(exc)) from None


#: `--mamba-ssm-dtype` in a row's recorded server flags: SGLang keeps the Gated DeltaNet recurrent state in that dtype
#: instead of the config's `mamba_ssm_dtype` (float32 in every shipped Qwen3.5 config; sgl-project/sglang
#: python/sglang/srt/server_args.py, `--mamba-ssm-dtype`, "the data type of the SSM states in mamba cache"). Decode reads
#: and writes that state once per sequence per step, so a bfloat16 state moves half the bytes.
_SSM_DTYPE_FLAG = re.compile(r"--mamba-ssm-dtype[ =]+(float32|bfloat16|float16)\b")
_SSM_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def state_dtype_of(row: ServingRow) -> str:
    """The recurrent-state dtype a row's server ran with: its `--mamba-ssm-dtype` flag, else float32 (the configs')."""
    m = _SSM_DTYPE_FLAG.search(row.notes or "")
    return _SSM_DTYPES[m.group(1)] if m else "fp32"


def skipped_by_reason(skipped: Sequence[Skipped]) -> list[tuple[str, list[str]]]:
    """(reason, row ids) for every exclusion reason, most rows first: what a validation left out and why."""
    groups: dict[str, list[str]] = defaultdict(list)
    for s in skipped:
        groups[s.reason].append(s.row.row_id)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def targets_from_rows(rows: Iterable[ServingRow], engines: dict[str, EngineProfile] | None = None) -> tuple[list[Target], list[Skipped]]:
    """Every latency figure of every row the cost model can describe; the rest with the reason."""
    engines = engines or {}
    profiles: dict[str, HardwareProfile | None] = {}
    catalog = EngineCatalog()
    out: list[Target] = []
    skipped: list[Skipped] = []
    for row in rows:
        try:
            out.extend(_row_targets(row, engines, profiles, catalog))
        except Skip as exc:
            skipped.append(Skipped(row, str(exc)))
    return out, skipped


def mean_lengths(row: ServingRow) -> tuple[float, float]:
    """Mean input and output tokens of a row's requests.

    `sglang.bench_serving --dataset-name random` draws each request's lengths uniformly
    from [len × ratio, len] with --random-range-ratio defaulting to 0.0 (sgl-project/sglang
    python/sglang/bench_serving.py @0033168f, sample_random_requests), so a row whose
    recorded command gives no ratio measured requests of about half the nominal lengths.
    """
    i, o = row.input_tokens, row.output_tokens
    if i is None or o is None:
        raise Skip("input or output length not given")
    cmd = row.notes
    if "sglang.bench_serving" in cmd and "--dataset-name random" in cmd and "--random-range-ratio" not in cmd:
        return (i + 1) / 2.0, o / 2.0
    return i, o


#: The statistics a row's figures are fitted as: a mean (or not stated), and a median where a TPOT is one.
FITTED_STATISTICS = ("", "mean", "median")


def _row_targets(row: ServingRow, engines: dict[str, EngineProfile], profiles: dict[str, HardwareProfile | None],
                 catalog: EngineCatalog) -> list[Target]:
    if row.statistic.strip().lower() not in FITTED_STATISTICS:  # a p99 fitted as a mean moved the coefficients
        raise Skip(f"statistic {row.statistic!r}: the fit reads means (and a median TPOT), not a percentile or other "
                   "statistic")
    if QUEUED_TAG in row.notes:
        raise Skip(f"{QUEUED_TAG}: requests waited behind an admission limit the source does not state, so the running batch "
                   "(on which TPOT and TTFT both depend) is unknown")
    dep = _deployment(row, engines, profiles, catalog)
    i, o = mean_lengths(row)
    if o < 1:
        raise Skip("output length below one token")
    key = (row.model, row.gpu, row.gpus, dep.parallelism, dep.weight_dtype, dep.kv_dtype, dep.state_dtype, dep.serving_engine.id,
           bool(dep.serving_engine.cuda_graphs.value))
    static = row.batch is not None and row.concurrency is None
    if static:
        b = int(row.batch)  # type: ignore[arg-type]
        conc = float(b)
    else:
        conc = row.concurrency
        if conc is None and row.request_rate is not None and row.e2e_latency_ms is not None:
            offered = row.request_rate * o
            served = row.output_throughput_tok_s
            if served is not None and served < OPEN_LOOP_SERVED_SHARE * offered:
                raise Skip(f"open loop above capacity: served {served:,.0f} of the offered {offered:,.0f} output tokens/s "
                           f"(under {OPEN_LOOP_SERVED_SHARE:.0%}): the queue grew for the whole run, so it has no steady state")
            conc = row.request_rate * row.e2e_latency_ms / 1000.0  # Little's law on the measured latency
        if conc is None:
            raise Skip("no concurrency, batch or request rate with latency: the running batch is not stated (burst run)")
        b = max(1, round(conc))
    queued = 0.0
    if not static:
        # an engine that runs at most N sequences together (plain `transformers serve`: one) queues the other clients
        cap = dep.serving_engine.scheduler_for(dep.hardware).max_num_seqs
        if b > cap:
            queued, b = float(conc) - cap, cap
    ctx = int(i + o)
    fit = dep.max_sequences(ctx)
    if fit < 1:
        raise Skip(f"does not fit: {dep.describe()} cannot hold one sequence of {ctx} tokens by the memory model")
    if static and b > fit:
        raise Skip(f"static batch {b} of {ctx} tokens does not fit by the memory model (fits {fit})")
    # a closed loop not tagged [queued] admitted every client: its running batch is the concurrency (the memory
    # model, whose KV dtype and memory fraction are the engine's unstated defaults, is not allowed to overrule that)
    figures: list[tuple[str, float]] = []
    if static:
        if row.e2e_latency_ms is not None:
            figures.append(("e2e", row.e2e_latency_ms / 1e3))
        elif row.total_throughput_tok_s is not None:
            # (prompt + generated tokens) / time of the whole batch (e.g. the Qwen3 Speed Benchmark's "Speed"): the same
            # run's end-to-end time, B x (I + O) / throughput, so it is priced as one
            figures.append(("e2e", b * (i + o) / row.total_throughput_tok_s))
    else:
        tpot = row.tpot_ms if row.tpot_ms is not None else row.itl_ms
        if tpot is not None:
            figures.append(("tpot", tpot / 1e3))
        if row.ttft_ms is not None:
            figures.append(("ttft", row.ttft_ms / 1e3))
        if row.e2e_latency_ms is not None and (tpot is not None or row.ttft_ms is not None):
            figures.append(("e2e", row.e2e_latency_ms / 1e3))  # a request's lifetime: scored beside TTFT and TPOT, not fitted
        if tpot is None and row.ttft_ms is None and row.output_throughput_tok_s is not None:
            figures.append(("throughput", row.output_throughput_tok_s))
    if not figures:
        raise Skip("no latency figure this mapping can predict for this kind of run")
    return [Target(row, m, v, dep, float(conc), b, float(i), float(o), key, queued) for m, v in figures]


# ------------------------------------------------------------------------- predictions
@dataclass
class _Plan:
    """The passes of every target on one deployment key, concatenated, and how each target reads them."""

    dep: Deployment
    passes: Passes
    slices: list[dict[str, tuple[int, int, float]]]  # per target: quantity -> (start, end, weight)
    targets: list[Target]


def _plan(targets: Sequence[Target]) -> list[_Plan]:
    groups: dict[tuple, list[Target]] = defaultdict(list)
    for t in targets:
        groups[t.key].append(t)
    plans = []
    for key in sorted(groups, key=str):
        ts = groups[key]
        parts: list[Passes] = []
        slices: list[dict[str, tuple[int, int, float]]] = []
        n = 0

        def add(p: Passes, weight: float = 1.0) -> tuple[int, int, float]:
            nonlocal n
            parts.append(p)
            n += len(p)
            return (n - len(p), n, weight)

        for t in ts:
            i, o, b = t.input_tokens, t.output_tokens, t.batch
            q: dict[str, tuple[int, int, float]] = {}
            if t.static:
                q["prefill"] = add(Passes.uniform(i, 0, b))
                steps = max(int(round(o)) - 1, 0)
                if steps:
                    ctx, w = decode_contexts(i, steps)
                    q["decode_sum"] = add(Passes.uniform(1, ctx, b), w)
            else:
                q["decode"] = add(Passes.uniform(1, i + o / 2.0, b))
                q["prefill"] = add(Passes.uniform(i, 0, 1))
            slices.append(q)
        plans.append(_Plan(ts[0].dep, Passes.concat(parts), slices, ts))
    return plans


#: Decode steps of a static batch priced one by one up to this many; a longer run is priced at the midpoints of this many
#: equal spans of its contexts, each weighted by its span's steps. A step's time is linear in its context wherever one bound
#: (weights + KV reads, or FLOPs) holds, where the midpoint rule is exact; it saves 30x of the fit's time on 2,048-token runs.
DECODE_SAMPLES = 64


def decode_contexts(input_tokens: float, steps: int) -> tuple[np.ndarray, float]:
    """(contexts, weight) whose weighted sum of step times prices decode steps at contexts I + 1 ... I + steps."""
    if steps <= DECODE_SAMPLES:
        return input_tokens + np.arange(1, steps + 1, dtype=np.float64), 1.0
    span = steps / DECODE_SAMPLES
    return input_tokens + 0.5 + span * (np.arange(DECODE_SAMPLES, dtype=np.float64) + 0.5), span


#: Fixed-point rounds of `closed_loop` (TTFT depends on TPOT through λ and R, weakly): a fixed count keeps the
#: prediction a smooth function of the coefficients for the optimiser; 6 rounds settle it to < 1e-9 on the dataset.
CLOSED_LOOP_ROUNDS = 6


def closed_loop(decode: float, prefill: float, request: float, batch: float, output_tokens: float) -> tuple[float, float, float]:
    """(TPOT, TTFT, lifetime) of a closed-loop benchmark with `batch` requests running (module docstring).

    TPOT solves TPOT·(1 − (B − 1)·P / L) = d with L = TTFT + m·TPOT, m = O − 1, exactly
    (the positive root of m·x² + (T − k − d·m)·x − d·T = 0, k = (B − 1)·P); TTFT = request +
    R + P·(1 + λR) with λ = (B − 1)/L and R = busy·((1 − ρ)·d/2 + ρ·P/2), busy the chance
    that another request is decoding when this one arrives (1 − (1 − m·TPOT/L)^(B − 1)).
    """
    d, p, m = decode, prefill, max(output_tokens - 1.0, 0.0)
    others = max(batch - 1.0, 0.0)
    k = others * p
    ttft = request + p
    tpot = d
    for _ in range(CLOSED_LOOP_ROUNDS):
        if m > 0.0 and k > 0.0:
            h = ttft - k - d * m
            tpot = (-h + math.sqrt(h * h + 4.0 * m * d * ttft)) / (2.0 * m)
        life = ttft + m * tpot
        lam = others / life
        rho = lam * p
        busy = 1.0 - (1.0 - m * tpot / life) ** others
        resid = busy * ((1.0 - rho) * d / 2.0 + rho * p / 2.0)
        ttft = request + resid + p * (1.0 + lam * resid)
    return tpot, ttft, ttft + m * tpot


def closed_loop_queued(decode: float, prefill: float, request: float, batch: float, output_tokens: float,
                       queued: float) -> tuple[float, float, float, float]:
    """(TPOT, TTFT, lifetime, service lifetime) of a closed loop whose engine runs `batch` sequences and `queued` more
    clients wait for a slot (the engine's max_num_seqs below the concurrency).

    The engine serves B at a time, each for the service lifetime L of `closed_loop` at batch B, so it completes
    X = B / L requests a second; with C = B + queued clients always in the system (each sends its next request when
    its last one ends), Little's law gives the time in the system C / X, so every request first waits
    W = (C − B)·L / B for a slot, in its TTFT and its lifetime; TPOT is the batch-B one. A steady state: a finite run
    of N requests that starts all C at once waits less on average (its first B requests wait nothing).
    """
    tpot, ttft, life = closed_loop(decode, prefill, request, batch, output_tokens)
    wait = queued * life / batch
    return tpot, ttft + wait, life + wait, life


def _metric(t: Target, q: dict[str, float]) -> float:
    """The measured quantity from the priced passes (see the module docstring)."""
    if t.static:
        return q["prefill"] + q.get("decode_sum", 0.0)
    if t.metric == "tpot" and t.row.tpot_ms is None and t.row.statistic == "median":
        return q["decode"]  # a median inter-token gap: one decode iteration (module docstring)
    b = float(t.batch)
    tpot, ttft, lifetime, service = closed_loop_queued(q["decode"], q["prefill"], q["request"], b, t.output_tokens, t.queued)
    if t.metric == "tpot":
        return tpot
    if t.metric == "ttft":
        return ttft
    if t.metric == "e2e":
        return lifetime
    return b * t.output_tokens / service  # throughput: B requests of O tokens every service lifetime


def _plan_values(plan: _Plan, dep: Deployment, coef: Coefficients) -> list[float]:
    """The predicted value of each of `plan`'s targets on `dep` (its engine), `coef` its coefficients."""
    time = estimate(dep, plan.passes, coef=coef).time_s
    terms = coef.terms
    out = []
    for t, sl in zip(plan.targets, plan.slices):
        q = {name: w * float(time[a:z].sum()) for name, (a, z, w) in sl.items()}
        q["request"] = request_overhead_s(terms, t.input_tokens)  # each request prefills: the fleet's and predict's rule
        out.append(_metric(t, q))
    return out


def predict(targets: Sequence[Target], engine_for: Callable[[Deployment], EngineProfile] | None = None) -> np.ndarray:
    """Predicted value of every target (in order); `engine_for` replaces each deployment's engine (a fit's trial)."""
    out = np.empty(len(targets))
    index = {id(t): k for k, t in enumerate(targets)}
    for plan in _plan(targets):
        dep = plan.dep if engine_for is None else dataclasses.replace(plan.dep, serving_engine=engine_for(plan.dep))
        for t, v in zip(plan.targets, _plan_values(plan, dep, coefficients(dep))):
            out[index[id(t)]] = v
    return out


class TargetPredictor:
    """`predict` over one fixed list of targets, called many times (a fit's trials): the same numbers, computed once where
    they do not change.

    The passes of each deployment and the engine-independent part of its `Coefficients` (model, GPU, dtypes) are
    built once; a trial prices again only the deployments whose engine terms changed: `key_for(dep)` names the
    inputs a deployment's engine depends on (a fit: the values of the parameters that apply to it), and a
    deployment whose key was priced before reuses those predictions. A finite-difference Jacobian moves one
    parameter at a time, and most parameters apply to one engine or GPU, so most deployments repeat a key.
    """

    #: Keys remembered per deployment (the current point and the trial steps around it); older ones are dropped.
    MEMO = 8

    def __init__(self, targets: Sequence[Target]) -> None:
        self.targets = list(targets)
        self.plans = _plan(self.targets)
        index = {id(t): k for k, t in enumerate(self.targets)}
        self._rows = [np.array([index[id(t)] for t in p.targets], dtype=np.int64) for p in self.plans]
        self._coef = [coefficients(p.dep) for p in self.plans]
        self._memo: list[dict[object, list[float]]] = [{} for _ in self.plans]

    def __call__(self, engine_for: Callable[[Deployment], EngineProfile], key_for: Callable[[Deployment], object]) -> np.ndarray:
        out = np.empty(len(self.targets))
        for k, plan in enumerate(self.plans):
            memo = self._memo[k]
            key = key_for(plan.dep)
            vals = memo.get(key)
            if vals is None:
                dep = dataclasses.replace(plan.dep, serving_engine=engine_for(plan.dep))
                vals = _plan_values(plan, dep, dataclasses.replace(self._coef[k], terms=latency_terms(dep)))
                if len(memo) >= self.MEMO:
                    del memo[next(iter(memo))]
                memo[key] = vals
            out[self._rows[k]] = vals
        return out
