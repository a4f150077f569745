//! What CPU this is, beyond its marketing name. Two cloud VMs that both call
//! themselves "AMD EPYC" with 2 threads gave fp32 4096 at 401 and at 193
//! GFLOP/s: one a Zen 4 with AVX-512, the other older or with AVX-512 hidden.
//! [`CpuIdentity`] records what tells them apart: the vendor, family, model and
//! stepping, the instruction sets the matmul kernels choose between, the x86-64
//! ISA level, and physical cores against logical CPUs (two threads of one core
//! share its vector units). [`same_generation`] says in one sentence when two
//! identities differ; [`CpuIdentity::generation_tag`] is a short name for a
//! results folder.
//!
//! Sources: `/proc/cpuinfo` (parsed by [`CpuIdentity::parse`], tested on
//! samples), with the instruction sets std can detect at run time taken from
//! `is_x86_feature_detected!` (the check the `gemm` crate makes to pick its
//! kernels), and sysfs topology where cpuinfo lacks core ids. On other
//! architectures, or where a source is missing, fields stay empty: detection
//! never fails.

use std::collections::BTreeSet;

pub use crate::schema::{same_generation, CpuIdentity};

/// The instruction sets recorded, by their `/proc/cpuinfo` names: what Candle's
/// CPU kernels (through `gemm`) and future bf16/fp16/AMX paths choose between.
const ISA: [&str; 8] = [
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
];

/// The x86-64 psABI microarchitecture levels, each requiring the previous, by
/// `/proc/cpuinfo` names: `pni` is SSE3, `abm` is LZCNT, `cx16` CMPXCHG16B.
/// OSXSAVE (in v3) has no name there; the kernel lists `avx` only with it.
const LEVELS: [(&str, &[&str]); 3] = [
    (
        "x86-64-v2",
        &[
            "cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3",
        ],
    ),
    (
        "x86-64-v3",
        &["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"],
    ),
    (
        "x86-64-v4",
        &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
    ),
];

impl CpuIdentity {
    /// This machine's CPU. Never fails: what cannot be read stays empty.
    pub fn detect() -> Self {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let mut id = Self::parse_with(&text, &runtime_isa());
        if id.physical_cores.is_none() || id.logical_cpus.is_none() {
            let (physical, logical) = sysfs_topology();
            id.physical_cores = id.physical_cores.or(physical);
            id.logical_cpus = id.logical_cpus.or(logical);
        }
        id
    }

    /// The identity `/proc/cpuinfo` text gives, its `flags` line alone deciding
    /// the instruction sets.
    pub fn parse(cpuinfo: &str) -> Self {
        Self::parse_with(cpuinfo, &[])
    }

    /// [`Self::parse`], with `runtime` (a `/proc/cpuinfo` flag name, detected)
    /// overriding the `flags` line for the sets std can detect.
    fn parse_with(cpuinfo: &str, runtime: &[(&str, bool)]) -> Self {
        let blocks: Vec<Vec<(&str, &str)>> = cpuinfo
            .split("\n\n")
            .map(|b| {
                b.lines()
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .collect::<Vec<_>>()
            })
            .filter(|b| b.iter().any(|(k, _)| *k == "processor"))
            .collect();
        let field = |block: &[(&str, &str)], key: &str| -> Option<String> {
            block
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        };
        let first = blocks.first().map_or(&[][..], |b| &b[..]);
        let number = |key: &str| field(first, key).and_then(|v| v.parse().ok());
        let flags_line = field(first, "flags");
        let mut flags: BTreeSet<&str> = flags_line
            .as_deref()
            .map_or_else(BTreeSet::new, |f| f.split_whitespace().collect());
        for &(name, detected) in runtime {
            if detected {
                flags.insert(name);
            } else {
                flags.remove(name);
            }
        }
        // Physical cores only when every CPU names its package and core.
        let cores: Option<BTreeSet<(String, String)>> = blocks
            .iter()
            .map(|b| Some((field(b, "physical id")?, field(b, "core id")?)))
            .collect();
        CpuIdentity {
            vendor: field(first, "vendor_id"),
            family: number("cpu family"),
            model: number("model"),
            stepping: number("stepping"),
            model_name: field(first, "model name"),
            isa: ISA
                .iter()
                .filter(|f| flags.contains(*f))
                .map(|f| f.to_string())
                .collect(),
            isa_level: flags_line.is_some().then(|| isa_level(&flags).to_string()),
            physical_cores: cores.map(|c| c.len()).filter(|&n| n > 0),
            logical_cpus: (!blocks.is_empty()).then_some(blocks.len()),
        }
    }
}

