"""Microbenchmarks of every component the roofline counts, on the device given.

Why: a roofline is only as good as its efficiencies; these measure them on the machine
at hand instead of borrowing published figures. Timing rules (so the numbers mean what
they say): warm-up calls first, many repeats, the median reported (robust to a noisy,
shared machine), several random non-zero input sets rotated between calls so caches
don't flatter, and on CUDA synchronised device events around each call. The same code
runs on ``cpu`` and ``cuda`` (the CUDA path is untested in CI: no GPU there).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from specagent.kernels.modules import chunked_gated_delta_rule, recurrent_gated_delta_rule

STATISTICS = ("median", "min")
#: What a timed run's duration is: "wall" (perf_counter; CUDA events on a GPU) or "cpu" (this
#: thread's CPU time: on a CPU shared with other jobs, the time the run itself took, without the
#: time other processes held the core; exact for torch with one thread, which then computes on
#: the calling thread).
CLOCKS = ("wall", "cpu")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown dtype '{name}'; known: {', '.join(DTYPES)}") from None


def dtype_size(dt: torch.dtype) -> int:
    return torch.empty((), dtype=dt).element_size()


def element_bytes(name: str) -> int:
    """Bytes per element of a dtype name, fp8 included (a GEMM dtype for the peak, not a model dtype: the cost model's
    `costmodel.dtypes.dtype_bytes` knows the weight formats, int4 included)."""
    return 1 if name.lower() == "fp8" else dtype_size(torch_dtype(name))


@dataclass(frozen=True)
class TimingConfig:
    """How hard to measure: warm-up calls, repeats, input sets rotated, and a time cap per benchmark."""

    warmup: int = 2
    repeats: int = 7
    rotate: int = 3
    max_seconds: float = 2.0  # stop repeating once this much time was spent (at least 3 repeats)
    #: "median" (default), or "min" — the uncontended time on a machine shared with other jobs,
    #: where the median flips between an idle and a contended mode (timeit's advice).
    statistic: str = "median"
    clock: str = "wall"

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {STATISTICS}, got '{self.statistic}'")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock must be one of {CLOCKS}, got '{self.clock}'")
        if self.repeats < 1 or self.rotate < 1 or self.warmup < 0:
            raise ValueError("repeats and rotate must be >= 1 and warmup >= 0")

    def summarise(self, samples: Sequence[float]) -> float:
        return statistics.median(samples) if self.statistic == "median" else min(samples)

    def timer(self, device: torch.device | str) -> Callable[[], float]:
        """The clock function for timing work on `device` (the cpu clock only for a CPU device)."""
        if self.clock == "cpu":
            if torch.device(device).type != "cpu":
                raise ValueError(f"the cpu clock times this thread's work; {device} needs clock='wall'")
            return time.thread_time
        return time.perf_counter


@dataclass(frozen=True)
class Measurement:
    """One benchmark point: what ran, its FLOPs and bytes (as the roofline counts them), its times."""

    kind: str
    params: dict
    flops: float
    bytes: float
    seconds: float  # the TimingConfig statistic of the samples (median by default)
    samples: tuple[float, ...] = field(default=(), repr=False)
    calls: int = 1  # torch calls per timed run (for subtracting per-call overhead)

    @property
    def flop_rate(self) -> float:
        return self.flops / self.seconds

    @property
    def byte_rate(self) -> float:
        return self.bytes / self.seconds

    def as_dict(self) -> dict:
        return {"kind": self.kind, **self.params, "flops": self.flops, "bytes": self.bytes, "seconds": self.seconds,
                "calls": self.calls, "repeats": len(self.samples)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[int], object], device: torch.device | str, cfg: TimingConfig = TimingConfig(),
              raw_index: bool = False) -> tuple[float, tuple[float, ...]]:
    """Seconds of ``fn(i)`` (i indexes the rotated input set): the configured statistic over repeats."""
    device = torch.device(device)
    now = cfg.timer(device)
    rot = (1 << 62) if raw_index else cfg.rotate
    for i in range(cfg.warmup):
        fn(i % rot)
    _sync(device)
    samples: list[float] = []
    spent = 0.0
    i = 0
    while len(samples) < cfg.repeats and (len(samples) < 3 or spent < cfg.max_seconds):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn((i + cfg.warmup) % rot)
            end.record()
            end.synchronize()
            dt = start.elapsed_time(end) / 1e3
        else:
            t0 = now()
            fn((i + cfg.warmup) % rot)
            dt = now() - t0
        samples.append(dt)
        spent += dt
        i += 1
    return cfg.summarise(samples), tuple(samples)


def seeded_randn(gen: torch.Generator, *shape: int, dtype: torch.dtype, device: torch.device, scale: float = 1.0) -> torch.Tensor:
    """Random normal, never exactly zero (zeros could take fast paths)."""
    t = torch.randn(*shape, generator=gen, dtype=torch.float32)
    t = torch.where(t == 0, torch.full_like(t, 1e-3), t) * scale
    return t.to(dtype=dtype, device=device)


class ForeignLoad:
    """CPU time other processes used while a block of timed runs ran (Linux /proc/stat).

    Why: on a small machine shared with other jobs (two vCPUs, possibly SMT siblings), a
    co-runner slowed whole passes here by 30% for tens of seconds at a time — longer than a
    round of repeats, so neither the median nor the min of a block removes it. Each round
    of repeats records the other processes' CPU use (all busy jiffies minus this process's
    own CPU time), and only the quietest rounds are summarised (`quiet_rounds`).
    """

    __slots__ = ("busy", "own", "wall")

    def __init__(self, busy: float | None, own: float, wall: float):
        self.busy, self.own, self.wall = busy, own, wall

    @staticmethod
    def _busy_seconds() -> float | None:
        try:
            with open("/proc/stat") as fh:
                f = [int(x) for x in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        return (f[0] + f[1] + f[2] + f[5] + f[6] + (f[7] if len(f) > 7 else 0)) / hz

    @classmethod
    def start(cls) -> "ForeignLoad":
        t = os.times()
        return cls(cls._busy_seconds(), t.user + t.system, time.perf_counter())

    def stop(self) -> float:
        """Other processes' CPU-seconds per wall second over the block (nan where unknown)."""
        end = ForeignLoad.start()
        if self.busy is None or end.busy is None:
            return float("nan")
        wall = max(end.wall - self.wall, 1e-9)
        return max((end.busy - self.busy) - (end.own - self.own), 0.0) / wall


