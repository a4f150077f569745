//! A `kernels` row's accuracy: its output's first rows against the op
//! computed in f64 on the host from the same rounded inputs, norm-wise.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

use super::ops;
use crate::schema::{KernelAccuracy, KernelOp};

/// Rows of each output whose accuracy is checked against f64.
const ACCURACY_ROWS: usize = 4;

/// The f64 result of the op over the first [`ACCURACY_ROWS`] rows of its
/// inputs, computed on the host from the values the device holds.
pub(super) struct Reference {
    rows: usize,
    width: usize,
    want: Vec<f64>,
}

impl Reference {
    pub(super) fn new(op: KernelOp, i: &ops::Inputs, width: usize) -> Result<Self> {
        let rows = (i.x.elem_count() / width.max(1)).min(ACCURACY_ROWS);
        let first = |t: &Tensor| -> Result<Vec<f64>> {
            let flat = t.flatten_all()?;
            let k = (rows * width).min(flat.elem_count());
            host_f64(&flat.narrow(0, 0, k)?)
        };
        let (x, w) = (first(&i.x)?, host_f64(&i.w)?);
        let y = if matches!(op, KernelOp::Swiglu | KernelOp::Add) {
            first(&i.y)?
        } else {
            Vec::new()
        };
        Ok(Self {
            rows,
            width,
            want: ops::reference(op, &x, &y, &w, width),
        })
    }

    pub(super) fn check(&self, out: &Tensor) -> Result<KernelAccuracy> {
        let got = host_f64(&out.flatten_all()?.narrow(0, 0, self.rows * self.width)?)?;
        let (max_rel_err, mean_rel_err) = normwise_errors(&got, &self.want);
        Ok(KernelAccuracy {
            elements_checked: got.len(),
            max_rel_err,
            mean_rel_err,
        })
    }
}

/// max |got - want| / max |want| and mean |got - want| / mean |want|: errors
/// as a share of the output's size, norm-wise (Higham, "Accuracy and Stability
/// of Numerical Algorithms", 2002, sec. 1.2), so that a softmax, whose mass
/// sits in a few entries, is judged as a normal row is. 0 for an all-zero
/// output computed exactly.
pub fn normwise_errors(got: &[f64], want: &[f64]) -> (f64, f64) {
    let largest = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let size = want.iter().map(|w| w.abs()).sum::<f64>();
    let diffs: Vec<f64> = got.iter().zip(want).map(|(g, w)| (g - w).abs()).collect();
    let worst = diffs.iter().copied().fold(0.0, f64::max);
    let total: f64 = diffs.iter().sum();
    let ratio = |e: f64, of: f64| if e == 0.0 { 0.0 } else { e / of };
    (ratio(worst, largest), ratio(total, size))
}

pub(crate) fn host_f64(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<f64>()?)
}
