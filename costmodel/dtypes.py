"""Storage sizes and the compute peak each weight format runs at."""

from __future__ import annotations

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    # NVFP4: 4-bit E2M1 values + one FP8 (UE4M3) scale per 16 values (+ one FP32 per tensor, negligible):
    # 4.5 bits = 0.5625 bytes per parameter (intel.github.io/neural-compressor PT_NVFP4Quant, format table;
    # docs.nvidia.com/nemo/automodel nemo_automodel.components.quantization.nvfp4: "0.5625 bytes per parameter")
    "nvfp4": 0.5625,
}

#: Which peak_tflops entry a GEMM uses when weights are stored in this format.
#: Weight-only int4/int8 kernels dequantise to bf16 and run at the bf16 peak. NVFP4 checkpoints run
#: FP4 x FP4 block-scaled GEMMs (activations quantised on the fly) where the GPU has FP4 tensor cores
#: (Blackwell); elsewhere `Deployment.compute_dtype` falls back to bf16 (weight-only FP4 kernels).
COMPUTE_DTYPE: dict[str, str] = {
    "fp32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "bf16",
    "int4": "bf16",
    "nvfp4": "fp4",
}


#: Spellings serving engines use for a format this module knows: vLLM's and SGLang's --kv-cache-dtype take
#: "fp8_e4m3" and "fp8_e5m2" for one-byte KV (vllm/config/cache.py CacheDType; sglang server_args.py).
DTYPE_ALIASES: dict[str, str] = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


def canonical_dtype(name: str) -> str:
    """A dtype as this module names it (aliases resolved, lower case); unknown names pass through unchanged."""
    n = name.lower()
    return DTYPE_ALIASES.get(n, n)


def dtype_bytes(name: str) -> float:
    try:
        return DTYPE_BYTES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown dtype '{name}'; known: {', '.join(DTYPE_BYTES)}") from None
