//! A CPU's identity as a result file records it, beyond its marketing name:
//! vendor, family, model, the instruction sets the matmul kernels choose
//! between, the x86-64 ISA level, physical cores against logical CPUs. Plain
//! data with the pure comparisons made on it; `crate::cpu_identity` reads it
//! from the machine.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A CPU's identity; a field is null (or empty) where the machine does not say.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuIdentity {
    /// `vendor_id`: "GenuineIntel", "AuthenticAMD".
    pub vendor: Option<String>,
    /// `cpu family`: 6 for Intel's current cores; AMD 23 (Zen 1/2), 25 (Zen 3/4), 26 (Zen 5).
    pub family: Option<u32>,
    /// `model`, in decimal as `/proc/cpuinfo` writes it.
    pub model: Option<u32>,
    pub stepping: Option<u32>,
    pub model_name: Option<String>,
    /// Of "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile",
    /// "amx_bf16", "amx_int8": those this CPU (and OS) offers.
    pub isa: Vec<String>,
    /// "x86-64", "x86-64-v2", "x86-64-v3" (AVX2, FMA, BMI...) or "x86-64-v4"
    /// (AVX-512 F/BW/CD/DQ/VL); null off x86 or without a `flags` line.
    pub isa_level: Option<String>,
    /// Distinct (package, core) pairs: on a VM, the cores the hypervisor shows.
    pub physical_cores: Option<usize>,
    /// Logical CPUs (hardware threads) the OS has online.
    pub logical_cpus: Option<usize>,
}

impl CpuIdentity {
    /// A short name for a folder: vendor, family and model, ISA level and the
    /// instruction sets beyond it, such as "amd-f25m17-v4-bf16" or
    /// "intel-f6m143-v4-bf16-fp16-amx"; the parts not known are left out,
    /// and a CPU of which nothing is known is named by its architecture.
    pub fn generation_tag(&self) -> String {
        let mut parts = Vec::new();
        if let Some(v) = &self.vendor {
            parts.push(short_vendor(v));
        }
        match (self.family, self.model) {
            (Some(f), Some(m)) => parts.push(format!("f{f}m{m}")),
            (Some(f), None) => parts.push(format!("f{f}")),
            _ => {}
        }
        if let Some(level) = &self.isa_level {
            parts.push(match level.strip_prefix("x86-64-") {
                Some(v) => v.to_string(),
                None => "v1".into(),
            });
            parts.extend(self.isa_beyond(level));
        }
        if parts.is_empty() {
            return std::env::consts::ARCH.into();
        }
        parts.join("-")
    }

    /// The recorded instruction sets that `level` does not imply, in a
    /// folder name's short words ("bf16", "fp16", "amx"): a hypervisor may
    /// hide AMX or AVX512-BF16 on the same model at the same level, and
    /// [`same_generation`] tells such CPUs apart, so their folders must differ
    /// too, or one could not write its results at all.
    fn isa_beyond(&self, level: &str) -> Vec<String> {
        let implied: &[&str] = match level {
            "x86-64-v4" => &["avx2", "fma", "avx512f"],
            "x86-64-v3" => &["avx2", "fma"],
            _ => &[],
        };
        let beyond: Vec<&str> = self
            .isa
            .iter()
            .map(String::as_str)
            .filter(|f| !implied.contains(f))
            .collect();
        let amx = ["amx_tile", "amx_bf16", "amx_int8"];
        let all_amx = amx.iter().all(|a| beyond.contains(a));
        beyond
            .into_iter()
            .filter(|f| !(all_amx && amx.contains(f)))
            .map(|f| f.strip_prefix("avx512_").unwrap_or(f).replace('_', "-"))
            .chain(all_amx.then(|| "amx".to_string()))
            .collect()
    }

    /// The generation in a folder name's few characters: family and model, the
    /// ISA level and what is beyond it ("f25m17-v4-bf16"), or what of them is known; `None` when
    /// nothing is (an old file, another architecture).
    pub fn model_tag(&self) -> Option<String> {
        let tag = self.generation_tag();
        let rest = match &self.vendor {
            Some(_) => tag.split_once('-').map(|(_, rest)| rest.to_string()),
            None => Some(tag),
        }?;
        (!rest.is_empty() && rest != std::env::consts::ARCH).then_some(rest)
    }

    /// The model name, else the vendor with family and model, for messages.
    fn describe(&self) -> String {
        if let Some(name) = &self.model_name {
            return name.clone();
        }
        let number = |n: Option<u32>| n.map_or("?".into(), |n| n.to_string());
        format!(
            "{} family {} model {}",
            self.vendor.as_deref().unwrap_or("unknown CPU"),
            number(self.family),
            number(self.model)
        )
    }
}

/// "GenuineIntel" -> "intel", for folder names: lowercase letters and digits only.
fn short_vendor(vendor: &str) -> String {
    match vendor {
        "GenuineIntel" => "intel".into(),
        "AuthenticAMD" => "amd".into(),
        "HygonGenuine" => "hygon".into(),
        "CentaurHauls" | "  Shanghai  " => "zhaoxin".into(),
        other => {
            let s: String = other
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .map(|c| c.to_ascii_lowercase())
                .collect();
            if s.is_empty() {
                "cpu".into()
            } else {
                s
            }
        }
    }
}

/// `Ok` when `a` and `b` are the same CPU generation as far as both say, else
/// one sentence naming the first difference: vendor, family/model, ISA level,
/// then the recorded instruction sets (a hypervisor may hide AVX-512 or AMX on
/// the same model). Only fields both sides know are compared: what an unknown
/// identity means is the caller's choice.
pub fn same_generation(a: &CpuIdentity, b: &CpuIdentity) -> Result<(), String> {
    let (da, db) = (a.describe(), b.describe());
    if let (Some(va), Some(vb)) = (&a.vendor, &b.vendor) {
        if va != vb {
            return Err(format!(
                "different CPU vendors: {va} ({da}) against {vb} ({db})"
            ));
        }
    }
    if let (Some((fa, ma)), Some((fb, mb))) = (a.family.zip(a.model), b.family.zip(b.model)) {
        if (fa, ma) != (fb, mb) {
            return Err(format!(
                "different CPU generations: family {fa} model {ma} ({da}) against family {fb} model {mb} ({db})"
            ));
        }
    }
    if let (Some(la), Some(lb)) = (&a.isa_level, &b.isa_level) {
        if la != lb {
            return Err(format!(
                "different ISA levels: {la} ({da}) against {lb} ({db})"
            ));
        }
    }
    if a.isa_level.is_some() && b.isa_level.is_some() && a.isa != b.isa {
        let only = |x: &CpuIdentity, y: &CpuIdentity| -> Vec<String> {
            x.isa
                .iter()
                .filter(|f| !y.isa.contains(f))
                .cloned()
                .collect()
        };
        let (oa, ob) = (only(a, b), only(b, a));
        let side = |fs: &[String], name: &str, d: &str| {
            (!fs.is_empty()).then(|| format!("{} only on {name} ({d})", fs.join(", ")))
        };
        let said: Vec<String> = [side(&oa, "the first", &da), side(&ob, "the second", &db)]
            .into_iter()
            .flatten()
            .collect();
        return Err(format!("different instruction sets: {}", said.join("; ")));
    }
    Ok(())
}
