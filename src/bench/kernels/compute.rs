//! A `kernels` row's compute roof: the faster of the suite's kernel and
//! Candle's op for the row's op, precision and row width, timed on inputs
//! the threads' private caches hold ([`Ladder::resident_footprint`]). There memory no longer paces it, so its
//! rate is what its own work per element allows (the exponentials of a
//! softmax or SwiGLU, the 16-bit conversions, a norm's two passes) at the
//! caches' pace: the roof a row past the caches cannot rise above however
//! fast memory is. With the ladder's bound it makes the row's roofline
//! ([`crate::schema::KernelRow::roofline`]): a row then reads "memory (DRAM)
//! 91%" or "compute (exp) 88%". The rate is the fastest of ten samples, as
//! the ladder's points are: a roof is what the kernel did do. Measured once per
//! op, precision and width, before the first row that needs it, and again
//! where a row beat it ([`Roofs::held`]; every row then takes the key's
//! highest, [`Roofs::last`]); the copy has no arithmetic and no roof.

use std::cell::RefCell;

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};

use super::ops;
use crate::bench::ladder::{time_calls, Called, Ladder};
use crate::clock::Plan;
use crate::precision::Precision;
use crate::schema::{ComputeRoof, Implementation, KernelOp, KernelRow};
use crate::telemetry::Telemetry;

/// The work an op adds to moving its bytes, named for the table: the
/// resource its compute roof measures. None for the copy.
pub fn resource(op: KernelOp, p: Precision) -> Option<&'static str> {
    let sixteen = match p {
        Precision::F16 => Some("f16 conversions"),
        Precision::Bf16 => Some("bf16 conversions"),
        _ => None,
    };
    // The copy, and the add at f32 (one instruction a value), add no work
    // to their bytes: their roof in the cache would be the cache's pace,
    // which a smaller row in a nearer level beats (an add of 0.75 MiB read
    // 120-130% of its 2 MiB reading), and the ladder already bounds that.
    match op {
        KernelOp::Copy => None,
        KernelOp::Softmax | KernelOp::Swiglu => Some("exp"),
        KernelOp::RmsNorm | KernelOp::RmsNormMul => sixteen.or(Some("two passes")),
        KernelOp::Add => sixteen,
    }
}

/// What a roof is measured for: an op, a precision and a row width.
type Key = (KernelOp, Precision, usize);

/// The roofs measured so far in a run, by op, precision and row width.
#[derive(Default)]
pub(super) struct Roofs {
    made: RefCell<Vec<(Key, ComputeRoof)>>,
}

