//! Device choice, in one place. `--device auto|cpu|cuda|cuda:N` becomes a Candle
//! [`Device`] plus a [`DeviceInfo`] that the reports carry. `auto` takes CUDA 0
//! when the binary was built with the `cuda` feature and a GPU answers, else the
//! CPU, and says why in one line. [`sync`] is the one place that waits for a
//! device to finish its queued work.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};
use candle_core::Device;

use crate::error::error_line;
pub use crate::schema::{DeviceInfo, DeviceKind};

/// What the user asked for with `--device`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceArg {
    Auto,
    Cpu,
    Cuda(usize),
}

impl FromStr for DeviceArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || format!("unknown device '{s}': expected one of auto, cpu, cuda, cuda:N");
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda(0)),
            other => match other.strip_prefix("cuda:") {
                Some(n) => n.parse().map(Self::Cuda).map_err(|_| invalid()),
                None => Err(invalid()),
            },
        }
    }
}

impl DeviceArg {
    /// Whether this asks for a GPU, from the flag alone: `auto` counts as one in
    /// a CUDA build. For the checks of a dry run, which opens no device.
    pub fn expects_cuda(self) -> bool {
        match self {
            Self::Cpu => false,
            Self::Cuda(_) => true,
            Self::Auto => cfg!(feature = "cuda"),
        }
    }
}

impl fmt::Display for DeviceArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl DeviceInfo {
    /// This machine's folder under `results/` (see [`machine_slug`]).
    pub fn slug(&self) -> String {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu = crate::cpu_identity::CpuIdentity::detect();
        machine_slug(self.kind, &self.name, threads, cpu.model_tag().as_deref())
    }
}

/// The folder a machine's results go to, named from its hardware so that two
/// machines never write over each other: a GPU by its name ("NVIDIA H200" ->
/// "nvidia-h200"); a CPU by its model, its generation (`cpu_tag`, family/model,
/// ISA level and the instruction sets beyond it: two VMs that both say "AMD
/// EPYC" differ there, and one with AMX hidden from one with it) and its
/// logical CPUs ("Intel(R) Xeon(R) Processor", "f6m106-v4", 2 ->
/// "intel-xeon-processor-f6m106-v4-2t"). Trademark signs are dropped and every
/// other run of non-alphanumerics becomes one '-'.
pub fn machine_slug(
    kind: DeviceKind,
    name: &str,
    cpu_threads: usize,
    cpu_tag: Option<&str>,
) -> String {
    let lower = name
        .to_ascii_lowercase()
        .replace("(r)", "")
        .replace("(tm)", "");
    let dashed: String = lower
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let slug = dashed
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    match (kind, cpu_tag) {
        (DeviceKind::Cuda, _) => slug,
        (DeviceKind::Cpu, Some(tag)) => format!("{slug}-{tag}-{cpu_threads}t"),
        (DeviceKind::Cpu, None) => format!("{slug}-{cpu_threads}t"),
    }
}

/// Opens the device the user asked for and prints one line saying which and why.
/// A GPU's memory pool is set to keep freed memory for reuse (see
/// `cuda::keep_freed_memory`), as PyTorch's caching allocator does.
pub fn select(arg: DeviceArg) -> Result<(Device, DeviceInfo)> {
    let (device, because) = open(arg)?;
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = &device {
        crate::cuda::keep_freed_memory(dev)?;
    }
    let info = describe(&device, because)?;
    crate::note!(
        "device: {} ({}): {}",
        info.label,
        info.name,
        info.chosen_because
    );
    Ok((device, info))
}

fn open(arg: DeviceArg) -> Result<(Device, String)> {
    match arg {
        DeviceArg::Cpu => Ok((Device::Cpu, "asked for with --device cpu".into())),
        DeviceArg::Cuda(n) => open_cuda(n).map(|d| (d, format!("asked for with --device {arg}"))),
        DeviceArg::Auto if !cfg!(feature = "cuda") => Ok((
            Device::Cpu,
            "auto: this binary was built without the `cuda` feature (see docs/gpu.md)".into(),
        )),
        DeviceArg::Auto => match Device::new_cuda(0) {
            Ok(d) => Ok((d, "auto: CUDA build and GPU 0 answered".into())),
            Err(e) => Ok((
                Device::Cpu,
                format!("auto: CUDA build but no GPU answered ({})", error_line(&e)),
            )),
        },
    }
}

fn open_cuda(ordinal: usize) -> Result<Device> {
    if !cfg!(feature = "cuda") {
        bail!(
            "--device cuda:{ordinal}: this binary was built without CUDA support; \
             rebuild with `cargo build --release --features cuda` (needs a CUDA toolkit, see README)"
        );
    }
    Device::new_cuda(ordinal)
        .map_err(|e| anyhow::anyhow!("--device cuda:{ordinal}: no usable GPU: {}", error_line(&e)))
}

