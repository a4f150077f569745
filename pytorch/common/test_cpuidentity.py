"""cpuidentity.py reads /proc/cpuinfo as src/cpu_identity.rs does: the same samples give
the same identities as that module's tests (GCP c3's Sapphire Rapids, n2d's Zen 2), levels
stop at the first missing flag, and an ARM CPU or no file leaves the fields empty."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

from common import cpuidentity

SPR_FLAGS = (
    "fpu sse sse2 ht syscall nx lm pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt avx "
    "f16c lahf_lm abm bmi1 avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 "
    "amx_bf16 avx512_fp16 amx_tile amx_int8"
)
ZEN2_FLAGS = (
    "fpu sse sse2 ht syscall nx lm pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt avx "
    "f16c lahf_lm abm bmi1 avx2 bmi2 sha_ni"
)


def cpuinfo(head: str, flags: str, core_ids: list[int]) -> str:
    """One block per logical CPU, as the Rust tests' cpuinfo() builds them."""
    return "\n".join(
        f"processor\t: {n}\n{head}physical id\t: 0\nsiblings\t: {len(core_ids)}\n"
        f"core id\t\t: {core}\nfpu\t\t: yes\nflags\t\t: {flags}\nbogomips\t: 5600.00\n"
        for n, core in enumerate(core_ids)
    )


class Parse(unittest.TestCase):
    def test_an_intel_xeon_with_avx512_and_amx(self):
        head = (
            "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
            "model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\nstepping\t: 8\n"
        )
        got = cpuidentity.parse(cpuinfo(head, SPR_FLAGS, [0, 1, 0, 1]))
        self.assertEqual(
            got,
            {
                "vendor": "GenuineIntel",
                "family": 6,
                "model": 143,
                "stepping": 8,
                "model_name": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
                "isa": list(cpuidentity.ISA),
                "isa_level": "x86-64-v4",
                "physical_cores": 2,
                "logical_cpus": 4,
            },
        )

    def test_an_amd_epyc_zen2_without_avx512(self):
        head = "vendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\nstepping\t: 0\n"
        got = cpuidentity.parse(cpuinfo(head, ZEN2_FLAGS, [0, 0]))
        self.assertEqual((got["family"], got["model"]), (23, 49))
        self.assertEqual(got["isa"], ["avx2", "fma"])
        self.assertEqual(got["isa_level"], "x86-64-v3")
        self.assertEqual((got["physical_cores"], got["logical_cpus"]), (1, 2))

    def test_levels_stop_at_the_first_missing_flag(self):
        self.assertEqual(cpuidentity.isa_level({"sse", "sse2"}), "x86-64")
        v2 = set("cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3".split())
        self.assertEqual(cpuidentity.isa_level(v2), "x86-64-v2")
        # AVX-512 without AVX2's companions is still v2: levels include the ones below.
        odd = v2 | set("avx512f avx512bw avx512cd avx512dq avx512vl".split())
        self.assertEqual(cpuidentity.isa_level(odd), "x86-64-v2")

    def test_an_arm_cpu_or_nothing_leaves_fields_empty(self):
        graviton = (
            "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd aes\nCPU part\t: 0xd0c\n\n"
            "processor\t: 1\nBogoMIPS\t: 243.75\nCPU part\t: 0xd0c\n"
        )
        got = cpuidentity.parse(graviton)
        self.assertEqual((got["vendor"], got["family"], got["isa_level"]), (None, None, None))
        self.assertEqual(got["isa"], [])
        self.assertEqual((got["physical_cores"], got["logical_cpus"]), (None, 2))
        empty = cpuidentity.parse("")
        self.assertTrue(all(v in (None, []) for v in empty.values()), empty)

    def test_sysfs_topology_counts_cores_and_threads(self):
        with tempfile.TemporaryDirectory() as d:
            for cpu, core in enumerate([0, 0, 1]):
                t = Path(d) / f"cpu{cpu}" / "topology"
                t.mkdir(parents=True)
                (t / "physical_package_id").write_text("0\n")
                (t / "core_id").write_text(f"{core}\n")
            (Path(d) / "cpufreq").mkdir()  # not a CPU
            self.assertEqual(cpuidentity.sysfs_topology(Path(d)), (2, 3))
            self.assertEqual(cpuidentity.sysfs_topology(Path(d) / "none"), (None, None))


if __name__ == "__main__":
    unittest.main()