impl Roofs {
    /// The roof of `op` at `p` for rows of `width` (the row's shape's last
    /// dimension), measured the first time it is asked for, for a row of
    /// `row_bytes` (none under the roof's footprint); `bytes_per_elem` turns
    /// its rate into the row's bytes per second.
    pub fn get(
        &self,
        (device, telemetry, ladder): (&Device, &Telemetry, &Ladder),
        (op, p, width): (KernelOp, Precision, usize),
        (row_bytes, bytes_per_elem): (u64, f64),
    ) -> Result<Option<ComputeRoof>> {
        let Some(resource) = resource(op, p) else {
            return Ok(None);
        };
        // A row that moves fewer bytes than the roof's footprint sits in a
        // nearer cache, which the roof does not bound (`binding_roof`): not
        // measured for it (Candle's 16-bit ops take milliseconds a roof).
        if row_bytes < ladder.resident_footprint() {
            return Ok(None);
        }
        let key = (op, p, width);
        let found = self
            .made
            .borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, r)| r.clone());
        let roof = match found {
            Some(r) => r,
            None => self.remeasured((device, telemetry, ladder), key, resource)?,
        };
        Ok(Some(in_bytes(roof, bytes_per_elem)))
    }

    /// `roof` (the row's, from [`Roofs::get`]) held to the row it bounds:
    /// where the row's fastest variant ran over 5% faster (`rate`, output
    /// G elements/s), the roof was not the kernel's pace (a slow moment of
    /// a shared machine: a Xeon VM's rms_norm bf16 roof once read 1.4 G
    /// elements/s while another process held half its CPUs, and the row
    /// past the caches ran at 8.0), so it is measured again, once, and kept
    /// for the rows after; beaten again, the row has none (a note says so)
    /// and is held to its memory bound alone: a bound a row beats is not one.
    pub fn held(
        &self,
        ctx: (&Device, &Telemetry, &Ladder),
        roof: Option<ComputeRoof>,
        (op, p, width): Key,
        (rate, bytes_per_elem, label): (f64, f64, &str),
    ) -> Option<ComputeRoof> {
        let roof = roof?;
        if rate <= BEATEN * roof.g_elements_per_s {
            return Some(roof);
        }
        let again = match self.remeasured(ctx, (op, p, width), &roof.resource) {
            Ok(r) => r,
            Err(e) => {
                let why = crate::error::error_line(&e);
                crate::note!(
                    "{label}: its compute roof, beaten by the row, not measured again ({why}): none"
                );
                return None;
            }
        };
        if rate <= BEATEN * again.g_elements_per_s {
            return Some(in_bytes(again, bytes_per_elem));
        }
        crate::note!(
            "{label}: its compute roof ({}, {:.2} G elements/s on resident data, {:.2} measured \
             again) was beaten by the row itself ({rate:.2}): not a bound; the row is held to \
             memory alone",
            roof.resource,
            roof.g_elements_per_s,
            again.g_elements_per_s
        );
        None
    }

    /// The roof of `key` measured now; the run keeps the faster of it and
    /// any before it (a second slow moment must not lower a roof).
    fn remeasured(
        &self,
        ctx: (&Device, &Telemetry, &Ladder),
        key: Key,
        resource: &str,
    ) -> Result<ComputeRoof> {
        let r = measure(ctx, key, resource)?;
        let mut made = self.made.borrow_mut();
        match made.iter_mut().find(|(k, _)| *k == key) {
            Some((_, kept)) if kept.g_elements_per_s >= r.g_elements_per_s => {}
            Some((_, kept)) => *kept = r.clone(),
            None => made.push((key, r.clone())),
        }
        Ok(r)
    }

    /// The roof a row that has one ends the run with: its key's (the
    /// fastest measured, [`Roofs::remeasured`]: a later row's second
    /// measurement an earlier row then shares), in the row's bytes.
    pub fn last(&self, row: &KernelRow) -> Option<ComputeRoof> {
        row.compute.as_ref()?;
        let key = (row.op, row.precision, *row.shape.last().unwrap_or(&1));
        let made = self.made.borrow();
        let (_, kept) = made.iter().find(|(k, _)| *k == key)?;
        let per_elem = row.bytes_moved as f64 / row.elements.max(1) as f64;
        Some(in_bytes(kept.clone(), per_elem))
    }
}

/// How far a row may run past its roof before the roof is taken as
/// mismeasured: the 105% every bound is held to.
const BEATEN: f64 = 1.05;

/// `roof` with its rate in a row's bytes (`bytes_per_elem` moved an output
/// element).
fn in_bytes(roof: ComputeRoof, bytes_per_elem: f64) -> ComputeRoof {
    ComputeRoof {
        gb_per_s: roof.g_elements_per_s * bytes_per_elem,
        ..roof
    }
}

/// The cache-resident shape of `op` for rows of `width` moving about
/// `footprint` bytes in all at `elem` bytes an element (softmax's rows as
/// one head's).
pub fn resident_shape(op: KernelOp, width: usize, elem: u64, footprint: u64) -> Vec<usize> {
    // A row's streams (a norm's weight is one row for all, not a stream).
    let (reads, writes) = ops::streams(op);
    let row_bytes = (reads + writes) * width as u64 * elem;
    let rows = (footprint / row_bytes.max(1)).max(1) as usize;
    match op {
        KernelOp::Softmax => vec![1, rows, width],
        _ => vec![rows, width],
    }
}

