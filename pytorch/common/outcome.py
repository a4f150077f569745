"""What a twin's run ended as, and the one place that decides its exit code and the line
that explains it, as src/outcome.rs does for the Rust programs: 0 when every row ran, 1
when the run failed (no file), 2 for a refused command line, 3 when the file was written
but some rows failed (each holds its error), and 128 + the signal for an interrupted run
(130). The codes are one table, EXIT_CODES, named as outcome.rs names its constants;
test_outcome.py reads outcome.rs and fails when the two differ, so a code changed on one
side cannot drift from the other."""

from __future__ import annotations

import signal
import sys
from typing import Callable

from common.errors import Failure, first_line

# src/outcome.rs's exit codes, by the names of its `pub const NAME: u8` (the twins check
# nothing on purpose, so outcome.rs's CHECK_FAILED, compare's, has no twin here).
EXIT_CODES = {
    "EXIT_ERROR": 1,  # the run failed before its report was written
    "EXIT_USAGE": 2,  # the command line was refused
    "EXIT_ROWS_FAILED": 3,  # the report was written, but some rows failed
}
EXIT_ERROR = EXIT_CODES["EXIT_ERROR"]
EXIT_USAGE = EXIT_CODES["EXIT_USAGE"]
EXIT_ROWS_FAILED = EXIT_CODES["EXIT_ROWS_FAILED"]


def signal_exit_code(signum: int) -> int:
    """The exit code of a process stopped by `signum` (SIGINT: 130), as outcome.rs's
    signal_exit_code and a shell report it."""
    return 128 + signum


EXIT_INTERRUPTED = signal_exit_code(signal.SIGINT)


def exit_code(failed: list[str], total: int) -> tuple[int, str | None]:
    """The code of a run that wrote its report (or had none to write), and the one line
    that explains a non-zero one: `failed` names the rows that failed of `total`."""
    if not failed:
        return 0, None
    return EXIT_ROWS_FAILED, (
        f"error: {len(failed)} of {total} rows failed ({', '.join(failed)}); "
        "the other rows and the report were kept"
    )


def finish(run: Callable[[], tuple[list[str], int]]) -> int:
    """Runs a program's work and decides its exit code: every end is one `error:` line on
    stderr, never a traceback. `run` returns the failed rows' names and the row count."""
    try:
        failed, total = run()
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # no traceback for users: one line, as the Rust programs
        print(f"error: {type(e).__name__}: {first_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    code, line = exit_code(failed, total)
    if line is not None:
        print(line, file=sys.stderr)
    return code
