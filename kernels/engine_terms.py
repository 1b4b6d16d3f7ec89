"""Serving-engine terms measured on this device: per-layer fixed time, launch cost, kernels, collectives.

Why: the engine profiles' fixed costs (`costmodel.latency`) come from public figures and
fits; on a device at hand they can be measured directly. What runs here is specagent's own
torch modules (`kernels/modules.py`, the engine `specagent live` runs, eagerly), so the
profile written (`engine_profile_dict`) prices eager specagent torch passes on this device
and GPU — not vLLM's fused kernels; its other figures come from the calibrated hardware
profile it is used with (engine fields left out fall back to it).

Per engine layer kind (full attention, Gated DeltaNet, dense MLP, MoE — `LAYER_KINDS`), one
*part* of a decoder layer of the scaled models (norm + mixer or FFN + residual add) runs at
batch 1, one token, a tiny context, where bytes and FLOPs are negligible:

* ``layer_us[kind]`` = its time in a CUDA-graph replay (GPU work only, no launches) − the
  roofline's part (its bytes and FLOPs at the calibrated profile's rates); on a CPU, its
  eager time − the roofline's part (no launch is separate from an op's execution there).
  The MoE part's dispatch reads the per-expert counts back to the host (two syncs a graph
  cannot hold): it is captured with the counts given, and the measured cost of those reads
  (eager with − without) is added to its ``layer_us``, since eager passes pay it.
* ``launch_us`` = Σ (eager − graph replay) / Σ kernels over the four parts: the cost model
  adds launches to GPU time, not overlapped, exactly as this difference does.
* kernels per part and per pass: GPU activities (kernels, copies, memsets) in
  torch.profiler; on a CPU the torch ops dispatched (the analogue, unused for pricing).
* ``pass_kernels`` = a decode pass's kernels − those of its layers' parts; ``iteration_us``
  = median over decode anchor passes of (measured − the cost model's price of that pass
  with every other term of this profile): per-pass host work outside the layers.
* all-reduce and all-to-all latency vs message size with torch.distributed over every
  visible GPU (NCCL), α from a fit t = α + bytes/β in relative error; on one GPU nothing
  is measured and the profile is limited to one GPU (``[limits] max_gpus = 1``).

Every CUDA-only step is guarded and its arithmetic is a pure function tested on the CPU
(`launch_per_kernel_s`, `layer_fixed_s`, `count_events`, `fit_alpha_beta`, `fit_iteration`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import tomli_w
import torch

from specagent.common import atomic
from specagent.costmodel.model_spec import ModelSpec
from specagent.hardware.serving_engine import LAYER_KINDS, EngineProfile, parse_engine
from specagent.hardware.profile import HardwareProfile
from specagent.kernels import calibrate as cal
from specagent.kernels import microbench as mb
from specagent.kernels.modules import Block, Cache, Model

#: engine layer kind -> (scaled model it is taken from, decoder-layer role, ModelSpec kind)
ENGINE_PARTS: dict[str, tuple[str, str, str]] = {
    "full_attention": ("weak", "mixer", "full"),
    "linear_attention": ("weak", "mixer", "linear"),
    "dense_mlp": ("weak", "ffn", "dense"),
    "moe": ("strong", "ffn", "moe"),
}
#: Context (tokens) the mixer parts attend to or carry state for: tiny, so KV bytes are negligible.
PART_CONTEXT = 16
#: Calls of a part per timed run (and per captured graph): the graph's own launch and the
#: timing events are paid once per run, not per part.
PART_CALLS = 10
#: Message sizes of the collective sweep: 4 KiB to 64 MiB, every factor of 4.
COLLECTIVE_BYTES: tuple[int, ...] = tuple(4096 * 4**i for i in range(8))
#: CUDA runtime calls that put one activity on the GPU (the fallback count when the profiler sees no GPU events).
CUDA_LAUNCH_CALLS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                               "cudaLaunchCooperativeKernel", "cudaMemcpyAsync", "cudaMemsetAsync"})


# --------------------------------------------------------------------------- one layer part
@dataclass
class PartBench:
    """One part of a decoder layer, ready to call: `run(i)` as the live runner runs it, `run_fixed(i)` the same
    work with the MoE routing counts given (capturable in a CUDA graph; = `run` for the other kinds)."""

    kind: str
    model: str
    run: Callable[[int], torch.Tensor]
    run_fixed: Callable[[int], torch.Tensor]
    flops: float  # as the roofline counts them: 2 per GEMM weight per token (+ attention / state step)
    bytes: float  # weights read once (touched experts only), KV or state read (and state written)
    sets: int
    has_host_reads: bool  # MoE: `run` reads the routing counts back to the host, `run_fixed` does not


def build_part(spec: ModelSpec, kind: str, dtype: str, device: str, sets: int = 3, context: int = PART_CONTEXT,
               seed: int = 0) -> PartBench:
    """The `kind` part of one decoder layer of `spec` with seeded random weights, `sets` random inputs of one token."""
    if kind not in ENGINE_PARTS:
        raise ValueError(f"unknown layer kind '{kind}'; known: {', '.join(ENGINE_PARTS)}")
    model, role, mk = ENGINE_PARTS[kind]
    if role == "ffn" and mk == "moe" and not spec.is_moe:
        raise ValueError(f"the moe part needs an MoE model; {spec.name} is dense")
    if role == "mixer" and mk == "linear" and not spec.linear:
        raise ValueError(f"the linear_attention part needs a model with Gated DeltaNet layers; {spec.name} has none")
    dev, dt = torch.device(device), mb.torch_dtype(dtype)
    mixer = mk if role == "mixer" else spec.layer_kinds[0]
    ffn = mk if role == "ffn" else spec.ffn_kinds[0]
    one = dataclasses.replace(spec, layer_kinds=(mixer,), ffn_kinds=(ffn,))
    g = torch.Generator().manual_seed(seed)
    blk = Block(one, 0, dt, g).to(dev).requires_grad_(False)
    cache = Cache(batch=1)
    xs = [mb.seeded_randn(g, 1, 1, spec.hidden, dtype=dt, device=dev) for _ in range(sets)]
    counts: list[list[int]] = []
    with torch.inference_mode():
        if role == "mixer" and context:
            blk.mixer(mb.seeded_randn(g, 1, context, spec.hidden, dtype=dt, device=dev), cache, 0)
        if mk == "moe":
            counts = [blk.ffn.route_counts(blk.norm2(x)) for x in xs]

    def run(i: int, fixed: bool = False) -> torch.Tensor:
        x = xs[i % sets]
        with torch.inference_mode():
            if role == "mixer":
                cache.length = context  # the same position every call: KV slot overwritten, state carried
                return x + blk.mixer(blk.norm1(x), cache, 0)
            h = blk.norm2(x)
            return x + (blk.ffn(h, counts[i % sets]) if fixed and counts else blk.ffn(h))

    flops, byts = part_work(blk, kind, spec, context, dt)
    return PartBench(kind, model, run, lambda i: run(i, fixed=True), flops, byts, sets, has_host_reads=bool(counts))


def part_work(blk: Block, kind: str, spec: ModelSpec, context: int, dt: torch.dtype) -> tuple[float, float]:
    """(FLOPs, bytes) of one token through the `kind` part of `blk`, counted as the roofline counts them."""
    role = ENGINE_PARTS[kind][1]
    module = blk.mixer if role == "mixer" else blk.ffn
    norm = blk.norm1 if role == "mixer" else blk.norm2
    params = list(module.parameters()) + list(norm.parameters())
    byts = float(sum(p.numel() * p.element_size() for p in params))
    gemm = float(sum(p.numel() for p in module.parameters() if p.dim() == 2))  # 2-D weights are GEMM operands
    es = mb.dtype_size(dt)
    flops = 0.0
    if kind == "moe":
        mo = spec.moe
        per_expert = blk.ffn.w_gate_up[0].numel() + blk.ffn.w_down[0].numel()
        gemm += mo.top_k * per_expert  # one token touches top_k experts
        byts -= (mo.num_experts - mo.top_k) * per_expert * es  # the others are not read
    elif kind == "full_attention":
        a, keys = spec.attention, context + 1
        flops += 4.0 * a.num_heads * a.head_dim * keys
        byts += 2.0 * a.num_kv_heads * a.head_dim * keys * es
    elif kind == "linear_attention":
        la = spec.linear
        state = la.num_value_heads * la.key_head_dim * la.value_head_dim
        flops += 7.0 * state
        byts += 2.0 * 4 * state  # float32 state read and written
    return flops + 2.0 * gemm, byts + 2.0 * spec.hidden * es  # + the token's activation in and out


def roofline_s(flops: float, byts: float, hw: HardwareProfile, dtype: str) -> float:
    """The roofline's time for (FLOPs, bytes) of a one-token part at the profile's rates and efficiencies."""
    eff_c = hw.compute_efficiency_curve[0][1] if hw.compute_efficiency_curve else float(hw.prefill_mfu.value)
    peak = hw.peak_flops(dtype if dtype in hw.peak_tflops else "bf16")
    return max(flops / (peak * eff_c), byts / (hw.bandwidth_bytes_s * float(hw.bandwidth_efficiency.value)))


# --------------------------------------------------------------------------- timing, graphs, kernel counts
def _calls(fn: Callable[[int], torch.Tensor], calls: int) -> Callable[[int], None]:
    def run(i: int) -> None:
        for _ in range(calls):
            fn(i)
    return run


def graph_seconds(run: Callable[[int], torch.Tensor], sets: int, device: str, cfg: mb.TimingConfig, calls: int = PART_CALLS) -> float:
    """Seconds per call of `run` replayed from CUDA graphs (one graph of `calls` calls per input set).

    Warm-up on a side stream first (as torch.cuda.graphs' documentation asks), one shared
    memory pool, each replay timed with CUDA events (`microbench.time_call`).
    """
    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA device, got '{device}'")
    with torch.cuda.device(dev):
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for i in range(sets):
                run(i)
        torch.cuda.current_stream(dev).wait_stream(side)
        torch.cuda.synchronize(dev)
        pool = torch.cuda.graph_pool_handle()
        graphs = []
        for i in range(sets):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                for _ in range(calls):
                    run(i)
            graphs.append(g)
        med, _ = mb.time_call(lambda i: graphs[i % sets].replay(), dev, dataclasses.replace(cfg, rotate=sets))  # noqa: F821  (the lambda runs inside time_call, before the del)
        del graphs
    return med / calls


def count_events(events: Sequence[Any], cuda: bool) -> tuple[int, str]:
    """Launches in profiler events (pure): on CUDA the GPU activities, else the runtime launch calls;
    on a CPU the torch ops dispatched from Python (aten ops without an aten parent)."""
    if cuda:
        gpu = sum(1 for e in events if getattr(e.device_type, "name", str(e.device_type)).endswith("CUDA"))
        if gpu:
            return gpu, "GPU activities (kernels, copies, memsets) in torch.profiler"
        calls = sum(1 for e in events if e.name in CUDA_LAUNCH_CALLS)
        if calls:
            return calls, "CUDA runtime launch calls in torch.profiler (no GPU events seen)"
        raise RuntimeError("torch.profiler saw neither GPU activities nor CUDA launch calls (is CUPTI available?)")
    top = sum(1 for e in events if e.name.startswith("aten::") and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))
    return top, "torch ops dispatched (top-level aten ops in torch.profiler): the CPU analogue of kernel launches"


#: Kineto, torch.profiler's C++ side, writes `USDT: … profiler_start` / `profiler_stop` lines (its level 5) straight to
#: the process's stderr on every profile: 14 lines before `calibrate`'s tables (issue #51). A level above them hides them.
KINETO_QUIET_LEVEL = "6"


@contextlib.contextmanager
def quiet_kineto():
    """KINETO_LOG_LEVEL at KINETO_QUIET_LEVEL while the profiler starts, unless the user set their own; the environment
    restored after, so nothing else in the process sees it. Why an environment variable: kineto reads it once, when the
    first profile starts, and offers no other switch; torch's Python warnings filters and logging never see these lines.
    What it costs: kineto's own errors are hidden too; `count_events` raises where no event was recorded."""
    mine = "KINETO_LOG_LEVEL" not in os.environ
    if mine:
        os.environ["KINETO_LOG_LEVEL"] = KINETO_QUIET_LEVEL
    try:
        yield
    finally:
        if mine:
            os.environ.pop("KINETO_LOG_LEVEL", None)


def count_kernels(fn: Callable[[], object], device: str) -> tuple[int, str]:
    """Launches of one call of `fn` on `device` (torch.profiler; `count_events`), kineto's chatter kept off stderr."""
    from torch.profiler import ProfilerActivity, profile

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize(dev)
    with quiet_kineto(), profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize(dev)
    return count_events(prof.events(), cuda)


@dataclass(frozen=True)
class PartTiming:
    """One part measured: seconds per call eager (as run live), eager with routing given (MoE), replayed
    from a CUDA graph (None off CUDA), its launches, and the roofline's part."""

    kind: str
    model: str
    eager_s: float
    eager_fixed_s: float
    graph_s: float | None
    kernels: int  # launches of `run` (what a live pass launches)
    kernels_fixed: int  # launches of `run_fixed` (what the graph holds)
    kernels_how: str
    roofline_s: float
    flops: float
    bytes: float
    graph_error: str | None = None  # why a graph could not be captured on CUDA (then `layer_fixed_s` takes the launches out of eager)

    def as_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def time_part(p: PartBench, hw: HardwareProfile, dtype: str, device: str, cfg: mb.TimingConfig, calls: int = PART_CALLS) -> PartTiming:
    """Eager time, graph-replay time (CUDA only), launches and roofline of one part."""
    cfg = dataclasses.replace(cfg, rotate=p.sets)
    eager, _ = mb.time_call(_calls(p.run, calls), device, cfg)
    fixed = mb.time_call(_calls(p.run_fixed, calls), device, cfg)[0] if p.has_host_reads else eager
    graph, error = None, None
    if torch.device(device).type == "cuda":
        try:
            graph = graph_seconds(p.run_fixed, p.sets, device, cfg, calls)
        except Exception as exc:  # an op this torch cannot capture: the part is priced from eager time (`layer_fixed_s`)
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            torch.cuda.synchronize(device)
    k, how = count_kernels(lambda: p.run(0), device)
    kf = count_kernels(lambda: p.run_fixed(0), device)[0] if p.has_host_reads else k
    return PartTiming(p.kind, p.model, eager / calls, fixed / calls, graph, k, kf, how, roofline_s(p.flops, p.bytes, hw, dtype),
                      p.flops, p.bytes, error)


# --------------------------------------------------------------------------- arithmetic (pure)
def launch_per_kernel_s(parts: Sequence[PartTiming]) -> float | None:
    """Σ (eager − graph replay) / Σ kernels over the parts replayed from graphs (None: no graph measured).

    The eager run of each part is the graph's very work (MoE routing counts given), so the
    difference is what launching its kernels one by one adds; negative differences (noise)
    count as 0.
    """
    graphed = [p for p in parts if p.graph_s is not None]
    if not graphed:
        return None
    kernels = sum(p.kernels_fixed for p in graphed)
    if kernels <= 0:
        raise ValueError("no kernels counted in the graphed parts: cannot price a launch")
    return sum(max(p.eager_fixed_s - p.graph_s, 0.0) for p in graphed) / kernels


def layer_fixed_s(p: PartTiming, launch_s: float = 0.0) -> float:
    """Fixed time of one part: GPU time in a graph − the roofline's part, plus the host reads of the MoE
    routing counts (eager with − without them), which eager passes pay and a graph cannot hold.

    Without a graph: eager time − the roofline's part − its kernels x `launch_s` (the launch cost
    measured on the other parts; 0 on a CPU), so the cost model still adds up to the eager time.
    """
    if p.graph_s is None:
        return max(p.eager_s - p.roofline_s - p.kernels * launch_s, 0.0)
    return max(p.graph_s - p.roofline_s, 0.0) + max(p.eager_s - p.eager_fixed_s, 0.0)


def fit_alpha_beta(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float, list[float]]:
    """(α seconds, β bytes/s, relative residuals) of t = α + bytes/β, least squares in relative error.

    Relative error, because absolute least squares over 4 KiB..64 MiB lets the largest
    messages decide α, the very term the small ones measure. β is inf when the fit finds no
    size dependence.
    """
    b, t = np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if b.size < 2 or b.size != t.size or np.any(t <= 0) or np.ptp(b) == 0:
        raise ValueError(f"need >= 2 distinct message sizes with positive times, got sizes {list(sizes)} and times {list(seconds)}")
    a = np.stack([1.0 / t, b / t], axis=1)
    (alpha, inv_beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    alpha = max(float(alpha), 0.0)
    beta = float(1.0 / inv_beta) if inv_beta > 0 else float("inf")
    pred = alpha + (b / beta if np.isfinite(beta) else 0.0)
    return alpha, beta, [float(x) for x in (pred - t) / t]


def fit_iteration(observed: Sequence[tuple[ModelSpec, HardwareProfile, tuple[int, int, int], float]], dtype: str,
                  engine: EngineProfile) -> tuple[float, list[float]]:
    """(per-iteration seconds, residuals): median over passes of measured − the cost model's price of the pass
    on `engine` (its iteration term set to 0), floored at 0."""
    if engine.iteration_us is None or float(engine.iteration_us.value) != 0.0:
        raise ValueError("price the anchor passes with iteration_us = 0 to fit it")
    residuals = []
    for spec, hw, (b, n, c), measured in observed:
        residuals.append(measured - float(cal.price_points(spec, hw, dtype, [(b, n, c)], engine).time_s[0]))
    if not residuals:
        raise ValueError("need at least one measured anchor pass")
    return max(statistics.median(residuals), 0.0), residuals


# --------------------------------------------------------------------------- collectives (torch.distributed)
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _collective_worker(rank: int, world: int, backend: str, sizes: tuple[int, ...], iters: int, rounds: int, port: int, out: str) -> None:
    """One rank of the collective sweep; rank 0 writes {op: [{bytes, seconds, samples}]} to `out`."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = backend == "nccl"
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        g = torch.Generator().manual_seed(rank)
        res: dict[str, list[dict]] = {"all_reduce": [], "all_to_all": []}
        for op in res:
            for size in sizes:
                n = max(world, size // 4 // world * world)  # fp32 elements, a multiple of the world size
                x0 = (torch.rand(n, generator=g) + 0.5).to(dev)
                x, y = x0.clone(), torch.empty_like(x0)
                call = (lambda: dist.all_reduce(x)) if op == "all_reduce" else (lambda: dist.all_to_all_single(y, x))
                for _ in range(3):
                    call()
                samples = []
                for _ in range(rounds):
                    x.copy_(x0)  # sums stay finite
                    dist.barrier()
                    if cuda:
                        torch.cuda.synchronize(dev)
                        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        start.record()
                        for _ in range(iters):
                            call()
                        end.record()
                        end.synchronize()
                        samples.append(start.elapsed_time(end) / 1e3 / iters)
                    else:
                        t0 = time.perf_counter()
                        for _ in range(iters):
                            call()
                        samples.append((time.perf_counter() - t0) / iters)
                res[op].append({"bytes": n * 4, "seconds": statistics.median(samples), "samples": samples})
        if rank == 0:
            atomic.write_json(out, res)
    finally:
        dist.destroy_process_group()


def measure_collectives(world: int, backend: str = "nccl", sizes: Sequence[int] = COLLECTIVE_BYTES, iters: int = 20, rounds: int = 5,
                        timeout_s: float = 180.0) -> dict:
    """All-reduce and all-to-all time vs message size over `world` processes (one per GPU with NCCL),
    rank 0's view, and each op's α–β fit (`fit_alpha_beta`)."""
    import torch.multiprocessing as tmp

    if world < 2:
        raise ValueError(f"a collective needs >= 2 ranks, got {world}")
    with tempfile.TemporaryDirectory(prefix="specagent-collectives-") as d:
        out = Path(d) / "collectives.json"
        ctx = tmp.start_processes(_collective_worker, args=(world, backend, tuple(int(s) for s in sizes), iters, rounds, _free_port(), str(out)),
                                  nprocs=world, join=False, start_method="spawn")
        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=max(deadline - time.monotonic(), 0.1)):
            if time.monotonic() >= deadline:
                for p in ctx.processes:
                    p.terminate()
                raise TimeoutError(f"the {backend} collective sweep over {world} ranks did not finish in {timeout_s:.0f} s")
        data = json.loads(out.read_text())
    result: dict[str, Any] = {"backend": backend, "ranks": world, "iters": iters, "rounds": rounds}
    for op, rows in data.items():
        alpha, beta, resid = fit_alpha_beta([r["bytes"] for r in rows], [r["seconds"] for r in rows])
        result[op] = {"alpha_us": alpha * 1e6, "beta_gb_s": beta / 1e9, "points": rows, "relative_residuals": resid}
    return result


# --------------------------------------------------------------------------- the whole measurement
@dataclass
class EngineTerms:
    """Everything measured for one (device, dtype), with what could not be measured and why."""

    device: str
    device_name: str
    dtype: str
    scale: str
    date: str
    parts: dict[str, PartTiming]
    launch_s: float  # 0 on a CPU (no separate launch)
    launch_note: str
    passes: list[dict] = field(default_factory=list)  # model, point, measured_s, kernels, layer_kernels, residual_s
    pass_kernels: int = 0
    iteration_s: float = 0.0
    collectives: dict | None = None
    collectives_note: str = ""
    gpus: int = 0
    versions: dict = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def as_dict(self) -> dict:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "parts" and v is not None}
        out["parts"] = {k: p.as_dict() for k, p in self.parts.items()}
        out["layer_us"] = {k: layer_fixed_s(p, self.launch_s) * 1e6 for k, p in self.parts.items()}
        out["launch_us"] = self.launch_s * 1e6
        out["iteration_us"] = self.iteration_s * 1e6
        return out


def versions(device: str) -> dict[str, str]:
    """torch, CUDA and cuDNN versions, and the device's name (what a calibration record names)."""
    out = {"torch": torch.__version__}
    if torch.device(device).type == "cuda":
        out["cuda"] = str(torch.version.cuda)
        out["cudnn"] = str(torch.backends.cudnn.version())
        out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(torch.device(device))))
    return out


