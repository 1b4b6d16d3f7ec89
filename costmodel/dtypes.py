"""Storage sizes and the compute peak each weight format runs at."""

from __future__ import annotations

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

#: Which peak_tflops entry a GEMM uses when weights are stored in this format.
#: Weight-only int4/int8 kernels dequantise to bf16 and run at the bf16 peak.
COMPUTE_DTYPE: dict[str, str] = {
    "fp32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "bf16",
    "int4": "bf16",
}


def dtype_bytes(name: str) -> float:
    try:
        return DTYPE_BYTES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown dtype '{name}'; known: {', '.join(DTYPE_BYTES)}") from None
