"""How the PyTorch reference fails: `Failure`, a run that cannot go on, and the one-line
form of any exception, as the Rust programs print (src/error.rs)."""

from __future__ import annotations


class Failure(Exception):
    """A run that cannot go on: printed as one `error:` line, exit code 1."""


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0].rstrip()