def _layer_kernels(spec: ModelSpec, parts: dict[str, PartTiming]) -> int:
    """Launches of all layers of `spec` by their parts (a decoder layer is one mixer and one FFN)."""
    mixer = {"full": "full_attention", "linear": "linear_attention"}
    ffn = {"dense": "dense_mlp", "moe": "moe"}
    return sum(parts[mixer[m]].kernels + parts[ffn[f]].kernels for m, f in zip(spec.layer_kinds, spec.ffn_kinds))


def pass_kernel_count(model: Model, context: int, device: str, seed: int = 0) -> tuple[int, str]:
    """Launches of one decode step at `context` in steady state (KV buffer already large enough)."""
    g = torch.Generator().manual_seed(seed)
    cache = model.new_cache(1)
    if context:
        model.prefill(cache, torch.randint(0, model.spec.vocab, (1, context), generator=g).to(model.device))
    cache.snapshot()
    ids = torch.randint(0, model.spec.vocab, (1, 1), generator=g).to(model.device)
    model.forward_tokens(cache, ids)  # grows the KV buffer outside the counted call
    cal.restore_cache(cache, context)
    return count_kernels(lambda: model.forward_tokens(cache, ids), device)


def measure_engine_terms(specs: dict[str, ModelSpec], profiles: dict[str, HardwareProfile], dtype: str, device: str,
                         cfg: mb.TimingConfig = mb.TimingConfig(), scale: str = "bench", collectives: bool = True,
                         anchor_points: Sequence[tuple[int, int, int]] = cal.ANCHOR_POINTS, seed: int = 0,
                         progress: Callable[[str], None] | None = None) -> EngineTerms:
    """Measure every engine term on `device` in `dtype`.

    `specs`: the scaled "weak" (full attention, Gated DeltaNet, dense MLP) and "strong" (MoE)
    models; `profiles`: the calibrated hardware profile of each model at hand (at least one;
    a part of a model without one is priced on another's — its roofline share is negligible).
    The iteration term is fitted on `anchor_points` decode passes of the models with a profile.
    """
    tick = progress or (lambda _m: None)
    if not profiles:
        raise ValueError("need the calibrated hardware profile of at least one model")
    missing = {m for m, *_ in ENGINE_PARTS.values()} - set(specs)
    if missing:
        raise ValueError(f"need the scaled models {sorted(missing)} for their layer parts")
    parts: dict[str, PartTiming] = {}
    for kind in LAYER_KINDS:
        model, role, _ = ENGINE_PARTS[kind]
        tick(f"engine terms: {kind} part ({model} model)")
        hw = profiles.get(model) or next(iter(profiles.values()))
        parts[kind] = time_part(build_part(specs[model], kind, dtype, device, seed=seed), hw, dtype, device, cfg)
    launch = launch_per_kernel_s(list(parts.values()))
    if launch is None:
        launch_note = "CPU: no kernel launch apart from an op's execution; each op's dispatch is inside the measured eager part times"
        launch = 0.0
    else:
        launch_note = "measured: Σ(eager − CUDA-graph replay) / Σ kernels over the four layer parts"
    stamp = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    facts = cal.device_facts(device)
    terms = EngineTerms(device=device, device_name=facts.name, dtype=dtype, scale=scale, date=stamp, parts=parts, launch_s=launch,
                        launch_note=launch_note, versions=versions(device))
    # decode anchor passes: their kernels beyond the layers', then the per-iteration residual
    observed = []
    counts = []
    for name, hw in profiles.items():
        tick(f"engine terms: {name} decode passes")
        spec = specs[name]
        m = Model(spec, seed=seed, dtype=mb.torch_dtype(dtype), device=device)
        measured = cal.measure_passes(m, anchor_points, dataclasses.replace(cfg, repeats=max(cfg.repeats, 9)), seed)
        layer_k = _layer_kernels(spec, parts)
        for point, t in zip(anchor_points, measured):
            k, _ = pass_kernel_count(m, point[2], device, seed)
            counts.append(k - layer_k)
            terms.passes.append({"model": name, "point": list(point), "measured_s": t, "kernels": k, "layer_kernels": layer_k})
            observed.append((spec, hw, point, t))
    terms.pass_kernels = max(int(round(statistics.median(counts))), 0)
    engine0 = parse_engine(engine_profile_dict(terms), "<engine terms, iteration 0>")
    terms.iteration_s, resid = fit_iteration(observed, dtype, engine0)
    for row, r in zip(terms.passes, resid):
        row["residual_s"] = r
    # collectives over every visible GPU
    terms.gpus = torch.cuda.device_count() if terms.cuda else 0
    measure, terms.collectives_note = collectives_plan(terms.cuda, terms.gpus, collectives)
    if measure:
        tick(f"engine terms: NCCL all-reduce and all-to-all over {terms.gpus} GPUs")
        terms.collectives = measure_collectives(terms.gpus, "nccl", COLLECTIVE_BYTES)
    return terms


