"""Jobs that run torch models (`calibrate`, `live`), beside the kernels they drive.

They live here, not under simulator/jobs/, because the import layers put the torch backend above the simulator
(tests/test_import_layers.py). Each job module imports torch only inside `run`, so that a base install (no torch)
can build their Requests, show their help and refuse them cleanly (`TorchMissing`, naming the `[torch]` extra).
"""

from __future__ import annotations

from specagent.simulator.jobs.base import JobError


class TorchMissing(JobError):
    """The job runs torch models and torch is not installed."""

    def __init__(self, cause: BaseException):
        super().__init__(f"this command runs torch models and needs torch ({cause}); install it with: pip install 'specagent[torch]'")


def torch_backend():
    """torch and the calibration and microbenchmark modules, imported only by a job that runs models."""
    try:
        import torch

        from specagent.kernels import calibrate as cal
        from specagent.kernels import microbench as mb
    except ImportError as exc:
        raise TorchMissing(exc) from None
    return torch, cal, mb


def setup_device(device: str, threads: int) -> None:
    """Refuse a CUDA device this machine lacks; set torch's threads (0: its default)."""
    torch, _, _ = torch_backend()
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise JobError(f"`device` {device}: CUDA is not available on this machine (use `device` cpu)")
    if threads > 0:
        torch.set_num_threads(threads)
