"""τ-bench (v1) runs: a JSON list of ``{task_id, reward, info, traj, trial}``, each ``traj`` an OpenAI-chat message list.

The historical trajectories sierra-research/tau-bench publishes (``historical_trajectories/*.json``) and what its
``run.py`` writes (``results/*.json``). They carry no usage and no timestamps: every count is estimated from the
text, no wait is recorded. Their tools are τ²-Bench's airline and retail tools, so τ²-Bench's tags apply (the
domain is found from the tools called). Success is ``reward == 1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ..errors import SkippedRecord, TraceFormatError, close_skips
from ..openai_chat import conversation_to_trajectory, iter_records
from ..schema import Trajectory
from .base import FormatFacts, ImportOptions, Importer, Match, Probe

FORMAT = "τ-bench runs (a JSON list of {task_id, reward, info, traj, trial})"


def _is_run(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("traj"), list) and "task_id" in obj


class TauBench(Importer):
    name = "tau-bench"
    title = "τ-bench (v1) runs and historical trajectories: a list of {task_id, reward, info, traj, trial}"
    spec = "sierra-research/tau-bench (run.py results; historical_trajectories/*.json; tau_bench/types.py EnvRunResult)"
    facts = FormatFacts(
        tokens="none: estimated from the text (no usage is logged)",
        latency="none (no timestamps): waits not recorded",
        tags="τ²-Bench's airline/retail tags (the domain is found from the tools called)",
        reasoning="none logged: unknown",
        success="reward (success = reward 1)",
    )

    def sniff(self, probe: Probe) -> Match | None:
        first = probe.first
        items = first if isinstance(first, list) else [first]
        if items and all(_is_run(r) for r in items[:3]):
            return Match(1.0, "runs with 'task_id' and a 'traj' message list")
        if '"traj"' in probe.head and probe.partial:
            return Match(1.0, "a JSON document with τ-bench's 'traj' lists")
        if '"traj"' in probe.head:
            return Match(0.3, "a 'traj' key, but not in a list of runs with 'task_id'")
        return None

    def read(self, path: str | os.PathLike, options: ImportOptions) -> Iterator[Trajectory]:
        path = str(path)
        n = 0
        here: list[SkippedRecord] = []
        file_domain: str | None = None  # a file holds one domain's runs: a run calling no tool takes it too
        for where, run in iter_records(path, FORMAT, "tau-bench"):
            try:
                if isinstance(run, TraceFormatError):
                    raise run
                if not _is_run(run):
                    raise TraceFormatError(path, where, "traj", "a run object with 'task_id' and a 'traj' message list",
                                           type(run).__name__)
                reward = run.get("reward")
                conv = {"messages": run["traj"], "task_id": run["task_id"], "reward": reward,
                        "success": None if not isinstance(reward, (int, float)) or isinstance(reward, bool)
                        else abs(float(reward) - 1.0) < 1e-9,
                        "metadata": {"trial": run.get("trial") if isinstance(run.get("trial"), int) else None}}
                traj = conversation_to_trajectory(conv, file=path, where=where,
                                                  domain=options.domain or file_domain or "unknown",
                                                  repairs=options.repairs, tagger=options.tagger, importer=self.name)
                if file_domain is None and traj.domain != "unknown":
                    file_domain = traj.domain
            except TraceFormatError as e:
                options.tagger.marks()
                options.skip(e, here)
                continue
            n += 1
            yield traj
        close_skips(n, path, here, options.skipped, "at least one run")