def quiet_rounds(loads: Sequence[float], slack: float = 0.15, min_keep: int = 3) -> list[int]:
    """Indices of the rounds to keep: those within `slack` CPUs of the quietest (at least `min_keep`)."""
    idx = list(range(len(loads)))
    if not loads or any(x != x for x in loads):  # nan: no load information, keep all
        return idx
    lo = min(loads)
    keep = [i for i in idx if loads[i] <= lo + slack]
    if len(keep) < min(min_keep, len(idx)):
        keep = sorted(sorted(idx, key=lambda i: loads[i])[: min(min_keep, len(idx))])
    return keep


# --------------------------------------------------------------------------- benchmarks
def bench_gemm(tokens: int, k: int, n: int, dtype: str = "fp32", device: str = "cpu", cfg: TimingConfig = TimingConfig(),
               seed: int = 0) -> Measurement:
    """x[tokens, k] @ W[n, k]ᵀ via F.linear (what the model calls). Bytes: W once, x read, y written."""
    dev, dt = torch.device(device), torch_dtype(dtype)
    g = torch.Generator().manual_seed(seed)
    xs = [seeded_randn(g, tokens, k, dtype=dt, device=dev) for _ in range(cfg.rotate)]
    ws = [seeded_randn(g, n, k, dtype=dt, device=dev, scale=k**-0.5) for _ in range(cfg.rotate)]
    med, samples = time_call(lambda i: F.linear(xs[i], ws[i]), dev, cfg)
    es = dtype_size(dt)
    return Measurement("gemm", {"tokens": tokens, "k": k, "n": n, "dtype": dtype}, 2.0 * tokens * k * n,
                       float(es * (n * k + tokens * k + tokens * n)), med, samples)