def collectives_plan(cuda: bool, gpus: int, wanted: bool = True) -> tuple[bool, str]:
    """(measure?, what the record says): collectives need CUDA and >= 2 visible GPUs; nothing is invented otherwise."""
    if not cuda:
        return False, "not measured: CPU device (no GPUs)"
    if gpus < 2:
        return False, f"not measured: {gpus} GPU (torch.cuda.device_count() = {gpus}; a collective needs >= 2)"
    if not wanted:
        return False, f"not measured: skipped by the caller ({gpus} GPUs visible)"
    return True, f"measured: torch.distributed NCCL over {gpus} GPUs"


# --------------------------------------------------------------------------- the profile
def _g(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}")


def engine_id(device_name: str, dtype: str) -> str:
    return cal.slug(f"calibrated-{device_name.removeprefix('NVIDIA ')}-{dtype}")


def engine_profile_dict(t: EngineTerms) -> dict:
    """The engine profile TOML table of `t`: every value with the measurement it comes from."""
    src = f"measured by specagent calibrate on {t.device_name} ({t.device}), torch {t.versions.get('torch', torch.__version__)}, {t.dtype}, {t.date}"
    ctx = PART_CONTEXT
    per_layer, kernels = {}, {}
    for kind, p in t.parts.items():
        model, role, _ = ENGINE_PARTS[kind]
        what = f"{'norm + mixer' if role == 'mixer' else 'norm + FFN'} + residual add of a {model}-{t.scale} layer, batch 1, 1 token, context {ctx if role == 'mixer' else 0}"
        if p.graph_s is not None:
            how = f"CUDA-graph replay {p.graph_s * 1e6:.3f} us - roofline {p.roofline_s * 1e6:.3f} us"
            if p.eager_s > p.eager_fixed_s:
                how += f" + routing-count host reads {(p.eager_s - p.eager_fixed_s) * 1e6:.3f} us (eager with - without)"
        else:
            how = f"eager {p.eager_s * 1e6:.3f} us - roofline {p.roofline_s * 1e6:.3f} us"
            if t.launch_s > 0:
                how += f" - {p.kernels} kernels x launch {t.launch_s * 1e6:.3f} us (no CUDA graph: {p.graph_error or 'not captured'})"
        per_layer[kind] = {"value": _g(layer_fixed_s(p, t.launch_s) * 1e6), "source": f"{src}: {what}: {how}"}
        kernels[kind] = {"value": int(p.kernels), "source": f"{src}: {what}: {p.kernels_how}"}
    graphed = [p for p in t.parts.values() if p.graph_s is not None]
    if graphed:
        launch_src = (f"{src}: sum over the four layer parts of (eager - CUDA-graph replay) "
                      f"{sum(max(p.eager_fixed_s - p.graph_s, 0.0) for p in graphed) * 1e6:.3f} us / {sum(p.kernels_fixed for p in graphed)} "
                      "kernels; added to GPU time, not overlapped, as the cost model adds launches")
    else:
        launch_src = f"{src}: {t.launch_note}"
    resid = [r.get("residual_s", 0.0) * 1e6 for r in t.passes]
    points = sorted({(r["model"], tuple(r["point"])) for r in t.passes})
    data: dict[str, Any] = {
        "schema_version": 1,
        "id": engine_id(t.device_name, t.dtype),
        "name": f"specagent torch modules, eager, on {t.device_name} ({t.dtype}, calibrated)",
        "version": ", ".join(f"{k} {v}" for k, v in t.versions.items()),
        "cuda_graphs": {
            "decode": {"value": False, "source": "specagent live and calibrate run the torch modules eagerly (kernels/live.py, kernels/calibrate.py): no CUDA graphs"},
            "max_batch": {"value": 1, "source": "unused: no CUDA graphs"},
            "mixed": {"value": False, "source": "specagent's torch runs capture no graphs"},
        },
        "per_pass": {
            "iteration_us": {"value": _g(t.iteration_s * 1e6),
                             "source": f"{src}: median over decode anchor passes {[f'{m} {list(p)}' for m, p in points]} of measured - this "
                                       f"profile's price without it (residuals {', '.join(f'{r:.1f}' for r in resid)} us): host work per pass outside the layers"},
            "per_sequence_us": {"value": 0.0, "source": "specagent's torch model runs a batch as one tensor: no host work per sequence (kernels/modules.py Model.forward_tokens)"},
            "launch_us": {"value": _g(t.launch_s * 1e6), "source": launch_src},
            "kernels": {"value": int(t.pass_kernels),
                        "source": f"{src}: launches of a decode pass - those of its layers' parts, median over {len(t.passes)} passes "
                                  f"({', '.join(str(r['kernels'] - r['layer_kernels']) for r in t.passes)})"},
        },
        "per_request": {"request_us": {"value": 0.0, "source": "no API server: specagent live calls the torch models in-process (kernels/live.py)"}},
        "per_layer_us": per_layer,
        "kernels_per_layer": kernels,
        "kernels": {
            "moe_pad_tokens": {"value": 0.0, "source": "specagent's MoE runs each touched expert on exactly its tokens, no block padding (kernels/modules.py MoE.forward)"},
            "bandwidth_half_mb": {"value": 0.0, "source": "flat achieved bandwidth, as the calibrated hardware profile fits it (one bandwidth efficiency); not measured per kernel size"},
        },
        # the torch runner batches whatever it is handed: it picks no limits of its own, so a fleet priced on this
        # profile gets vLLM SchedulerConfig's fallbacks (as the `ideal` profile) unless its pools set their own
        "scheduler": [{"min_gpu_memory_gib": 0, "max_num_seqs": 128, "max_batched_tokens": 2048,
                       "source": "specagent's torch runner has no scheduler (kernels/live.py runs each call as one batch): vLLM "
                                 "SchedulerConfig's fallbacks DEFAULT_MAX_NUM_SEQS = 128 and DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048 "
                                 "(vllm-project/vllm vllm/config/scheduler.py), as in the ideal profile"}],
        "provenance": {"tool": "specagent calibrate (engine terms)", "device": t.device, "device_name": t.device_name, "dtype": t.dtype,
                       "scale": t.scale, "date": t.date, **{k: str(v) for k, v in t.versions.items()},
                       "collectives": t.collectives_note, "launch": t.launch_note},
    }
    if t.collectives:
        c = t.collectives
        csrc = f"{src}: torch.distributed {c['backend']} over {c['ranks']} GPUs, {len(c['all_reduce']['points'])} message sizes " \
               f"{COLLECTIVE_BYTES[0]} B-{COLLECTIVE_BYTES[-1] // 2**20} MiB, fit t = alpha + bytes/beta in relative error"
        data["collectives"] = {
            "allreduce_alpha_us": {"value": _g(c["all_reduce"]["alpha_us"]), "source": f"{csrc} (all_reduce, beta {c['all_reduce']['beta_gb_s']:.4g} GB/s)"},
            "all_to_all_alpha_us": {"value": _g(c["all_to_all"]["alpha_us"]), "source": f"{csrc} (all_to_all_single, beta {c['all_to_all']['beta_gb_s']:.4g} GB/s)"},
        }
        data["limits"] = {"max_gpus": {"value": int(c["ranks"]), "source": f"collective latencies measured on {c['ranks']} GPUs"}}
    else:
        data["limits"] = {"max_gpus": {"value": 1, "source": f"collective latencies {t.collectives_note}"}}
    return data


def write_engine_toml(data: dict, path: str | Path) -> Path:
    """Validate through the engine loader, then write atomically."""
    path = Path(path)
    parse_engine(data, str(path))
    return atomic.write_text(path, "# Serving-engine profile written by `specagent calibrate`; every figure carries its source.\n" + tomli_w.dumps(data))


def price_rows(spec: ModelSpec, hw: HardwareProfile, engine: EngineProfile, dtype: str, rows: Sequence[cal.ValidationRow]) -> list[cal.ValidationRow]:
    """The same measured passes priced on `engine` (held-out validation of the engine terms, no re-measurement)."""
    if not rows:
        return []
    cost = cal.price_points(spec, hw, dtype, [(r.batch, r.new_tokens, r.context) for r in rows], engine)
    return [dataclasses.replace(r, predicted_s=float(t), bound="compute" if cb else "memory") for r, t, cb in zip(rows, cost.time_s, cost.compute_bound)]
