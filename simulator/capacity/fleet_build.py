"""Fleet runs assembled from a Scenario: the one builder the planner, the sweeps and the studies use.

Three steps, each done here only: deployments sized for the work (`fitting_deployment`),
priced pools of them (`build_fleet`: the user's $/GPU-hour first, then the profile's),
and tasks sampled from the workload and planned under a strategy (`plan_tasks`) or read
from a plain serving request trace (`request_tasks`: one call per request on the Strong
pool, which serves "the model"), which the engine then serves on any number of candidate
fleets (`TaskPlan.serve`) with the same tasks and arrival times.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np

from specagent.common.alloc import paused_gc
from specagent.costmodel.deployment import Deployment, tp_problem
from specagent.simulator.fleet.sim import CALL, FleetSim, compile_steps
from specagent.simulator.fleet.config import (
    STRONG_POOL, WARMUP_SHARE, WEAK_POOL, Arrivals, Fleet, ReplicaPool, Scheduler, resolve_price,
)
from specagent.simulator.fleet.results import FleetResult
from specagent.simulator.fleet.trace import write_chrome_trace
from specagent.simulator.protocol.phases import STRONG_DECODE, STRONG_PHASES, STRONG_PREFILL, WEAK_PHASES
from specagent.simulator.protocol.plan import CallPlan
from specagent.simulator.scenario import DeploymentSpec, Scenario
from specagent.simulator.protocol.setting import ApiModel, Setting
from specagent.simulator.strategies.catalog import Strategy, make_strategy
from specagent.traces.requests import RequestTrace

if TYPE_CHECKING:  # a request trace's replay plans no agent workload: these load where one is planned
    from specagent.simulator.protocol.workload import Episode, UnitTable
    from specagent.traces.schema import Trajectory

    Workload = Iterable[Trajectory | Episode] | UnitTable

#: GPUs per replica the sizing tries, in order.
GPU_COUNTS = (1, 2, 4, 8)
ROUTER = "session_affinity"


def sample_tasks(n_episodes: int, n_tasks: int, seed: int) -> np.ndarray:
    """Which workload episode each task replays (uniform with replacement, seeded)."""
    if n_episodes < 1:
        raise ValueError("the workload has no trajectories")
    return np.random.default_rng([int(seed), 104729]).integers(0, n_episodes, n_tasks)


def fitting_deployment(spec: DeploymentSpec, gpu: str | None, context: int,  # type: ignore[valid-type]
                       counts: Sequence[int] = GPU_COUNTS, hardware_dirs: Iterable[str | Path] = ()) -> Deployment:
    """`spec` on GPU type `gpu` (its own when None) with the fewest GPUs of `counts` that hold one `context`-token
    sequence; a dense model runs tensor-parallel whatever `spec` says."""
    dep = replace(spec, hardware=gpu or spec.hardware, gpus=counts[0], parallelism="tp").build(hardware_dirs)
    if dep.model.is_moe:
        dep = replace(dep, parallelism=spec.parallelism)
    dep.check_context(context)  # past the model's window no GPU count helps
    for g in counts:
        if tp_problem(dep.model, g) is not None:  # e.g. 8 GPUs for a model with 12 heads: not a deployment
            continue
        cand = replace(dep, gpus=g)
        if cand.memory_needed(1, context) <= cand.usable_bytes:
            return cand
    raise ValueError(f"{dep.model.name} in {dep.weight_dtype} does not fit {counts[-1]}x {dep.hardware.name} with a "
                     f"{context:,}-token sequence; use a smaller weight dtype or a larger GPU")


def parse_gpu_counts(text: str | Sequence[int]) -> tuple[int, ...]:
    """`--search-gpus 1,2,4,8` (or a list) as GPU counts per replica to try, in order; a bad entry raises ValueError."""
    items = [t.strip() for t in text.split(",")] if isinstance(text, str) else list(text)
    out = []
    for t in items:
        try:
            g = int(t) if not isinstance(t, bool) else None
        except (TypeError, ValueError):
            g = None
        if g is None or str(g) != str(t).strip() or g < 1:
            raise ValueError(f"expected GPU counts per replica as whole numbers >= 1 (e.g. 1,2,4,8), got {t!r}")
        out.append(g)
    if not out:
        raise ValueError("expected at least one GPU count per replica (e.g. 1,2,4,8)")
    return tuple(sorted(set(out)))


def sized_deployment(spec: DeploymentSpec, gpu: str | None, context: int,  # type: ignore[valid-type]
                     search_gpus: Sequence[int] | None = None, hardware_dirs: Iterable[str | Path] = ()) -> Deployment:
    """The deployment a fleet command runs for `spec` on GPU type `gpu` (its own when None).

    `search_gpus` None: the scenario's deployment as given (its GPUs per replica and
    parallelism), which must hold one `context`-token sequence; else the fewest of
    `search_gpus` that do (`fitting_deployment`). Outputs record what ran (`gpus_sizing`).
    """
    if search_gpus is not None:
        return fitting_deployment(spec, gpu, context, tuple(search_gpus), hardware_dirs)
    dep = replace(spec, hardware=gpu or spec.hardware).build(hardware_dirs)
    dep.check_context(context)  # past the model's window no deployment helps
    if dep.memory_needed(1, context) > dep.usable_bytes:
        raise ValueError(f"{dep.model.name} in {dep.weight_dtype} on {dep.gpus}x {dep.hardware.name} (the scenario's GPUs per "
                         f"replica) does not fit a {context:,}-token sequence beside its weights; give more GPUs per replica "
                         f"(--weak-gpus / --strong-gpus, or the scenario's gpus) or ask for a search (--search-gpus 1,2,4,8; "
                         f"in a sweep, [sweep] search_gpus)")
    return dep


def check_requests_fit(trace: RequestTrace, fits: Callable[[int], object]) -> None:
    """One over-window check for every command that serves a request trace (plan, replay, sweep): the longest request
    (prompt + output) must pass `fits(tokens)` (a deployment's window and memory check, raising ValueError); the error
    names the file and the line (a dataset's record), so the same CSV is refused in the same words by each."""
    if not len(trace):
        return
    total = np.asarray(trace.prompt_tokens, dtype=np.int64) + np.asarray(trace.output_tokens, dtype=np.int64)
    i = int(np.argmax(total))
    n = int(total[i])
    try:
        fits(n)
    except ValueError as exc:
        raise ValueError(f"{trace.source or 'request trace'}: {trace.location(i)}: its request of {n:,} tokens (prompt + output) "
                         f"cannot be served: {exc}") from None


def gpus_sizing(search_gpus: Sequence[int] | None) -> str:
    """How a fleet command chose GPUs per replica, for its outputs."""
    return "as given by the scenario" if search_gpus is None else \
        f"searched: the fewest of {','.join(map(str, search_gpus))} that hold the longest context"


def build_pool(dep: Deployment | ApiModel, replicas: int | None, router: str = ROUTER, scheduler: Scheduler | None = None,
               prices: dict[str, float] | None = None) -> ReplicaPool:
    """A priced pool of `replicas` replicas of `dep` (an API model is one unlimited pool); `scheduler` None: the
    serving engine's own limits on dep's GPU."""
    if isinstance(dep, ApiModel):
        return ReplicaPool(dep, None, router, scheduler)
    price, source = resolve_price(dep.hardware, prices)
    return ReplicaPool(dep, replicas, router, scheduler, price, source)


def build_fleet(weak: Deployment | ApiModel | None, strong: Deployment | ApiModel | None, weak_replicas: int | None = 1,
                strong_replicas: int | None = 1, *, weight_mode: str, router: str = ROUTER, scheduler: Scheduler | None = None,
                prices: dict[str, float] | None = None) -> Fleet:
    """The Weak and the Strong pool (None: the fleet has no such pool, for strategies that never call it)."""
    return Fleet(weak=None if weak is None else build_pool(weak, weak_replicas, router, scheduler, prices),
                 strong=None if strong is None else build_pool(strong, strong_replicas, router, scheduler, prices),
                 weight_mode=weight_mode)


def fleet_from_setting(setting: Setting, weak_replicas: int | None = 1, strong_replicas: int | None = 1, router: str = ROUTER,
                       scheduler: Scheduler | None = None, prices: dict[str, float] | None = None) -> Fleet:
    """Pools of a Setting's deployments (an API Strong model becomes an unlimited API pool)."""
    return build_fleet(setting.weak, setting.strong, weak_replicas, strong_replicas, weight_mode=setting.weight_mode,
                       router=router, scheduler=scheduler, prices=prices)


@dataclass(frozen=True)
class TaskPlan:
    """Tasks sampled from a workload and planned under one strategy, compiled for the engine once.

    Serving it on several fleets replays the very same tasks (common random numbers), which
    is what lets the planner compare candidate fleets.
    """

    strategy: Strategy
    plan: CallPlan
    steps: list[list[tuple]]
    task_ids: list[str]

    @property
    def n_tasks(self) -> int:
        return self.plan.n_traj

    def uses(self, pool: int) -> bool:
        """Whether any task calls the Weak (WEAK_POOL) or the Strong (STRONG_POOL) model."""
        return bool(np.isin(self.plan.phase, WEAK_PHASES if pool == WEAK_POOL else STRONG_PHASES).any())

    @property
    def max_context(self) -> int:
        """The longest context any call reaches (what a replica must hold)."""
        return int(np.max(self.plan.context + self.plan.tokens)) if len(self.plan) else 0

    def serve(self, fleet: Fleet, arrival_times: np.ndarray, warmup: float = WARMUP_SHARE,
              step_by_token: bool = False, horizon: float = float("inf")) -> FleetResult:
        """Serve the tasks arriving at `arrival_times`, in order; more arrivals than tasks replay the tasks cyclically
        (task i is planned task i mod n_tasks), so one planned sample serves windows of any length."""
        return self.result(self.simulation(fleet, arrival_times, warmup, step_by_token, horizon))

    def simulation(self, fleet: Fleet, arrival_times: np.ndarray, warmup: float = WARMUP_SHARE,
                   step_by_token: bool = False, horizon: float = float("inf"), record_segments: bool = True) -> FleetSim:
        """The engine set up as `serve` runs it, for a caller that advances it in steps (`FleetSim.advance`);
        record_segments=False for one that reads only the call records (replay)."""
        n = len(arrival_times)
        m = self.n_tasks
        steps = self.steps if n == m else [self.steps[i % m] for i in range(n)]
        ids = self.task_ids if n == m else [self.task_ids[i % m] for i in range(n)]
        return FleetSim(self.plan, fleet, arrival_times, ids, step_by_token=step_by_token, warmup=warmup, steps=steps,
                        horizon=horizon, record_segments=record_segments)

    def call_records(self, fleet: Fleet, arrival_times: np.ndarray) -> np.ndarray:
        """Serve the tasks arriving at `arrival_times` and return only the engine's call records (`FleetSim.call_records`:
        one per model call), without the frames `serve` builds.

        Why: the task, turn, segment and replica frames and the summary are about 10% of a 10^5-request replay, and
        replay reports none of them; it reads each request's submit, admit, first-token and done times from these."""
        sim = self.simulation(fleet, arrival_times, 0.0, record_segments=False)
        sim.advance(sim.horizon)
        return sim.call_records()

    def result(self, sim: FleetSim) -> FleetResult:
        """Run `sim` (from `simulation`) to its end and label its result with the strategy."""
        res = sim.run()
        res.summary["strategy"] = self.strategy.name
        res.summary["strategy_label"] = self.strategy.label
        return res


def episodes_of(workload: Workload) -> Sequence[Episode]:
    """The workload as Episodes (tasks are sampled from them one by one)."""
    from specagent.simulator.protocol.workload import UnitTable
    from specagent.simulator.run import to_episodes

    eps = to_episodes(workload)
    return eps.episodes() if isinstance(eps, UnitTable) else eps


def plan_tasks(episodes: Sequence[Episode], strategy: str | Strategy, scenario: Scenario, n_tasks: int) -> TaskPlan:
    """`n_tasks` episodes sampled with the scenario's seed, planned under `strategy` (its K and review policy,
    when named) with the scenario's acceptance model and serving policy."""
    from specagent.simulator.run import plan_strategy

    chosen = [episodes[i] for i in sample_tasks(len(episodes), n_tasks, scenario.seed)]
    strat = strategy if isinstance(strategy, Strategy) else make_strategy(strategy, k=scenario.k, review=scenario.review)
    plan = plan_strategy(chosen, strat, scenario, scenario.acceptance, scenario.seed)
    return TaskPlan(strat, plan, compile_steps(plan), [e.task_id for e in chosen])


class PlainServing(Strategy):
    """Not an agent strategy: the label of a plain LLM serving workload (one call per request, from a request trace)."""

    name = "serving"
    label = "plain LLM serving (one call per request)"

    def run(self, *args, **kwargs) -> None:
        raise TypeError("plain serving replays a request trace (request_tasks), not agent episodes")


def request_tasks(trace: RequestTrace) -> TaskPlan:
    """Each request as one task of one call on the Strong pool: a prefill of its prompt, which yields the first output
    token (as vLLM and SGLang emit it), then one decode iteration per further output token."""
    n = len(trace)
    prompt, out = trace.prompt_tokens.astype(np.float64), trace.output_tokens.astype(np.float64) - 1.0
    traj = np.repeat(np.arange(n, dtype=np.int64), 2)
    phase = np.tile(np.array([STRONG_PREFILL, STRONG_DECODE], dtype=np.int64), n)
    tokens = np.column_stack([prompt, out]).ravel()
    context = np.column_stack([np.zeros(n), prompt]).ravel()
    plan = CallPlan(traj=traj, phase=phase, tokens=tokens, context=context, wait_s=np.zeros(2 * n),
                    group=np.arange(2 * n, dtype=np.int64), lane=np.zeros(2 * n, dtype=np.int64),
                    stats=np.zeros((n, 0), dtype=np.int64), n_traj=n)
    # call_step's tuple, spelled out (a call into the compiled engine per request), and the collector paused: at 10^5
    # requests its scans of these small acyclic objects cost 3x their building (0.12 s against 0.03 s here)
    with paused_gc():
        steps = [[(CALL, STRONG_POOL, p, 0, o, STRONG_PREFILL, 2)] for p, o in zip(trace.prompt_tokens.tolist(),
                                                                                (trace.output_tokens - 1).tolist())]
        ids = [f"r{i}" for i in range(n)]
    return TaskPlan(PlainServing(), plan, steps, ids)


def simulate_fleet(workload: Workload, strategy: str | Strategy, fleet: Fleet, n_tasks: int, arrivals: Arrivals,
                   scenario: Scenario | None = None, *, trace_path: str | Path | None = None, warmup: float = WARMUP_SHARE,
                   step_by_token: bool = False) -> FleetResult:
    """Sample n_tasks from the workload, plan `strategy` for each (the scenario's parameters), serve them on `fleet`."""
    tasks = plan_tasks(episodes_of(workload), strategy, scenario or Scenario(), n_tasks)
    res = tasks.serve(fleet, arrivals.sample(n_tasks), warmup, step_by_token)
    if trace_path is not None:
        write_chrome_trace(trace_path, res)
    return res


__all__ = ["GPU_COUNTS", "STRONG_POOL", "WEAK_POOL", "PlainServing", "TaskPlan", "build_fleet", "build_pool", "episodes_of",
           "fitting_deployment", "fleet_from_setting", "gpus_sizing", "parse_gpu_counts", "sized_deployment", "plan_tasks", "request_tasks", "sample_tasks", "simulate_fleet"]