def bench_gemm_fp8(tokens: int, k: int, n: int, device: str = "cpu", cfg: TimingConfig = TimingConfig(),
                   seed: int = 0) -> Measurement:
    """x[tokens, k] @ W[n, k]ᵀ in FP8 (e4m3 operands, per-tensor scales, bf16 out) via torch._scaled_mm.

    What FP8 serving runs its weight GEMMs with; on a GPU it needs FP8 tensor cores
    (calibrate.FP8_MIN_CAPABILITY). Dimensions must be multiples of 16. Bytes: operands at
    1 byte, the bf16 output at 2.
    """
    if tokens % 16 or k % 16 or n % 16:
        raise ValueError(f"FP8 GEMM dimensions must be multiples of 16, got {tokens}x{k}x{n}")
    dev, f8 = torch.device(device), torch.float8_e4m3fn
    g = torch.Generator().manual_seed(seed)
    xs = [seeded_randn(g, tokens, k, dtype=torch.float32, device=dev).to(f8) for _ in range(cfg.rotate)]
    # _scaled_mm wants the second operand column-major: W[n, k] row-major, transposed
    ws = [seeded_randn(g, n, k, dtype=torch.float32, device=dev).to(f8).t() for _ in range(cfg.rotate)]
    one = torch.ones((), dtype=torch.float32, device=dev)
    med, samples = time_call(lambda i: torch._scaled_mm(xs[i], ws[i], scale_a=one, scale_b=one, out_dtype=torch.bfloat16), dev, cfg)
    return Measurement("gemm", {"tokens": tokens, "k": k, "n": n, "dtype": "fp8"}, 2.0 * tokens * k * n,
                       float(n * k + tokens * k + 2 * tokens * n), med, samples)


def bench_attention(new_tokens: int, context: int, heads: int, kv_heads: int, head_dim: int, batch: int = 1,
                    dtype: str = "fp32", device: str = "cpu", cfg: TimingConfig = TimingConfig(), seed: int = 0) -> Measurement:
    """SDPA with GQA: `new_tokens` queries per sequence over `context + new_tokens` keys (causal for the new part)."""
    dev, dt = torch.device(device), torch_dtype(dtype)
    g = torch.Generator().manual_seed(seed)
    L = context + new_tokens
    qs = [seeded_randn(g, batch, heads, new_tokens, head_dim, dtype=dt, device=dev) for _ in range(cfg.rotate)]
    ks = [seeded_randn(g, batch, kv_heads, L, head_dim, dtype=dt, device=dev) for _ in range(cfg.rotate)]
    vs = [seeded_randn(g, batch, kv_heads, L, head_dim, dtype=dt, device=dev) for _ in range(cfg.rotate)]
    mask = None
    if new_tokens > 1 and context > 0:
        mask = torch.ones(new_tokens, L, dtype=torch.bool, device=dev).tril(diagonal=context)

    def run(i: int):
        if new_tokens == 1:
            return F.scaled_dot_product_attention(qs[i], ks[i], vs[i], enable_gqa=True)
        if context == 0:
            return F.scaled_dot_product_attention(qs[i], ks[i], vs[i], is_causal=True, enable_gqa=True)
        return F.scaled_dot_product_attention(qs[i], ks[i], vs[i], attn_mask=mask, enable_gqa=True)

    med, samples = time_call(run, dev, cfg)
    pairs = batch * (new_tokens * context + new_tokens * (new_tokens + 1) / 2)
    es = dtype_size(dt)
    byts = es * batch * (2 * kv_heads * L * head_dim + 2 * heads * new_tokens * head_dim)
    return Measurement("attention", {"new_tokens": new_tokens, "context": context, "batch": batch, "heads": heads,
                                     "kv_heads": kv_heads, "head_dim": head_dim, "dtype": dtype},
                       4.0 * heads * head_dim * pairs, float(byts), med, samples)


