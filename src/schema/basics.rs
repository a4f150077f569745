//! The body of `basics`: tensors described by what Candle reports of them, an
//! element-wise add, broadcasting, views and what copying them costs, and a
//! host-to-device transfer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BasicsResults {
    /// A scalar, a vector, a matrix and a 3-D tensor.
    pub tensors: Vec<Described>,
    /// One 1024 x 1024 shape at every dtype.
    pub dtypes: Vec<Described>,
    pub elementwise_add: Elementwise,
    pub broadcasting: Broadcast,
    pub views: Vec<View>,
    /// What the allocator numbers in `views` count.
    pub memory_source: String,
    pub transfer: Transfer,
}

/// A tensor as Candle describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Described {
    pub name: String,
    pub rank: usize,
    pub shape: Vec<usize>,
    pub dtype: String,
    pub element_bytes: usize,
    /// Element count x element size.
    pub total_bytes: usize,
    /// Where it lives: "cpu", "cuda:0".
    pub device: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Elementwise {
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    pub a_plus_b: Vec<f32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Broadcast {
    pub matrix_shape: Vec<usize>,
    pub row_shape: Vec<usize>,
    pub result: Vec<Vec<f32>>,
}

/// A view and what making it contiguous costs, measured on the device's allocator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct View {
    pub name: String,
    pub shape: Vec<usize>,
    pub stride: Vec<usize>,
    pub is_contiguous: bool,
    /// Growth of the bytes in use on the device's allocator when the view was made.
    pub view_added_bytes: Option<u64>,
    /// Growth of the bytes in use when `.contiguous()` copied the view.
    pub contiguous_added_bytes: Option<u64>,
    /// Element count x element size: what a full copy must hold.
    pub data_bytes: usize,
}

/// A small host tensor moved to the GPU, or why not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transfer {
    pub status: TransferStatus,
    pub reason: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub values_after: Option<Vec<f32>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransferStatus {
    Done,
    Skipped,
}

impl TransferStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Skipped => "skipped",
        }
    }
}

/// Facts, not timings: no row a reader walks, nothing the types leave to check.
impl super::rows::Rows for BasicsResults {
    fn timed_rows(&self) -> Vec<super::TimedRow<'_>> {
        Vec::new()
    }

    fn validate(&self) -> anyhow::Result<()> {
        Ok(())
    }
}