fn describe(device: &Device, chosen_because: String) -> Result<DeviceInfo> {
    let cpu = DeviceInfo {
        kind: DeviceKind::Cpu,
        label: "cpu".into(),
        ordinal: None,
        name: crate::env::cpu_model(),
        chosen_because,
        compute_capability: None,
        sm_count: None,
        total_memory_bytes: None,
        free_memory_bytes_at_start: None,
        driver_cuda_version: None,
        memory_pool: None,
    };
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        let d = crate::cuda::describe(dev)?;
        let ordinal = match device.location() {
            candle_core::DeviceLocation::Cuda { gpu_id } => gpu_id,
            _ => 0,
        };
        return Ok(DeviceInfo {
            kind: DeviceKind::Cuda,
            label: label(device),
            ordinal: Some(ordinal),
            name: d.name,
            compute_capability: Some(d.compute_capability),
            sm_count: Some(d.sm_count),
            total_memory_bytes: Some(d.total_memory_bytes),
            free_memory_bytes_at_start: Some(d.free_memory_bytes),
            driver_cuda_version: Some(d.driver_cuda_version),
            memory_pool: Some(d.memory_pool),
            ..cpu
        });
    }
    #[cfg(not(feature = "cuda"))]
    let _ = device;
    Ok(cpu)
}

/// Candle's label for where a tensor lives: "cpu", "cuda:0".
pub fn label(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// Blocks until every operation queued on `device` has finished. On the CPU,
/// Candle's operations are synchronous and this returns at once.
pub fn sync(device: &Device) -> Result<()> {
    device.synchronize()?;
    Ok(())
}

/// The largest cache in front of a device's memory: what a working set must
/// exceed for a benchmark to measure memory rather than cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Cache {
    /// "L3 (CPU, last level)", "L2 (GPU)".
    pub name: String,
    pub bytes: u64,
}

/// The CPU's last-level cache (from sysfs) or the GPU's L2 (from the driver);
/// `None` where it cannot be read.
pub fn largest_cache(device: &Device) -> Result<Option<Cache>> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        return Ok(Some(Cache {
            name: "L2 (GPU)".into(),
            bytes: crate::cuda::l2_cache_bytes(dev)?,
        }));
    }
    let _ = device;
    Ok(
        crate::env::cpu_last_level_cache().map(|(level, bytes)| Cache {
            name: format!("L{level} (CPU, last level)"),
            bytes,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!("auto".parse(), Ok(DeviceArg::Auto));
        assert_eq!("CPU".parse(), Ok(DeviceArg::Cpu));
        assert_eq!("cuda".parse(), Ok(DeviceArg::Cuda(0)));
        assert_eq!("cuda:3".parse(), Ok(DeviceArg::Cuda(3)));
    }

    #[test]
    fn rejects_unknown_devices_listing_the_valid_ones() {
        for bad in ["tpu", "cuda:", "cuda:-1", "cuda:x", ""] {
            let err = bad.parse::<DeviceArg>().unwrap_err();
            assert!(err.contains("auto, cpu, cuda, cuda:N"), "{bad}: {err}");
        }
    }

    #[test]
    fn display_round_trips() {
        for arg in [DeviceArg::Auto, DeviceArg::Cpu, DeviceArg::Cuda(1)] {
            assert_eq!(arg.to_string().parse(), Ok(arg));
        }
    }

    #[test]
    fn slug_names_the_machine_folder() {
        let cpu = |name| machine_slug(DeviceKind::Cpu, name, 2, None);
        assert_eq!(cpu("Intel(R) Xeon(R) Processor"), "intel-xeon-processor-2t");
        assert_eq!(cpu("AMD EPYC"), "amd-epyc-2t");
        assert_eq!(
            machine_slug(
                DeviceKind::Cpu,
                "AMD EPYC 7763 64-Core Processor",
                128,
                None
            ),
            "amd-epyc-7763-64-core-processor-128t"
        );
        // Two generations that call themselves the same are two folders.
        let zen2 = machine_slug(DeviceKind::Cpu, "AMD EPYC", 2, Some("f23m49-v3"));
        let zen4 = machine_slug(DeviceKind::Cpu, "AMD EPYC", 2, Some("f25m17-v4"));
        assert_eq!(
            (zen2.as_str(), zen4.as_str()),
            ("amd-epyc-f23m49-v3-2t", "amd-epyc-f25m17-v4-2t")
        );
        let gpu = |name| machine_slug(DeviceKind::Cuda, name, 2, Some("f6m106-v4"));
        assert_eq!(gpu("NVIDIA H200"), "nvidia-h200");
        assert_eq!(
            gpu("NVIDIA GeForce RTX 4090 (D)"),
            "nvidia-geforce-rtx-4090-d"
        );
        let (_, info) = select(DeviceArg::Cpu).unwrap();
        assert!(info.slug().ends_with('t'), "{}", info.slug());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_how_to_rebuild() {
        let err = select(DeviceArg::Cuda(0)).unwrap_err().to_string();
        assert!(err.contains("--features cuda"), "{err}");
    }

    #[test]
    fn sync_on_cpu_returns() {
        sync(&Device::Cpu).unwrap();
    }
}
