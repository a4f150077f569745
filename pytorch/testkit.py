"""What the PyTorch reference's tests share (not a test module itself): the paths, torch
or a skip, running the program as CI and gpu-run.sh do, and float comparison."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEMA = ROOT / "schema" / "result.schema.json"
# The modules sit beside this file; unittest discover puts this folder first on the path,
# and running a test file directly does too.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from cli import import_torch  # noqa: E402
from errors import Failure  # noqa: E402


def close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-12


def torch_or_skip():
    try:
        return import_torch()
    except Failure as e:
        if os.environ.get("CI"):  # CI makes the venv: there a missing torch is a failure
            raise
        raise unittest.SkipTest(str(e)) from e


def run_program(*args: str) -> subprocess.CompletedProcess:
    """pytorch/matmul.py in a child process, from the repository root."""
    return subprocess.run(
        [sys.executable, str(HERE / "matmul.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