def bench_gdn(tokens: int, heads: int, key_dim: int, value_dim: int, batch: int = 1, device: str = "cpu",
              cfg: TimingConfig = TimingConfig(), seed: int = 0) -> Measurement:
    """Gated DeltaNet core: the recurrent step at tokens == 1, else the chunked prefill (float32 state)."""
    dev = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    sets = []
    for _ in range(cfg.rotate):
        q = seeded_randn(g, batch, heads, tokens, key_dim, dtype=torch.float32, device=dev, scale=key_dim**-0.5)
        k = F.normalize(seeded_randn(g, batch, heads, tokens, key_dim, dtype=torch.float32, device=dev), dim=-1)
        v = seeded_randn(g, batch, heads, tokens, value_dim, dtype=torch.float32, device=dev)
        gd = -torch.rand(batch, heads, tokens, generator=g).to(dev) - 1e-3
        beta = torch.rand(batch, heads, tokens, generator=g).to(dev) + 1e-3
        s0 = seeded_randn(g, batch, heads, key_dim, value_dim, dtype=torch.float32, device=dev)
        sets.append((q, k, v, gd, beta, s0))
    fn = recurrent_gated_delta_rule if tokens == 1 else chunked_gated_delta_rule
    med, samples = time_call(lambda i: fn(*sets[i]), dev, cfg)
    state = batch * heads * key_dim * value_dim * 4.0
    chunks = 0 if tokens == 1 else -(-tokens // 64)
    flops = batch * heads * (7 * key_dim * value_dim if tokens == 1 else tokens * (2 * 64 * (2 * key_dim + value_dim)) + 6 * key_dim * value_dim * tokens)
    return Measurement("gdn", {"tokens": tokens, "batch": batch, "heads": heads, "key_dim": key_dim, "value_dim": value_dim},
                       float(flops), 2 * state * (1 + chunks), med, samples)


def bench_moe(tokens: int, hidden: int, experts: int, top_k: int, inter: int, dtype: str = "fp32", device: str = "cpu",
              cfg: TimingConfig = TimingConfig(), seed: int = 0) -> Measurement:
    """Routed-expert dispatch (router, top-k, per-touched-expert SwiGLU, scatter-add) over `tokens` tokens."""
    from specagent.costmodel.moe import moe_union_experts

    dev, dt = torch.device(device), torch_dtype(dtype)
    g = torch.Generator().manual_seed(seed)
    router = seeded_randn(g, experts, hidden, dtype=dt, device=dev, scale=hidden**-0.5)
    w1 = seeded_randn(g, experts, 2 * inter, hidden, dtype=dt, device=dev, scale=hidden**-0.5)
    w2 = seeded_randn(g, experts, hidden, inter, dtype=dt, device=dev, scale=inter**-0.5)
    xs = [seeded_randn(g, tokens, hidden, dtype=dt, device=dev) for _ in range(cfg.rotate)]

    def run(i: int):
        x = xs[i]
        probs = torch.softmax(F.linear(x, router).float(), -1)
        w, idx = probs.topk(top_k, -1)
        w = (w / w.sum(-1, keepdim=True)).to(dt)
        flat = idx.reshape(-1)
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=experts).tolist()
        tok, wt = order // top_k, w.reshape(-1)[order]
        out = torch.zeros_like(x)
        s = 0
        for e, c in enumerate(counts):
            if c:
                t = tok[s : s + c]
                gte, up = F.linear(x.index_select(0, t), w1[e]).split(inter, -1)
                out.index_add_(0, t, F.linear(F.silu(gte) * up, w2[e]) * wt[s : s + c, None])
                s += c
        return out

    med, samples = time_call(run, dev, cfg)
    es = dtype_size(dt)
    touched = float(moe_union_experts(tokens, experts, top_k))
    flops = 2.0 * tokens * (hidden * experts + top_k * 3 * hidden * inter)
    byts = es * (touched * 3 * hidden * inter + experts * hidden + 2 * tokens * hidden)
    return Measurement("moe", {"tokens": tokens, "hidden": hidden, "experts": experts, "top_k": top_k, "inter": inter,
                               "dtype": dtype}, flops, byts, med, samples)


