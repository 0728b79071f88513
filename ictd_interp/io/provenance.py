"""What decides the bits of a CPU training run, and how two runs' weights are compared.

A training run is a long chain of floating-point reductions. Its bits depend on the code and the
seed, and also on the kernels that run it: torch and its MKL / oneDNN versions, the thread count
(reduction order), and the instruction set the kernels dispatch on (AVX2 vs AVX-512 vs AMX give
different fused-multiply-add and summation orders). Every shipped model's ``card.json`` records these
as its ``fingerprint``. Retraining on a machine with the same fingerprint reproduces the weights bit for
bit; on any other machine they agree within the card's ``cross_machine_rtol`` (measured: docs/theory.md
§11).
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any, Optional

import torch

# The x86 instruction-set extensions torch, MKL and oneDNN choose kernels by. (Other flags, such as
# virtualisation or power management, never change a computed value and are left out.)
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
)
# What must be equal for two runs to be bit for bit the same (``machine`` and ``cpu_model`` are kept
# to tell a reader which machine it was; the model string alone is not enough: one "AMD EPYC" string
# covers several generations with different AVX-512 support).
BIT_DECIDING = ("machine", "cpu_model", "isa_flags", "torch_cpu_capability", "torch", "mkl", "onednn", "threads")
CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_field(name: str) -> Optional[str]:
    if not CPUINFO.exists():
        return None
    match = re.search(rf"^{name}\s*:\s*(.*)$", CPUINFO.read_text(), flags=re.MULTILINE)
    return match.group(1).strip() if match else None


def cpu_model() -> str:
    return _cpuinfo_field("model name") or platform.processor() or "unknown"


def isa_flags() -> list[str]:
    """The kernel-deciding instruction-set flags this CPU reports (Linux; empty elsewhere)."""
    flags = set((_cpuinfo_field("flags") or "").split())
    return [f for f in ISA_FLAGS if f in flags]


def library_versions() -> dict[str, Optional[str]]:
    """torch, and the MKL and oneDNN versions torch was built with (from ``torch.__config__.show()``)."""
    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\w.\-]+)", config)
    onednn = re.search(r"MKL-DNN v([\w.\-]+)", config)
    return {
        "torch": torch.__version__,
        "mkl": mkl.group(1) if mkl else None,
        "onednn": onednn.group(1) if onednn else None,
    }


def fingerprint(threads: Optional[int] = None) -> dict[str, Any]:
    """This machine's bit-deciding settings, at ``threads`` torch threads (default: the current count)."""
    return {
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "isa_flags": isa_flags(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        **library_versions(),
        "threads": int(threads if threads is not None else torch.get_num_threads()),
    }


def differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The bit-deciding settings that differ, as ``"name: recorded -> current"`` (empty: same kernels)."""
    return [
        f"{k}: {recorded.get(k)!r} -> {current.get(k)!r}" for k in BIT_DECIDING if recorded.get(k) != current.get(k)
    ]


def weight_drift(reference: dict[str, torch.Tensor], other: dict[str, torch.Tensor]) -> dict[str, Any]:
    """How far ``other``'s weights are from ``reference``'s: bit-equal or not, the largest absolute
    difference, and that difference relative to the largest reference weight."""
    if reference.keys() != other.keys():
        raise ValueError(f"weights: different parameter names {sorted(reference)} vs {sorted(other)}")
    max_abs = max(float((reference[k].double() - other[k].double()).abs().max()) for k in reference)
    scale = max(float(reference[k].double().abs().max()) for k in reference)
    return {
        "bit_equal": all(torch.equal(reference[k], other[k]) for k in reference),
        "max_abs": max_abs,
        "max_rel": max_abs / scale if scale > 0 else max_abs,
    }
