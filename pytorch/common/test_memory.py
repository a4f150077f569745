"""Tests of memory.py: the host policy of src/bench/square/mod.rs (refuse what cannot fit, note what
is short now) on hand-made numbers, the trial reservation, --skip-host-memory-check, and the
bytes a run holds at once (a precision's matrices beside fp32's, as Rust's need counts)."""

from __future__ import annotations

import unittest

from common import memory
from common.errors import Failure
from common.precisions import PRECISIONS
from common.testkit import run_program, torch_or_skip

GIB = 1 << 30
HUGE = 200_000  # as the Rust test: 1 TiB and more on the CPU


class HostPolicy(unittest.TestCase):
    mem = memory.HostMemory(total_bytes=16 * GIB, swap_bytes=4 * GIB, available_bytes=8 * GIB)

    def test_what_fits_now_passes_silently(self):
        self.assertIsNone(memory.host_verdict(1024, 4 * GIB, self.mem, True))
        self.assertIsNone(memory.host_verdict(1024, 4 * GIB, None, True), "no meminfo")

    def test_less_available_than_needed_is_a_note(self):
        note = memory.host_verdict(40_000, 12 * GIB, self.mem, True)
        self.assertIn("--size 40000 needs 12884901888 (12.0 GiB) of host memory", note)
        self.assertIn("8589934592 (8.0 GiB) is available now; trying anyway", note)
        # Up to memory and swap together.
        self.assertIsNotNone(memory.host_verdict(40_000, 20 * GIB, self.mem, True))

    def test_beyond_memory_and_swap_is_refused(self):
        with self.assertRaises(Failure) as e:
            memory.host_verdict(60_000, 20 * GIB + 1, self.mem, True)
        self.assertIn("more than this machine's 21474836480 (20.0 GiB)", str(e.exception))
        self.assertIn("--skip-host-memory-check", str(e.exception))

    def test_a_refused_reservation_is_refused(self):
        with self.assertRaises(Failure) as e:
            memory.host_verdict(1024, GIB, self.mem, False)
        self.assertIn("refused to reserve it", str(e.exception))

    def test_a_need_named_by_what_asks_for_it_follows_the_same_policy(self):
        # src/memory/fits.rs's wording, as the block's check uses it.
        what = "the block of w.safetensors (hidden 64, mlp 96, seq 12, batch 1)"
        self.assertIsNone(memory.need_verdict(what, 4 * GIB, self.mem, True))
        note = memory.need_verdict(what, 12 * GIB, self.mem, True)
        self.assertTrue(note.startswith(f"{what} needs 12884901888 (12.0 GiB) of host memory"))
        self.assertTrue(note.endswith("is available now; trying anyway"), note)
        with self.assertRaises(Failure) as e:
            memory.need_verdict(what, 20 * GIB + 1, self.mem, True)
        self.assertIn(f"{what}: needs", str(e.exception))
        self.assertIn("(8589934592 (8.0 GiB) available now)", str(e.exception))
        with self.assertRaises(Failure) as e:
            memory.need_verdict(what, GIB, None, False)
        self.assertIn("refused to reserve it", str(e.exception))
        # On the CPU the device's bytes are host bytes: 2^62 of them cannot be reserved.
        torch = torch_or_skip()
        cpu = torch.device("cpu")
        with self.assertRaises(Failure):
            memory.check_need(torch, cpu, what, 0, 1 << 62, check_host=True)
        memory.check_need(torch, cpu, what, 0, 1 << 62, check_host=False)

    def test_meminfo_is_parsed(self):
        text = "MemTotal:  1000 kB\nMemFree: 5 kB\nMemAvailable: 600 kB\nSwapTotal: 0 kB\n"
        self.assertEqual(memory.parse_meminfo(text), memory.HostMemory(1024000, 0, 614400))
        self.assertIsNone(memory.parse_meminfo("MemTotal: 1000 kB\n"))
        mem = memory.host_memory()
        if mem is not None:  # Linux
            self.assertGreaterEqual(mem.total_bytes, mem.available_bytes)

    def test_the_trial_reservation_touches_nothing_and_fails_beyond_the_address_space(self):
        self.assertTrue(memory.try_reserve_host(64 << 20))
        self.assertFalse(memory.try_reserve_host(1 << 62))


class AtOnce(unittest.TestCase):
    def test_the_pass_beside_fp32_holds_both_matrices(self):
        # src/bench/square/mod.rs beside_fp32's check of need().
        fp32, fp16, bf16 = (PRECISIONS[p] for p in ["fp32", "fp16", "bf16"])
        for on_cpu in [True, False]:
            f16, f32 = memory.device_bytes(on_cpu, fp16, 64), memory.device_bytes(on_cpu, fp32, 64)
            bf = memory.device_bytes(on_cpu, bf16, 64)
            both = memory.at_once_bytes(on_cpu, 64, [fp32, fp16, bf16])
            self.assertEqual(both, max(f16, bf) + f32)
            self.assertEqual(memory.at_once_bytes(on_cpu, 64, [fp16]), f16, "no fp32: no pass")
            self.assertEqual(memory.at_once_bytes(on_cpu, 64, [fp32]), f32)
        # On the CPU the host holds what the device does.
        inputs, pair = 2 * 64 * 64 * 4 + 64 * 64 * 8, [fp32, fp16]
        self.assertEqual(
            memory.host_bytes(True, 64, pair), inputs + memory.at_once_bytes(True, 64, pair)
        )
        self.assertEqual(memory.host_bytes(False, 64, pair), inputs)


class Skip(unittest.TestCase):
    def test_a_size_beyond_memory_is_refused_unless_the_check_is_skipped(self):
        torch = torch_or_skip()
        cpu = torch.device("cpu")
        fp32 = [PRECISIONS["fp32"]]
        mem = memory.host_memory()
        if mem is not None and memory.host_bytes(True, HUGE, fp32) <= mem.total_bytes:
            self.skipTest("this machine holds 1 TiB")
        with self.assertRaises(Failure) as e:
            memory.check_fits(torch, cpu, HUGE, fp32, check_host=True)
        self.assertIn(f"--size {HUGE}", str(e.exception))
        self.assertIn("host memory", str(e.exception))
        # Skipped on request (nothing is allocated by the check itself).
        memory.check_fits(torch, cpu, HUGE, fp32, check_host=False)

    def test_the_program_refuses_it_before_allocating(self):
        torch_or_skip()
        for experiment in ["matmul", "cpu_vs_gpu"]:
            r = run_program("--experiment", experiment, "--device", "cpu", "--size", str(HUGE))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertRegex(r.stderr.strip().splitlines()[-1], rf"^error: --size {HUGE}: .*host")
            self.assertNotIn("inputs:", r.stderr, "refused before the inputs were made")


if __name__ == "__main__":
    unittest.main()
