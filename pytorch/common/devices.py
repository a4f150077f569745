"""`--device` and the device a run uses, as src/device.rs: the flag's canonical form, then
the torch.device chosen (and why) with the result's `device` object."""

from __future__ import annotations

import argparse
import os
import sys

from common.environment import cpu_model, driver_cuda_version
from common.errors import Failure


def parse_device(text: str) -> str:
    """`--device`: auto, cpu, cuda (GPU 0) or cuda:N, as src/device.rs; the canonical form."""
    s = text.strip().lower()
    if s in ("auto", "cpu"):
        return s
    if s in ("cuda", "gpu"):
        return "cuda:0"
    if s.startswith("cuda:") and s[5:].isdigit():
        return f"cuda:{int(s[5:])}"
    raise argparse.ArgumentTypeError(
        f"unknown device '{text}': expected one of auto, cpu, cuda, cuda:N"
    )


def check_cuda_build(torch, arg: str) -> None:
    """--device cuda:N needs a torch built with CUDA: known without opening a device."""
    if arg.startswith("cuda") and torch.version.cuda is None:
        raise Failure(f"--device {arg}: torch {torch.__version__} was built without CUDA support")


def select_device(torch, arg: str):
    """The torch.device to run on and the schema's device object; says which and why."""
    build = f"torch {torch.__version__}"
    if arg == "cpu":
        device, because = torch.device("cpu"), "asked for with --device cpu"
    elif arg == "auto":
        if torch.version.cuda is None:
            device, because = torch.device("cpu"), f"auto: {build} was built without CUDA"
        elif not torch.cuda.is_available():
            device = torch.device("cpu")
            because = (
                f"auto: CUDA build ({build}) but no GPU answered "
                "(torch.cuda.is_available() is False)"
            )
        else:
            device, because = torch.device("cuda:0"), "auto: CUDA build and GPU 0 answered"
    else:
        ordinal = int(arg.split(":")[1])
        check_cuda_build(torch, arg)
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if ordinal >= count:
            raise Failure(f"--device {arg}: no usable GPU: torch sees {count} CUDA device(s)")
        device, because = torch.device(arg), f"asked for with --device {arg}"

    info = {
        "kind": "cpu",
        "label": "cpu",
        "ordinal": None,
        "name": cpu_model(),
        "chosen_because": because,
        "compute_capability": None,
        "sm_count": None,
        "total_memory_bytes": None,
        "free_memory_bytes_at_start": None,
        "driver_cuda_version": None,
        "memory_pool": None,
    }
    if device.type == "cuda":
        torch.cuda.set_device(device)  # events and the default stream follow it
        props = torch.cuda.get_device_properties(device)
        free, _total = torch.cuda.mem_get_info(device)
        info |= {
            "kind": "cuda",
            "label": f"cuda:{device.index}",
            "ordinal": device.index,
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
            "total_memory_bytes": props.total_memory,
            "free_memory_bytes_at_start": free,
            "driver_cuda_version": driver_cuda_version(),
            # The caching allocator keeps freed blocks for reuse unless turned off.
            "memory_pool": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") != "1",
        }
    print(f"device: {info['label']} ({info['name']}): {because}", file=sys.stderr)
    return device, info