def bench_copy(megabytes: float = 256.0, device: str = "cpu", cfg: TimingConfig = TimingConfig(), seed: int = 0) -> Measurement:
    """Device memory copy bandwidth: read + write of a buffer far larger than any cache."""
    dev = torch.device(device)
    n = int(megabytes * 1e6 / 4)
    g = torch.Generator().manual_seed(seed)
    src = torch.rand(n, generator=g).add_(0.5).to(dev)
    dst = torch.empty_like(src)
    med, samples = time_call(lambda i: dst.copy_(src), dev, cfg)
    return Measurement("copy", {"megabytes": megabytes}, 0.0, 2.0 * n * 4, med, samples)


def bench_call_overhead(device: str = "cpu", cfg: TimingConfig = TimingConfig(), calls: int = 200, seed: int = 0) -> Measurement:
    """Per-call framework overhead: `calls` tiny dependent ops timed together (seconds per call)."""
    dev = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    xs = [torch.rand(8, generator=g).add_(0.5).to(dev) for _ in range(cfg.rotate)]

    def run(i: int):
        x = xs[i]
        for _ in range(calls):
            x = x * 1.0001
        return x

    med, samples = time_call(run, dev, cfg)
    return Measurement("overhead", {"calls": calls}, 0.0, 0.0, med / calls, tuple(s / calls for s in samples), calls=calls)


def run_suite(specs: Sequence, dtype: str = "fp32", device: str = "cpu", tokens: Sequence[int] = (1, 4, 16, 64, 256, 1024),
              contexts: Sequence[int] = (0, 256, 1024, 4096), cfg: TimingConfig = TimingConfig(),
              progress: Callable[[str], None] | None = None) -> list[Measurement]:
    """Every benchmark, at the shapes of the given model specs (what calibration fits on)."""
    out: list[Measurement] = []
    tick = progress or (lambda _msg: None)
    jobs: list[tuple[str, Callable[[], Measurement]]] = []
    jobs.append(("call overhead", lambda: bench_call_overhead(device, cfg)))
    jobs.append(("copy bandwidth", lambda: bench_copy(256.0, device, cfg)))
    shapes: set[tuple[int, int]] = set()
    for spec in specs:
        h = spec.hidden
        shapes.update(spec.attention.matmul_shapes(h))
        if spec.linear:
            shapes.update(spec.linear.matmul_shapes(h))
        if "dense" in spec.ffn_kinds:
            shapes.update([(h, 2 * spec.dense_intermediate), (spec.dense_intermediate, h)])
        if spec.moe and spec.moe.shared_intermediate:
            shapes.update([(h, 2 * spec.moe.shared_intermediate), (spec.moe.shared_intermediate, h)])
        if not spec.tie_embeddings or True:
            shapes.add((h, spec.vocab))
    for t in tokens:
        for k, n in sorted(shapes):
            jobs.append((f"gemm {t}x{k}x{n}", lambda t=t, k=k, n=n: bench_gemm(t, k, n, dtype, device, cfg)))
    if dtype != "fp32":
        # the bandwidth efficiency is fitted on fp32 memory-bound kernels: a 1-token GEMM in a
        # dtype without native support (bf16 on many CPUs) is limited by its slow path, not memory
        for k, n in sorted(shapes):
            jobs.append((f"gemm 1x{k}x{n} fp32", lambda k=k, n=n: bench_gemm(1, k, n, "fp32", device, cfg)))
    for spec in specs:
        a = spec.attention
        for c in contexts:
            for t in (1, 64):
                jobs.append((f"attention n={t} c={c}", lambda t=t, c=c, a=a: bench_attention(t, c, a.num_heads, a.num_kv_heads, a.head_dim, 1, dtype, device, cfg)))
        if spec.linear:
            la = spec.linear
            for t in (1, 64, 256):
                jobs.append((f"gdn n={t}", lambda t=t, la=la: bench_gdn(t, la.num_value_heads, la.key_head_dim, la.value_head_dim, 1, device, cfg)))
        if spec.moe:
            mo = spec.moe
            for t in tokens:
                jobs.append((f"moe n={t}", lambda t=t, mo=mo, h=spec.hidden: bench_moe(t, h, mo.num_experts, mo.top_k, mo.expert_intermediate, dtype, device, cfg)))
    for spec in specs:
        for kind in sorted(set(spec.layer_kinds)):
            for t in tokens:
                jobs.append((f"layer {kind} n={t}", lambda t=t, kind=kind, spec=spec: bench_layer(spec, kind, t, 1, 0, dtype, device, cfg)))
    for i, (name, job) in enumerate(jobs):
        tick(f"[{i + 1}/{len(jobs)}] {name}")
        out.append(job())
    return out