/// The highest psABI level every flag of which is present; "x86-64" below v2.
fn isa_level(flags: &BTreeSet<&str>) -> &'static str {
    let mut level = "x86-64";
    for (name, needs) in LEVELS {
        if !needs.iter().all(|f| flags.contains(f)) {
            break;
        }
        level = name;
    }
    level
}

/// The instruction sets std detects at run time (CPUID, and XGETBV for what the
/// OS enabled), by their `/proc/cpuinfo` names. AMX and LAHF/SAHF are not
/// detectable on stable Rust: the `flags` line decides those.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn runtime_isa() -> Vec<(&'static str, bool)> {
    macro_rules! detect {
        ($($kernel:literal = $std:tt),* $(,)?) => {
            vec![$(($kernel, std::arch::is_x86_feature_detected!($std))),*]
        };
    }
    detect!(
        "cx16" = "cmpxchg16b",
        "popcnt" = "popcnt",
        "pni" = "sse3",
        "sse4_1" = "sse4.1",
        "sse4_2" = "sse4.2",
        "ssse3" = "ssse3",
        "avx" = "avx",
        "avx2" = "avx2",
        "bmi1" = "bmi1",
        "bmi2" = "bmi2",
        "f16c" = "f16c",
        "fma" = "fma",
        "abm" = "lzcnt",
        "movbe" = "movbe",
        "avx512f" = "avx512f",
        "avx512bw" = "avx512bw",
        "avx512cd" = "avx512cd",
        "avx512dq" = "avx512dq",
        "avx512vl" = "avx512vl",
        "avx512_bf16" = "avx512bf16",
        "avx512_fp16" = "avx512fp16",
    )
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
fn runtime_isa() -> Vec<(&'static str, bool)> {
    Vec::new()
}

/// (physical cores, logical CPUs) from `/sys/devices/system/cpu/cpu*/topology`.
fn sysfs_topology() -> (Option<usize>, Option<usize>) {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return (None, None);
    };
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut cores = BTreeSet::new();
    let mut logical = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_cpu = name
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let topology = entry.path().join("topology");
        if !is_cpu || !topology.is_dir() {
            continue;
        }
        logical += 1;
        if let (Some(package), Some(core)) = (
            read(&topology.join("physical_package_id")),
            read(&topology.join("core_id")),
        ) {
            cores.insert((package, core));
        }
    }
    let some = |n: usize| (n > 0).then_some(n);
    (some(cores.len()), some(logical))
}

