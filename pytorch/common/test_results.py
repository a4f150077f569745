"""Tests of results.py: non-finite numbers as strings, and the output policy (atomic write,
non-regular targets refused)."""

from __future__ import annotations

import json
import math
import os
import tempfile
import unittest
from pathlib import Path

from common import results
from common.errors import Failure


class Json(unittest.TestCase):
    def test_non_finite_floats_become_strings(self):
        v = results.json_safe({"a": [1.5, math.inf, -math.inf, math.nan], "b": {"c": math.nan}})
        self.assertEqual(json.dumps(v), '{"a": [1.5, "inf", "-inf", "NaN"], "b": {"c": "NaN"}}')


class Files(unittest.TestCase):
    def test_atomic_write_leaves_the_target_whole_or_untouched(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "a" / "out.json"
            results.write_json_atomic(path, {"x": 1})
            self.assertEqual(json.loads(path.read_text()), {"x": 1})
            with self.assertRaises(TypeError):  # not serializable: fails before writing
                results.write_json_atomic(path, {"x": object()})
            self.assertEqual(json.loads(path.read_text()), {"x": 1})
            self.assertEqual(os.listdir(path.parent), ["out.json"], "no temporary file left")

    def test_non_regular_targets_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            real = Path(d) / "real.json"
            real.write_text("keep")
            link = Path(d) / "link.json"
            link.symlink_to(real)
            for target in [Path(d), link, Path(d) / "real.json" / "below.json"]:
                with self.assertRaises(Failure, msg=str(target)):
                    results.write_json_atomic(target, {})
            self.assertEqual(real.read_text(), "keep")
            self.assertTrue(link.is_symlink())


if __name__ == "__main__":
    unittest.main()