/// The roof's own plan, whatever the row's: its samples are a quarter of a
/// millisecond, so ten of them cost nothing, and a roof taken from the
/// large case's three once read 0.52 G elements/s where the kernel does 9
/// (one slow moment of a shared VM, three one-call samples).
const ROOF_PLAN: Plan = Plan {
    warmup: 2,
    iters: 10,
};

fn measure(
    (device, telemetry, ladder): (&Device, &Telemetry, &Ladder),
    (op, p, width): (KernelOp, Precision, usize),
    resource: &str,
) -> Result<ComputeRoof> {
    let plan = ROOF_PLAN;
    let dtype = p.dtype();
    let elem = dtype.size_in_bytes() as u64;
    let shape = resident_shape(op, width, elem, ladder.resident_footprint());
    let n: usize = shape.iter().product();
    let (read, written) = ops::traffic(op, n as u64, width as u64, elem);
    let inputs = ops::Inputs::new(op, &shape, dtype, device, &ops::Draws::default())?;
    let ones = Tensor::ones(width, dtype, device)?;
    // The suite's kernel and Candle's op, the faster setting the roof: a
    // roof of the suite's own alone would let a slow kernel meet it by
    // definition and flag a faster op as beating it. (Candle's may fail
    // where the suite's runs: then the suite's alone.)
    let mut best: Option<(Implementation, Called)> = None;
    for imp in [Implementation::Lab, Implementation::Candle] {
        let label = format!("{} {p} compute roof, {}", op.name(), imp.name());
        let timed = time_calls(device, telemetry, plan, &label, ladder.clock_ms(), || {
            ops::run(op, imp, &inputs, &ones)
                .map(|_| ())
                .map_err(Into::into)
        });
        let c = match (timed, imp) {
            (Ok(c), _) => c,
            (Err(e), Implementation::Lab) => return Err(e),
            (Err(_), _) => continue,
        };
        if best
            .as_ref()
            .is_none_or(|(_, b)| c.fastest_per_call_ms < b.fastest_per_call_ms)
        {
            best = Some((imp, c));
        }
    }
    let (implementation, c) = best.context("no compute roof measured")?;
    let threads = ladder.pool_threads();
    Ok(ComputeRoof {
        resource: resource.into(),
        implementation,
        shape,
        footprint_bytes: read + written,
        level: ladder.level(read + written, threads),
        threads,
        calls_per_sample: c.calls_per_sample,
        g_elements_per_s: n as f64 / (c.fastest_per_call_ms * 1e-3) / 1e9,
        gb_per_s: crate::formulas::gb_per_s(read + written, c.fastest_per_call_ms),
        timed: c.timed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resident_shape_fills_its_footprint_with_whole_rows() {
        // A norm's row of 4096 f32 moves 32 KiB: 64 rows in 2 MiB.
        assert_eq!(
            resident_shape(KernelOp::RmsNorm, 4096, 4, 2 << 20),
            [64, 4096]
        );
        // SwiGLU reads two rows and writes one: 48 KiB a row of 4096 f32.
        assert_eq!(
            resident_shape(KernelOp::Swiglu, 4096, 4, 3 << 20),
            [64, 4096]
        );
        assert_eq!(
            resident_shape(KernelOp::Softmax, 128, 2, 1 << 20),
            [1, 2048, 128]
        );
        // Never under one row.
        assert_eq!(resident_shape(KernelOp::Add, 4096, 4, 10), [1, 4096]);
        assert_eq!(resource(KernelOp::Copy, Precision::F32), None);
        assert_eq!(resource(KernelOp::Add, Precision::F32), None);
        assert_eq!(
            resource(KernelOp::Add, Precision::F16),
            Some("f16 conversions")
        );
        assert_eq!(
            resource(KernelOp::RmsNorm, Precision::Bf16),
            Some("bf16 conversions")
        );
    }
}