/// Refuses to write into `folder` when a result file there records another
/// CPU generation than `here` (its `environment.cpu`, by [`same_generation`]),
/// so that one machine's results are never silently replaced by another's.
/// Files that record no identity (older ones) are not judged; what
/// cannot be read as a result file is left to the readers.
pub fn check_folder(folder: &std::path::Path, here: &CpuIdentity) -> anyhow::Result<()> {
    /// Larger files are not result files this suite wrote.
    const MAX_BYTES: u64 = 64 << 20;
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        let small = entry.metadata().is_ok_and(|m| m.len() <= MAX_BYTES);
        if !(regular && small && path.extension().is_some_and(|e| e == "json")) {
            continue;
        }
        let theirs = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| {
                serde_json::from_value::<CpuIdentity>(v["environment"]["cpu"].clone()).ok()
            });
        if let Some(theirs) = theirs {
            if let Err(why) = same_generation(&theirs, here) {
                anyhow::bail!(
                    "{} holds results of another CPU ({why}): they are not replaced; \
                     write this machine's elsewhere (--results-dir DIR or --output FILE)",
                    crate::quote::shell_quote(folder.as_os_str())
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two logical CPUs of one block each, `core ids` naming their cores.
    fn cpuinfo(head: &str, flags: &str, core_ids: &[u32]) -> String {
        core_ids
            .iter()
            .enumerate()
            .map(|(n, core)| {
                format!(
                    "processor\t: {n}\n{head}physical id\t: 0\nsiblings\t: {}\ncore id\t\t: {core}\n\
                     fpu\t\t: yes\nflags\t\t: {flags}\nbogomips\t: 5600.00\npower management:\n",
                    core_ids.len()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// GCP c3: Sapphire Rapids, 2 cores with 2 threads each.
    fn xeon_spr() -> String {
        cpuinfo(
            "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n\
             model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\nstepping\t: 8\n\
             microcode\t: 0xffffffff\ncpu MHz\t\t: 2699.998\ncache size\t: 107520 KB\n",
            "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 \
             ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid \
             tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx \
             f16c rdrand hypervisor lahf_lm abm 3dnowprefetch ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase \
             tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm avx512f avx512dq rdseed adx smap avx512ifma \
             clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni \
             avx512_bf16 arat avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni \
             avx512_bitalg avx512_vpopcntdq la57 rdpid cldemote movdiri movdir64b fsrm md_clear serialize \
             tsxldtrk amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities",
            &[0, 1, 0, 1],
        )
    }

    /// GCP n2d: Zen 2 (Rome), one core's two threads.
    fn epyc_zen2() -> String {
        cpuinfo(
            "vendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n\
             model name\t: AMD EPYC 7B12\nstepping\t: 0\nmicrocode\t: 0x1000065\ncpu MHz\t\t: 2249.998\n",
            "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 \
             ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid \
             extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx \
             f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw \
             topoext ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 rdseed adx smap \
             clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 clzero xsaveerptr arat npt nrip_save umip rdpid",
            &[0, 0],
        )
    }

    /// GCP c3d: Zen 4 (Genoa), one core's two threads.
    fn epyc_zen4() -> String {
        cpuinfo(
            "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
             model name\t: AMD EPYC 9B14\nstepping\t: 1\nmicrocode\t: 0xa10113e\ncpu MHz\t\t: 2599.998\n",
            "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 \
             ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid \
             extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes \
             xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse \
             3dnowprefetch osvw topoext ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 \
             erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni \
             avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx512_bf16 clzero xsaveerptr wbnoinvd arat npt \
             nrip_save umip pku ospke avx512vbmi avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg \
             avx512_vpopcntdq rdpid fsrm",
            &[0, 0],
        )
    }

    #[test]
    fn an_intel_xeon_with_avx512_and_amx() {
        let id = CpuIdentity::parse(&xeon_spr());
        assert_eq!(id.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!(
            (id.family, id.model, id.stepping),
            (Some(6), Some(143), Some(8))
        );
        assert_eq!(
            id.model_name.as_deref(),
            Some("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz")
        );
        assert_eq!(id.isa, ISA.map(String::from));
        assert_eq!(id.isa_level.as_deref(), Some("x86-64-v4"));
        assert_eq!((id.physical_cores, id.logical_cpus), (Some(2), Some(4)));
        assert_eq!(id.generation_tag(), "intel-f6m143-v4-bf16-fp16-amx");
    }

    #[test]
    fn an_amd_epyc_zen2_without_avx512() {
        let id = CpuIdentity::parse(&epyc_zen2());
        assert_eq!(id.vendor.as_deref(), Some("AuthenticAMD"));
        assert_eq!(
            (id.family, id.model, id.stepping),
            (Some(23), Some(49), Some(0))
        );
        assert_eq!(id.isa, ["avx2", "fma"]);
        assert_eq!(id.isa_level.as_deref(), Some("x86-64-v3"));
        assert_eq!((id.physical_cores, id.logical_cpus), (Some(1), Some(2)));
        assert_eq!(id.generation_tag(), "amd-f23m49-v3");
    }

    #[test]
    fn an_amd_epyc_zen4_with_avx512_bf16() {
        let id = CpuIdentity::parse(&epyc_zen4());
        assert_eq!(
            (id.family, id.model, id.stepping),
            (Some(25), Some(17), Some(1))
        );
        assert_eq!(id.isa, ["avx2", "fma", "avx512f", "avx512_bf16"]);
        assert_eq!(id.isa_level.as_deref(), Some("x86-64-v4"));
        assert_eq!(id.generation_tag(), "amd-f25m17-v4-bf16");
    }

    #[test]
    fn levels_stop_at_the_first_missing_flag() {
        let flags = |s: &'static str| s.split_whitespace().collect::<BTreeSet<_>>();
        assert_eq!(isa_level(&flags("sse sse2")), "x86-64");
        let v2 = "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3";
        assert_eq!(isa_level(&flags(v2)), "x86-64-v2");
        // AVX-512 without AVX2's companions is still v2: levels include the ones below.
        let odd = "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3 avx512f avx512bw avx512cd avx512dq avx512vl";
        assert_eq!(isa_level(&flags(odd)), "x86-64-v2");
    }

    #[test]
    fn the_runtime_check_overrides_the_flags_line() {
        // A hypervisor that lists AVX-512 the OS did not enable: std's check wins.
        let id =
            CpuIdentity::parse_with(&epyc_zen4(), &[("avx512f", false), ("avx512_fp16", true)]);
        assert_eq!(id.isa, ["avx2", "fma", "avx512_bf16", "avx512_fp16"]);
        assert_eq!(id.isa_level.as_deref(), Some("x86-64-v3"));
    }

    #[test]
    fn an_arm_cpu_or_nothing_leaves_fields_empty() {
        let graviton = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32\n\
                        CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n\
                        CPU revision\t: 1\n\nprocessor\t: 1\nBogoMIPS\t: 243.75\nCPU part\t: 0xd0c\n";
        let id = CpuIdentity::parse(graviton);
        assert_eq!(
            (id.vendor.clone(), id.family, id.isa_level.clone()),
            (None, None, None)
        );
        assert!(id.isa.is_empty());
        assert_eq!((id.physical_cores, id.logical_cpus), (None, Some(2)));
        let none = CpuIdentity::parse("");
        assert_eq!((none.logical_cpus, none.model_name.clone()), (None, None));
        assert_eq!(none.generation_tag(), std::env::consts::ARCH);
    }

    #[test]
    fn different_generations_are_named_in_one_sentence() {
        let (zen2, zen4) = (
            CpuIdentity::parse(&epyc_zen2()),
            CpuIdentity::parse(&epyc_zen4()),
        );
        assert_eq!(
            same_generation(&zen2, &zen4),
            Err("different CPU generations: family 23 model 49 (AMD EPYC 7B12) against family 25 model 17 (AMD EPYC 9B14)".into())
        );
        let xeon = CpuIdentity::parse(&xeon_spr());
        assert_eq!(
            same_generation(&xeon, &zen4),
            Err("different CPU vendors: GenuineIntel (Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz) against AuthenticAMD (AMD EPYC 9B14)".into())
        );
        // The same Zen 4 with AVX-512 hidden by the hypervisor.
        let hidden = CpuIdentity::parse_with(&epyc_zen4(), &[("avx512f", false)]);
        assert_eq!(
            same_generation(&zen4, &hidden),
            Err(
                "different ISA levels: x86-64-v4 (AMD EPYC 9B14) against x86-64-v3 (AMD EPYC 9B14)"
                    .into()
            )
        );
        // The same level with AMX hidden.
        let mut no_amx = xeon.clone();
        no_amx.isa.retain(|f| !f.starts_with("amx"));
        let err = same_generation(&xeon, &no_amx).unwrap_err();
        assert_eq!(
            err,
            "different instruction sets: amx_tile, amx_bf16, amx_int8 only on the first \
             (Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz)"
        );
        assert!(!err.contains('\n'));
    }

    /// Two CPUs the folder check tells apart get two folders: otherwise the
    /// second could not write its results at all (an Emerald Rapids VM with
    /// AMX hidden was refused the folder of one with it).
    #[test]
    fn cpus_told_apart_have_different_tags() {
        let xeon = CpuIdentity::parse(&xeon_spr());
        let mut no_amx = xeon.clone();
        no_amx.isa.retain(|f| !f.starts_with("amx"));
        assert_eq!(no_amx.generation_tag(), "intel-f6m143-v4-bf16-fp16");
        let mut some_amx = xeon.clone();
        some_amx.isa.retain(|f| f != "amx_int8");
        assert_eq!(
            some_amx.generation_tag(),
            "intel-f6m143-v4-bf16-fp16-amx-tile-amx-bf16"
        );
        let zen4 = CpuIdentity::parse(&epyc_zen4());
        let mut no_bf16 = zen4.clone();
        no_bf16.isa.retain(|f| f != "avx512_bf16");
        let hidden = CpuIdentity::parse_with(&epyc_zen4(), &[("avx512f", false)]);
        let cpus = [xeon, no_amx, some_amx, zen4, no_bf16, hidden];
        for a in &cpus {
            for b in &cpus {
                let apart = same_generation(a, b).is_err();
                let tags = (a.generation_tag(), b.generation_tag());
                assert_eq!(apart, tags.0 != tags.1, "{tags:?}");
            }
        }
    }

    #[test]
    fn the_same_generation_and_unknowns_pass() {
        let zen4 = CpuIdentity::parse(&epyc_zen4());
        let mut other_host = zen4.clone();
        other_host.stepping = Some(2);
        other_host.logical_cpus = Some(8);
        assert_eq!(same_generation(&zen4, &other_host), Ok(()));
        assert_eq!(same_generation(&zen4, &CpuIdentity::parse("")), Ok(()));
    }

    #[test]
    fn tags_are_safe_in_a_folder_name() {
        let mut id = CpuIdentity::parse(&epyc_zen2());
        id.vendor = Some("  Weird/Vendor ".into());
        id.model = None;
        assert_eq!(id.generation_tag(), "weirdvendor-f23-v3");
        id.vendor = Some("  Shanghai  ".into());
        assert!(id.generation_tag().starts_with("zhaoxin-"));
        id.vendor = Some("///".into());
        assert!(id.generation_tag().starts_with("cpu-"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machine_is_detected() {
        let id = CpuIdentity::detect();
        eprintln!("{id:?} -> {}", id.generation_tag());
        assert!(id.logical_cpus.is_some_and(|n| n >= 1));
        assert!(id
            .physical_cores
            .is_some_and(|n| n >= 1 && n <= id.logical_cpus.unwrap_or(0)));
        if cfg!(target_arch = "x86_64") {
            assert!(id.vendor.is_some() && id.family.is_some() && id.isa_level.is_some());
            // std's check and the kernel's flags agree on a machine that is what it says.
            let text = std::fs::read_to_string("/proc/cpuinfo").unwrap();
            let by_flags = CpuIdentity::parse(&text);
            assert_eq!(
                (&id.isa, &id.isa_level),
                (&by_flags.isa, &by_flags.isa_level)
            );
        }
    }

    #[test]
    fn a_folder_of_another_generation_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let zen2 = CpuIdentity::parse(&epyc_zen2());
        let zen4 = CpuIdentity::parse(&epyc_zen4());
        let file = |cpu: &CpuIdentity| serde_json::json!({"environment": {"cpu": cpu}}).to_string();
        // Empty, or files without an identity: nothing to judge.
        check_folder(dir.path(), &zen4).unwrap();
        std::fs::write(dir.path().join("old.json"), r#"{"environment": {}}"#).unwrap();
        check_folder(dir.path(), &zen4).unwrap();
        // The same generation writes on; another is refused, in one line saying why.
        std::fs::write(dir.path().join("matmul.json"), file(&zen4)).unwrap();
        check_folder(dir.path(), &zen4).unwrap();
        let err = check_folder(dir.path(), &zen2).unwrap_err().to_string();
        assert!(
            err.contains("holds results of another CPU (different CPU generations: family 25"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }
}
