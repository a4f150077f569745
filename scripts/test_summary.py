"""Tests of scripts/summary.py (the one-call GPU run's summary.md) on real result files:
a committed block run (tests/fixtures/intel-xeon-2t/block.json, a copy of that machine's
results/ file) must fill the block rows' figures, and a row refused by cuBLAS as
unsupported is shown and counted as neither failed nor measured. Standard library only,
as summary.py; run by scripts/test-gpu-run.sh cpu (`just gpu-run-cpu`):

    python3 -m unittest discover -s scripts -p 'test_*.py'
"""
import contextlib
import io
import json
import shutil
import tempfile
import unittest
from pathlib import Path

import summary

ROOT = Path(__file__).resolve().parent.parent
BLOCK = ROOT / "tests/fixtures/intel-xeon-2t/block.json"


def table_rows(md, first_cell):
    """The cells of summary.md's benchmark rows whose first cell is `first_cell`."""
    return [[c.strip() for c in line.strip("|").split(" | ")]
            for line in md.splitlines() if line.startswith(f"| {first_cell} |")]


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.work = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.work)
        (self.work / "BUNDLE").write_text("kind=cpu\nprofile=dev\n")
        (self.work / "steps.tsv").write_text(
            "step\texit\tseconds\tnote\tcommand\nblock\t0\t1.0\t\texperiments/block\n")

    def summary(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            summary.main(self.work, "12")
        return out.getvalue()

    def test_block_rows_show_their_figures(self):
        shutil.copy(BLOCK, self.work / "block.json")
        md = self.summary()
        rows = table_rows(md, "block.json")
        file = json.loads(BLOCK.read_text())["block"]
        want = [(phase["phase"], row) for phase in file["phases"] for row in phase["rows"]]
        self.assertEqual(len(rows), len(want), md)
        for cells, (phase, row) in zip(rows, want):
            m = row["measured"]
            self.assertEqual(cells[1], f"block.phases.{phase}.rows", cells)
            self.assertEqual(cells[2], row["precision"])
            self.assertEqual(cells[3], f"{m['end_to_end']['median_ms']:.3f}", cells)
            self.assertEqual(cells[4], f"{m['gflop_per_s']:.1f}", cells)
            self.assertEqual(cells[5], f"{m['peak_bytes'] / 2**20:.1f}", cells)
            self.assertEqual(cells[6], "ok")
        self.assertIn(summary.BLOCK_PEAK_NOTE, md)
        self.assertNotIn(summary.PEAK_NOTE, md, "no matmul rows: no matmul peak note")

    def test_an_unsupported_row_is_neither_failed_nor_measured(self):
        reason = "CublasError(CUBLAS_STATUS_NOT_SUPPORTED)"
        rows = [
            {"precision": "fp32", "status": "ok", "error": None,
             "median_ms": 1.25, "gflops": 880.0, "peak_mib": 768.0},
            {"precision": "fp16", "status": "error", "error": "CUDA_ERROR_OUT_OF_MEMORY"},
            {"precision": "bf16-reduced", "status": "unsupported", "error": reason},
        ]
        (self.work / "matmul.json").write_text(json.dumps({"matmul": {"precisions": rows}}))
        md = self.summary()
        self.assertIn("1 measured, 1 failed, 1 unsupported", md)
        shown = {cells[2]: cells for cells in table_rows(md, "matmul.json")}
        self.assertEqual(shown["fp32"][3:], ["1.250", "880.0", "768.0", "ok"])
        self.assertEqual(shown["fp16"][3:], ["-", "-", "-", "error: CUDA_ERROR_OUT_OF_MEMORY"])
        self.assertEqual(shown["bf16-reduced"][3:], ["-", "-", "-", f"unsupported: {reason}"])
        # The run's verdict is the steps': a program whose only unmeasured row is
        # unsupported exits 0, and the summary says every step passed.
        self.assertIn("every step passed", md)

    def test_a_report_saved_partway_is_named(self):
        note = "partial: 2 of 5 rows, saved as they finished; the run had not ended"
        body = {"generate": {"rows": [], "notes": [note, "another note"]}}
        (self.work / "generate.json").write_text(json.dumps(body))
        md = self.summary()
        self.assertIn(f"Saved partway, the rows finished before the run stopped: generate.json ({note})", md)
        self.assertNotIn("another note", md)

    def test_a_rehearsals_host_side_times_are_shown(self):
        (self.work / "host-side.tsv").write_text(
            "generate\t0.4\t1\terror: CUDA_ERROR_STUB_LIBRARY\nbasics\t0.1\t1\terror: x | y\n")
        md = self.summary()
        self.assertIn("## Host side: each step on this CPU before its first device call", md)
        self.assertIn("| generate | 0.4 | 1 | error: CUDA_ERROR_STUB_LIBRARY |", md)
        self.assertIn("| basics | 0.1 | 1 | error: x \\| y |", md)


if __name__ == "__main__":
    unittest.main()
