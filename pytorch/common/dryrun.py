"""What every twin's --dry-run shares: the device a run would use, said without opening it."""

from __future__ import annotations

from common.devices import check_cuda_build

def device_plan(torch, arg: str) -> tuple[bool | None, str]:
    """Whether the run will be on a GPU (None: not known before it starts), and the line
    that says which device and why, as select_device would but without asking the driver."""
    check_cuda_build(torch, arg)
    if arg == "cpu":
        return False, "cpu (asked for with --device cpu)"
    if arg != "auto":
        return True, f"{arg} (asked for with --device {arg}; not opened in a dry run)"
    if torch.version.cuda is None:
        return False, f"cpu (auto: torch {torch.__version__} was built without CUDA)"
    return None, "auto (GPU 0 if one answers when the run starts, else the CPU)"
