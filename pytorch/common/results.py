"""The result file: schema 2.0's envelope around an experiment's body, JSON without
non-finite numbers, and the output policy of src/export/output.rs (the target checked before
a long run, then written atomically)."""

from __future__ import annotations

import datetime
import errno
import json
import math
import os
import shlex
import stat
import sys
import tempfile
from pathlib import Path

from common.errors import Failure

SCHEMA_VERSION = "2.0"


def envelope(
    experiment: str,
    command: str,
    environment: dict,
    device: dict,
    body: dict,
    version: str = SCHEMA_VERSION,
) -> dict:
    """One result file: the envelope's fields, then the body under the experiment's name.
    `version` is the schema version the body is written to: 2.0 for matmul and
    cpu_vs_gpu; the block's body exists from 2.2 (its Timed rows carry the 2.2 fields)."""
    return {
        "schema_version": version,
        "experiment": experiment,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        "command": command,
        "environment": environment,
        "device": device,
        experiment: body,
    }


def command_line() -> str:
    """The command, each argument shell-quoted where needed: it pastes back into bash."""
    return " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])


def json_safe(value):
    """inf and NaN as the strings "inf", "-inf", "NaN" (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def refuse_odd_target(path: Path) -> None:
    """Refuses a target that exists and is not a regular file (a folder, a link, a device...):
    a run writes its file beside it and renames it over, which would replace such a thing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise Failure(f"cannot write {path}: {e.strerror}") from e
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise Failure(f"cannot write {path}: it is {what}")


def _identity(path: Path):
    try:
        st = os.stat(path)  # after links, as a write through them would land
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def refuse_overwriting_inputs(outputs, inputs) -> None:
    """No output may be an input (src/export/output/inputs.rs's rule): each of `outputs`
    (paths; None and "-" skipped) against each (role, path) of `inputs`, by device and
    inode after links, so another name, a symbolic or a hard link is caught too. Refused
    with one line before any work."""
    ins = [(role, path, _identity(Path(path))) for role, path in inputs if path is not None]
    for out in outputs:
        if out is None or str(out) == "-":
            continue
        ident = _identity(Path(out))
        if ident is None:
            continue
        for role, path, other in ins:
            if other == ident:
                also = "" if str(path) == str(out) else f" ({path})"
                raise Failure(
                    f"cannot write {out}: it is {role}{also}, which this run reads; no run "
                    "writes over its own input"
                )


def check_writable(path: Path) -> None:
    """Fails now, before a long run, if `path` cannot be written later: an existing target
    that is not a regular file (a folder, a link, a device...) is refused; missing parent
    folders are created."""
    refuse_odd_target(path)
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as e:
        raise Failure(f"cannot write {path}: {parent}: {e.strerror or e}") from e


def check_would_write(path: Path) -> None:
    """check_writable's refusals without its side effects (it creates missing folders and
    a temporary file), for --dry-run: the same target checks, then the nearest folder that
    exists above the target must be a folder this process can write in."""
    refuse_odd_target(path)
    parent = folder = path.parent
    while True:
        try:
            st = os.stat(folder)  # a link to a folder is a folder, as mkdir sees it
            break
        except FileNotFoundError:
            folder = folder.parent
        except OSError as e:
            raise Failure(f"cannot write {path}: {parent}: {e.strerror}") from e
    if not stat.S_ISDIR(st.st_mode):
        # What mkdir(parents=True) would meet: the parent itself exists as a file, or a
        # folder above it is a file.
        code = errno.EEXIST if folder == parent else errno.ENOTDIR
        raise Failure(f"cannot write {path}: {parent}: {os.strerror(code)}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Failure(f"cannot write {path}: {parent}: {os.strerror(errno.EACCES)}")


def json_text(value) -> str:
    """The result file's text: pretty JSON, non-finite numbers as strings, a final newline."""
    return json.dumps(json_safe(value), indent=2, allow_nan=False) + "\n"


def write_json_atomic(path: Path, value) -> None:
    """Writes pretty JSON to `path` as write_bytes_atomic does."""
    write_bytes_atomic(path, json_text(value).encode())


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Writes `data` to a temporary file beside `path`, synced, then renames it over
    `path`: the target is whole or untouched, and no temporary file is left on error."""
    check_writable(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide results from others
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise Failure(f"cannot write {path}: {e.strerror or e}") from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