def bench_layer(spec, kind: str, tokens: int, batch: int = 1, context: int = 0, dtype: str = "fp32", device: str = "cpu",
                cfg: TimingConfig = TimingConfig(), seed: int = 0, weight_rotation_bytes: float = 96e6) -> Measurement:
    """One whole decoder layer (norms, mixer, FFN/MoE, residuals) of `spec` of the given mixer kind.

    On an eager-mode device the element-wise work around the GEMMs (norms, gates, RoPE,
    activations, the GDN chunk scan) costs as much as the GEMMs themselves, so the compute
    efficiency is measured on whole layers; FLOPs and bytes are left to the roofline.
    """
    import dataclasses

    from specagent.kernels.modules import Block, Cache

    dev, dt = torch.device(device), torch_dtype(dtype)
    ffn = "moe" if spec.is_moe else "dense"
    one = dataclasses.replace(spec, layer_kinds=(kind,), ffn_kinds=(ffn,))
    g = torch.Generator().manual_seed(seed)
    first = Block(one, 0, dt, g).to(dev).requires_grad_(False)
    layer_bytes = sum(p.numel() * p.element_size() for p in first.parameters())
    # distinct weight copies, cycled, so the weights stream from memory as in a full model
    copies = max(cfg.rotate, min(64, -(-int(weight_rotation_bytes) // max(layer_bytes, 1))))
    blocks = [first] + [Block(one, 0, dt, g).to(dev).requires_grad_(False) for _ in range(copies - 1)]
    base = Cache(batch=batch)
    with torch.inference_mode():
        if context:
            for j, blk in enumerate(blocks):
                blk.mixer(seeded_randn(g, batch, context, spec.hidden, dtype=dt, device=dev), base, j)
            base.length = context
        xs = [seeded_randn(g, batch, tokens, spec.hidden, dtype=dt, device=dev) for _ in range(cfg.rotate)]

    def run(i: int):
        base.length = context  # KV beyond the context is overwritten; recurrent state drift is harmless for timing
        j = i % copies
        blk = blocks[j]
        with torch.inference_mode():
            x = xs[i % cfg.rotate]
            x = x + blk.mixer(blk.norm1(x), base, j)
            return x + blk.ffn(blk.norm2(x))

    med, samples = time_call(run, dev, cfg, raw_index=True)
    return Measurement("layer", {"kind": kind, "tokens": tokens, "batch": batch, "context": context, "dtype": dtype},
                       0.0, 0.0, med, samples)
