"""Datasheet dense peaks per GPU and precision: a copy of src/peaks.rs's table (a test
checks they agree), so a CUDA row can say what share of the datasheet it reached."""

from __future__ import annotations

from common.precisions import Precision

# name (driver's, lower case, without "nvidia ") -> fp64, fp32, tf32, fp16/bf16, fp16 acc16
DATASHEET_TFLOPS = {}
for _names, _peaks in [
    (["h200"], (67.0, 67.0, 494.5, 989.5, None)),
    (["h100 80gb hbm3", "h100 sxm5 80gb"], (67.0, 67.0, 494.5, 989.5, None)),
    (["h100 pcie"], (51.0, 51.0, 378.0, 756.5, None)),
    (
        ["a100-sxm4-80gb", "a100-sxm4-40gb", "a100 80gb pcie", "a100-pcie-40gb"],
        (19.5, 19.5, 156.0, 312.0, None),
    ),
    (["l40s"], (None, 91.6, 183.0, 362.0, None)),
    (["l4"], (None, 30.3, 60.0, 121.0, None)),
    (["geforce rtx 4090"], (None, 82.6, 82.6, 165.2, 330.3)),
]:
    for _name in _names:
        DATASHEET_TFLOPS[_name] = _peaks


def datasheet_tflops(gpu_name: str, p: Precision) -> float | None:
    name = gpu_name.strip().lower()
    name = name.removeprefix("nvidia ")
    if name not in DATASHEET_TFLOPS:
        return None
    fp64, fp32, tf32, half, half_acc16 = DATASHEET_TFLOPS[name]
    return {
        "fp64": fp64,
        "fp32": fp32,
        "tf32": tf32,
        "fp16-reduced": half_acc16 if half_acc16 is not None else half,
    }.get(p.name, half)
