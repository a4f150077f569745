//! Datasheet peak throughput of common NVIDIA GPUs, dense (no 2:4 sparsity), in
//! TFLOP/s, so a measured GFLOP/s can be read as a share of what the chip
//! promises. Sources: NVIDIA's product datasheets, "H200 Tensor Core GPU"
//! (2024), "H100 Tensor Core GPU" (2023), "A100 Tensor Core GPU" (2021),
//! "L40S GPU" (2023), "L4 Tensor Core GPU" (2023), and the "Ada Lovelace GPU
//! Architecture" whitepaper v2.02 (RTX 4090). Datasheets list tensor-core
//! figures with sparsity; the dense figure is half of that. Memory bandwidth
//! ([`datasheet_memory_gb_per_s`]) comes from the same datasheets. A GPU not
//! listed gets no percentage rather than a guess.

use crate::precision::Precision;

/// Peaks for one GPU: `names` are the driver's device names, lower case,
/// without the "nvidia " prefix.
struct Peaks {
    names: &'static [&'static str],
    /// FP64 (tensor cores where the chip has them: cuBLAS DGEMM uses them).
    fp64: Option<f64>,
    /// FP32 on CUDA cores: what a plain f32 GEMM runs on.
    fp32: f64,
    /// TF32 tensor cores: f32 GEMM with reduced-precision math allowed.
    tf32: f64,
    /// FP16 and BF16 tensor cores, FP32 accumulation.
    fp16_bf16: f64,
    /// FP16 tensor cores with FP16 accumulation, where it differs (GeForce).
    fp16_acc16: Option<f64>,
}

const TABLE: [Peaks; 7] = [
    Peaks {
        names: &["h200"],
        fp64: Some(67.0),
        fp32: 67.0,
        tf32: 494.5,
        fp16_bf16: 989.5,
        fp16_acc16: None,
    },
    Peaks {
        names: &["h100 80gb hbm3", "h100 sxm5 80gb"],
        fp64: Some(67.0),
        fp32: 67.0,
        tf32: 494.5,
        fp16_bf16: 989.5,
        fp16_acc16: None,
    },
    Peaks {
        names: &["h100 pcie"],
        fp64: Some(51.0),
        fp32: 51.0,
        tf32: 378.0,
        fp16_bf16: 756.5,
        fp16_acc16: None,
    },
    Peaks {
        names: &[
            "a100-sxm4-80gb",
            "a100-sxm4-40gb",
            "a100 80gb pcie",
            "a100-pcie-40gb",
        ],
        fp64: Some(19.5),
        fp32: 19.5,
        tf32: 156.0,
        fp16_bf16: 312.0,
        fp16_acc16: None,
    },
    Peaks {
        names: &["l40s"],
        fp64: None,
        fp32: 91.6,
        tf32: 183.0,
        fp16_bf16: 362.0,
        fp16_acc16: None,
    },
    Peaks {
        names: &["l4"],
        fp64: None,
        fp32: 30.3,
        tf32: 60.0,
        fp16_bf16: 121.0,
        fp16_acc16: None,
    },
    Peaks {
        names: &["geforce rtx 4090"],
        fp64: None,
        fp32: 82.6,
        tf32: 82.6,
        fp16_bf16: 165.2,
        fp16_acc16: Some(330.3),
    },
];

/// The datasheet's dense peak, in TFLOP/s, for `precision` on the GPU called
/// `device_name`; `None` for an unlisted GPU or precision.
pub fn datasheet_tflops(device_name: &str, precision: Precision) -> Option<f64> {
    let name = short_name(device_name);
    let p = TABLE.iter().find(|p| p.names.contains(&name.as_str()))?;
    match precision {
        Precision::F64 => p.fp64,
        Precision::F32 => Some(p.fp32),
        Precision::Tf32 => Some(p.tf32),
        Precision::F16 | Precision::Bf16 | Precision::Bf16Reduced => Some(p.fp16_bf16),
        Precision::F16Reduced => Some(p.fp16_acc16.unwrap_or(p.fp16_bf16)),
    }
}

/// Datasheet memory bandwidth in GB/s (10^9 bytes per second), by the same
/// driver names as [`TABLE`].
const MEMORY_GB_PER_S: [(&[&str], f64); 9] = [
    (&["h200"], 4800.0),
    (&["h100 80gb hbm3", "h100 sxm5 80gb"], 3350.0),
    (&["h100 pcie"], 2000.0),
    (&["a100-sxm4-80gb"], 2039.0),
    (&["a100 80gb pcie"], 1935.0),
    (&["a100-sxm4-40gb", "a100-pcie-40gb"], 1555.0),
    (&["l40s"], 864.0),
    (&["l4"], 300.0),
    (&["geforce rtx 4090"], 1008.0),
];

/// The datasheet's memory bandwidth, in GB/s, of the GPU called `device_name`;
/// `None` for an unlisted GPU.
pub fn datasheet_memory_gb_per_s(device_name: &str) -> Option<f64> {
    let name = short_name(device_name);
    MEMORY_GB_PER_S
        .iter()
        .find(|(names, _)| names.contains(&name.as_str()))
        .map(|(_, gb_per_s)| *gb_per_s)
}

/// The driver's device name, lower case, without the "nvidia " prefix.
fn short_name(device_name: &str) -> String {
    let name = device_name.trim().to_ascii_lowercase();
    name.strip_prefix("nvidia ").unwrap_or(&name).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_gpus_by_their_driver_names() {
        assert_eq!(
            datasheet_tflops("NVIDIA H200", Precision::Bf16),
            Some(989.5)
        );
        assert_eq!(
            datasheet_tflops("NVIDIA H100 80GB HBM3", Precision::F32),
            Some(67.0)
        );
        assert_eq!(
            datasheet_tflops("NVIDIA A100-SXM4-80GB", Precision::Tf32),
            Some(156.0)
        );
        assert_eq!(
            datasheet_tflops("NVIDIA GeForce RTX 4090", Precision::F16Reduced),
            Some(330.3)
        );
    }

    #[test]
    fn unknown_gpus_and_cpus_get_nothing() {
        assert_eq!(datasheet_tflops("NVIDIA GB10", Precision::F32), None);
        assert_eq!(datasheet_tflops("NVIDIA H200 NVL", Precision::F32), None);
        assert_eq!(datasheet_tflops("AMD EPYC 9B14", Precision::F32), None);
        assert_eq!(datasheet_tflops("NVIDIA L4", Precision::F64), None);
        assert_eq!(datasheet_memory_gb_per_s("NVIDIA GB10"), None);
        assert_eq!(
            datasheet_memory_gb_per_s("Intel(R) Xeon(R) Processor"),
            None
        );
    }

    #[test]
    fn memory_bandwidth_by_driver_name() {
        assert_eq!(datasheet_memory_gb_per_s("NVIDIA H200"), Some(4800.0));
        assert_eq!(datasheet_memory_gb_per_s(" nvidia l4 "), Some(300.0));
        assert_eq!(
            datasheet_memory_gb_per_s("NVIDIA A100-SXM4-40GB"),
            Some(1555.0)
        );
    }
}
