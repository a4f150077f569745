//! The rows of the matmul benchmark: a dtype plus the GEMM mode cuBLAS may use
//! for it. One enum names them on the command line, in result files and in
//! tables, so the three always agree; f32/f16/bf16 keep the reference lab's
//! spellings ("fp32", "fp16", "bf16") so its results compare field by field.

use std::fmt;
use std::str::FromStr;

use candle_core::DType;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One row of the benchmark: a dtype and the GEMM mode cuBLAS may use for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Precision {
    #[serde(rename = "fp64")]
    F64,
    #[serde(rename = "fp32")]
    F32,
    /// f32 data, TF32 tensor-core math (Candle's `set_gemm_reduced_precision_f32`).
    #[serde(rename = "tf32")]
    Tf32,
    #[serde(rename = "fp16")]
    F16,
    /// f16 with Candle's reduced-precision switch on: cuBLAS computes and
    /// accumulates in f16 (CUBLAS_COMPUTE_16F).
    #[serde(rename = "fp16-reduced")]
    F16Reduced,
    #[serde(rename = "bf16")]
    Bf16,
    /// bf16 with Candle's reduced-precision switch on. Candle then asks cuBLAS
    /// for CUBLAS_COMPUTE_32F_FAST_16BF, which for inputs already in bf16 still
    /// accumulates in f32: expect the same speed and error as `Bf16`. The row
    /// is kept to show what the switch does (and does not do).
    #[serde(rename = "bf16-reduced")]
    Bf16Reduced,
}

impl Precision {
    pub const ALL: [Precision; 7] = [
        Self::F64,
        Self::F32,
        Self::Tf32,
        Self::F16,
        Self::F16Reduced,
        Self::Bf16,
        Self::Bf16Reduced,
    ];
    /// The reference lab's three rows.
    pub const DEFAULT: [Precision; 3] = [Self::F32, Self::F16, Self::Bf16];

    /// The name used on the command line, in JSON and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::F64 => "fp64",
            Self::F32 => "fp32",
            Self::Tf32 => "tf32",
            Self::F16 => "fp16",
            Self::F16Reduced => "fp16-reduced",
            Self::Bf16 => "bf16",
            Self::Bf16Reduced => "bf16-reduced",
        }
    }

    pub fn dtype(self) -> DType {
        match self {
            Self::F64 => DType::F64,
            Self::F32 | Self::Tf32 => DType::F32,
            Self::F16 | Self::F16Reduced => DType::F16,
            Self::Bf16 | Self::Bf16Reduced => DType::BF16,
        }
    }

    /// Whether cuBLAS may trade precision for speed in this row's GEMM.
    pub fn reduced_gemm(self) -> bool {
        matches!(self, Self::Tf32 | Self::F16Reduced | Self::Bf16Reduced)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let p = match s.trim().to_ascii_lowercase().as_str() {
            "f64" | "fp64" | "float64" => Self::F64,
            "f32" | "fp32" | "float32" => Self::F32,
            "tf32" => Self::Tf32,
            "f16" | "fp16" | "float16" => Self::F16,
            "f16-reduced" | "fp16-reduced" => Self::F16Reduced,
            "bf16" | "bfloat16" => Self::Bf16,
            "bf16-reduced" => Self::Bf16Reduced,
            _ => {
                let valid: Vec<_> = Self::ALL.iter().map(|p| p.name()).collect();
                return Err(format!(
                    "unknown dtype '{s}': expected one of {}",
                    valid.join(", ")
                ));
            }
        };
        Ok(p)
    }
}

/// A plain dtype flag value (f64, f32, f16, bf16, with the aliases
/// [`Precision`] reads): the element type alone, without a cuBLAS mode, for
/// experiments whose operations are not GEMMs (`memory --dtypes`).
pub fn plain_dtype(s: &str) -> Result<candle_core::DType, String> {
    const PLAIN: &str = "expected one of f64, f32, f16, bf16";
    match s.parse::<Precision>() {
        Ok(p) if !p.reduced_gemm() => Ok(p.dtype()),
        Ok(p) => Err(format!(
            "'{s}' is a cuBLAS GEMM mode ({p}), not a dtype: {PLAIN}"
        )),
        Err(_) => Err(format!("unknown dtype '{s}': {PLAIN}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_dtypes_are_the_element_types_alone() {
        use candle_core::DType;
        assert_eq!(plain_dtype("fp16"), Ok(DType::F16));
        assert_eq!(plain_dtype("bfloat16"), Ok(DType::BF16));
        assert!(plain_dtype("tf32")
            .unwrap_err()
            .contains("a cuBLAS GEMM mode"));
        assert_eq!(
            plain_dtype("f12").unwrap_err(),
            "unknown dtype 'f12': expected one of f64, f32, f16, bf16"
        );
    }

    #[test]
    fn names_parse_back_and_unknown_ones_list_the_valid() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse(), Ok(p));
        }
        assert_eq!("F32".parse(), Ok(Precision::F32));
        assert_eq!("bfloat16".parse(), Ok(Precision::Bf16));
        let err = "f12".parse::<Precision>().unwrap_err();
        assert!(err.contains("fp64, fp32, tf32, fp16"), "{err}");
    }

    #[test]
    fn json_names_are_the_command_line_names() {
        for p in Precision::ALL {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(serde_json::from_str::<Precision>(&json).unwrap(), p);
        }
    }
}
