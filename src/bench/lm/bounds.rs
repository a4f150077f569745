//! What a generate row is held against, from one bandwidth ladder per run
//! ([`crate::bench::ladder`]): generation against the ladder's read at the
//! weights' own footprint (the level they live in: the last cache where
//! they fit, an LLC bound; memory otherwise), beside the same bound past the
//! caches (DRAM); prompt processing against a real roofline, min(the compute
//! peak measured in this run at the row's precision on the pool's threads (a
//! quantized row's: its own product, [`Peak`]),
//! the pass's arithmetic intensity x that bandwidth) (Williams, Waterman and
//! Patterson, "Roofline", CACM 2009).

use std::cell::RefCell;

use anyhow::Result;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use super::RowKind;
use crate::bench::ladder::Ladder;
use crate::clock::Plan;
use crate::model::cost::tg_bound_tokens_per_s;
use crate::model::layer::Kernels;
use crate::model::quantize::{main_type, row_types};
use crate::model::weights::Weights;
use crate::precision::Precision;
use crate::schema::{Bound, LadderKernel, LaunchRow, PpRoofline};
use crate::telemetry::Telemetry;

/// One run's bounds: its ladder, the GEMM peaks and what one op costs the
/// host (the floor a token's op count sets), the last two measured the
/// first time a row asks (so `scaling`, which asks for no op cost, pays none).
pub struct Bounds<'a> {
    ladder: Ladder<'a>,
    device: &'a Device,
    telemetry: &'a Telemetry,
    peaks: RefCell<Vec<(Peak, f64)>>,
    op_cost: std::cell::OnceCell<LaunchRow>,
}

/// Ops a sample of [`Bounds`]' op cost issues back to back.
const OP_COST_CALLS: usize = 500;

/// What a row's compute peak is measured on ([`Bounds::pp_roofline`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Peak {
    /// Candle's matmul at a float precision.
    Float(Precision),
    /// A block type's product, on the suite's kernels (true) or Candle's.
    Quantized(GgmlDType, bool),
}

impl Peak {
    /// What a row's compute peak is measured on: its precision's GEMM, or
    /// its main block type's product on its kernels (a mixture's or a
    /// file's: the type holding most of its layers' bytes).
    pub fn of_row(weights: &Weights, kind: RowKind, kernels: Kernels) -> Result<Self> {
        Ok(match kind {
            RowKind::Float(p) => Self::Float(p),
            RowKind::Quantized(q) => {
                let t = main_type(weights.config(), &row_types(weights.source(), q)?);
                Self::Quantized(t, kernels == Kernels::Lab)
            }
        })
    }

    /// As the result file names it: "fp32", "q4_1 (the suite's QLinear)".
    pub fn name(self) -> String {
        match self {
            Peak::Float(p) => p.to_string(),
            Peak::Quantized(t, lab) => format!(
                "{} ({})",
                format!("{t:?}").to_lowercase(),
                if lab {
                    "the suite's QLinear"
                } else {
                    "Candle's QMatMul"
                }
            ),
        }
    }
}

/// A generation bound: the ladder's point, tokens/s at it, and at DRAM's.
pub struct TgBound {
    pub bound: Bound,
    pub tokens_per_s: f64,
    pub dram_tokens_per_s: f64,
}

impl<'a> Bounds<'a> {
    /// The run's ladder (no footprint past `max_footprint`), its read past
    /// the caches measured now.
    pub fn new(
        device: &'a Device,
        telemetry: &'a Telemetry,
        max_footprint: Option<u64>,
    ) -> Result<Self> {
        let ladder = Ladder::new(device, telemetry, max_footprint)?;
        let bounds = Self {
            ladder,
            device,
            telemetry,
            peaks: RefCell::new(Vec::new()),
            op_cost: std::cell::OnceCell::new(),
        };
        bounds.dram()?;
        Ok(bounds)
    }

    /// Memory's read: the fastest read past the caches (memory's footprint
    /// or more) the ladder has measured so far, on up to the pool's threads.
    /// Each row's reads add to it, so a row is held to the best moment
    /// before it, not to the run's first reading alone.
    pub fn dram(&self) -> Result<Bound> {
        let (pool, memory) = (self.ladder.pool_threads(), self.ladder.memory_footprint());
        self.ladder.bound(LadderKernel::Read, pool, memory)
    }

    /// The ladder so far, for the result file.
    pub fn ladder(&self) -> crate::schema::Ladder {
        self.ladder.snapshot()
    }

    /// What one op costs the host on this device: a queued one-element add
    /// ([`crate::bench::overhead::op_cost`]), measured the first time a row
    /// asks, once a run.
    pub fn op_cost(&self) -> Result<&LaunchRow> {
        if let Some(c) = self.op_cost.get() {
            return Ok(c);
        }
        let plan = Plan {
            warmup: 1,
            iters: 5,
        };
        let c = crate::bench::overhead::op_cost(self.device, self.telemetry, plan, OP_COST_CALLS)?;
        Ok(self.op_cost.get_or_init(|| c))
    }

    /// Generation's bound for `bytes_per_token` of weights read a token.
    pub fn tg(&self, bytes_per_token: u64) -> Result<TgBound> {
        let bound = self.ladder.bound(
            LadderKernel::Read,
            self.ladder.pool_threads(),
            bytes_per_token,
        )?;
        let dram = self.dram()?;
        Ok(TgBound {
            tokens_per_s: tg_bound_tokens_per_s(bound.gb_per_s, bytes_per_token),
            dram_tokens_per_s: tg_bound_tokens_per_s(dram.gb_per_s, bytes_per_token),
            bound,
        })
    }

    /// The compute peak of a row (GFLOP/s) and the product's side: a square
    /// product (a quantized row's: 64 rows of activations against a square
    /// weight) of random inputs on this device at the model's scale (its
    /// width to the next power of two, 128 to 1024 on the CPU, to 4096 on a
    /// GPU; 256 at least for a quantized row, a k-quant's block), measured
    /// the first time a row of its kind asks (with the cuBLAS mode the
    /// caller set). A float row's is Candle's matmul at its precision; a
    /// quantized row's is its own product, its block type on its own
    /// kernels (the suite's `QLinear`, integer dot products, or Candle's
    /// `QMatMul`): a float GEMM's peak is no ceiling for integer kernels,
    /// and the lab's q4_1 pp read 106% of the f32 GEMM's on a Xeon VM.
    fn gemm_peak(&self, of: Peak, width: usize) -> Result<(f64, usize)> {
        let most = if self.device.is_cuda() { 4096 } else { 1024 };
        let least = if matches!(of, Peak::Float(_)) {
            128
        } else {
            256
        };
        let n = width.next_power_of_two().clamp(least, most);
        if let Some((_, g)) = self.peaks.borrow().iter().find(|(q, _)| *q == of) {
            return Ok((*g, n));
        }
        // A quantized product's rows: one prompt chunk's (64), whose 8-bit
        // copy stays in the cache as a prompt's does; at n rows Candle's
        // Q4_1 product ran slower a multiply-add than at a prompt's 16 (the
        // model's pp read 114% of it).
        let rows = if matches!(of, Peak::Float(_)) { n } else { 64 };
        let a = Tensor::randn(0f32, 1f32, (rows, n), self.device)?;
        let b = Tensor::randn(0f32, 1f32, (n, n), self.device)?;
        // A peak is what the product did do: its fastest sample, as the
        // ladder's points and the kernels' roofs are read (a median of three
        // on a shared VM read 445 GFLOP/s for the suite's Q4_1 product while
        // a batch of 16's matmuls ran at 464 inside the model, 104% of it).
        let plan = Plan {
            warmup: 1,
            iters: 5,
        };
        let label = format!("generate: the compute peak, {} {rows}x{n}x{n}", of.name());
        let time =
            |f: &dyn Fn() -> Result<Tensor>| self.telemetry.time(self.device, plan, &label, f);
        let t = match of {
            Peak::Float(p) => {
                let (a, b) = (a.to_dtype(p.dtype())?, b.to_dtype(p.dtype())?);
                time(&|| Ok(a.matmul(&b)?))?
            }
            Peak::Quantized(t, lab) => {
                // Candle quantizes from the host (`quantize_onto` refuses a
                // device tensor) and places the blocks on `device`.
                let w = QTensor::quantize_onto(&b.to_device(&Device::Cpu)?, t, self.device)?;
                if lab {
                    let lin = crate::kernels::QLinear::new(w)?;
                    time(&|| Ok(lin.forward(&a)?))?
                } else {
                    let mm = QMatMul::from_qtensor(w)?;
                    time(&|| Ok(mm.forward(&a)?))?
                }
            }
        };
        let flops = crate::formulas::matmul_flops(n) * rows as f64 / n as f64;
        let g = flops / (t.fastest_ms() * 1e-3) / 1e9;
        self.peaks.borrow_mut().push((of, g));
        Ok((g, n))
    }

    /// The compute peak of `of` (GFLOP/s) at a model `width` wide, measured
    /// the first time it is asked for ([`Self::gemm_peak`]).
    pub fn compute_peak(&self, of: Peak, width: usize) -> Result<f64> {
        Ok(self.gemm_peak(of, width)?.0)
    }

    /// The compute peak of `of` measured once more (another moment of the
    /// run: a shared VM's slow seconds can fall on a peak's few
    /// milliseconds), kept as the higher of the two, which it returns.
    pub fn compute_peak_again(&self, of: Peak, width: usize) -> Result<f64> {
        let before = self.compute_peak(of, width)?;
        self.peaks.borrow_mut().retain(|(q, _)| *q != of);
        let best = before.max(self.compute_peak(of, width)?);
        let mut peaks = self.peaks.borrow_mut();
        peaks.retain(|(q, _)| *q != of);
        peaks.push((of, best));
        Ok(best)
    }

    /// pp's roofline: `flops` over `bytes` read, at `p`'s compute peak (at a
    /// model `width` wide; for Candle's quantized kernels the suite's product
    /// of the same type where faster; or the row's `matmuls_alone` GFLOP/s at
    /// pp's shapes where faster still) and `bandwidth`'s GB/s, against
    /// `achieved` GFLOP/s.
    pub fn pp_roofline(
        &self,
        (p, width): (Peak, usize),
        (flops, bytes): (f64, u64),
        bandwidth: &Bound,
        (achieved, matmuls_alone): (f64, f64),
    ) -> Result<PpRoofline> {
        let (gemm, n) = self.gemm_peak(p, width)?;
        // A roofline is the machine's, not the kernel's: a quantized row on
        // Candle's kernels is held to the faster of its product and the
        // suite's for the same block type (Candle's CPU Q4_1 dot product is
        // scalar: 6.6 GFLOP/s read "97% of the roofline" beside the suite's
        // 515). Where the suite's product cannot run the type, its own.
        let (gemm, p) = match p {
            Peak::Quantized(t, false) => match self.gemm_peak(Peak::Quantized(t, true), width) {
                Ok((lab, _)) if lab > gemm => (lab, Peak::Quantized(t, true)),
                _ => (gemm, p),
            },
            _ => (gemm, p),
        };
        // The compute ceiling is never under what the row's own matmuls did
        // at pp's shapes, timed alone in this run: Candle's scalar Q4_1
        // product ran faster a multiply-add at SmolLM2's shapes than at the
        // square one, and its pp read 109% of the square one's peak.
        let (peak, compute) = if matmuls_alone > gemm {
            (matmuls_alone, "compute (its matmuls alone at pp's shapes)")
        } else {
            (gemm, "compute")
        };
        let intensity = flops / bytes as f64;
        let memory = intensity * bandwidth.gb_per_s;
        let (attainable, bound_by) = if memory < peak {
            (
                memory,
                format!(
                    "memory ({} {} GB/s)",
                    bandwidth.level,
                    bandwidth.gb_per_s.round()
                ),
            )
        } else {
            (peak, compute.to_string())
        };
        Ok(PpRoofline {
            gemm_peak_gflop_per_s: gemm,
            gemm_size: n,
            gemm_precision: p.name(),
            flop_per_byte: intensity,
            attainable_gflop_per_s: attainable,
            bound_by,
            pct: 100.0 * achieved / attainable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On every device: the quantized peak's weights are quantized from
    /// the host (Candle's `quantize_onto` refuses a device tensor).
    fn compute_ceiling_on(device: &Device) {
        let t = Telemetry::open(device);
        let bounds = Bounds::new(device, &t, Some(1 << 20)).unwrap();
        let fast = Bound {
            kernel: LadderKernel::Read,
            threads: 1,
            footprint_bytes: 1 << 20,
            level: "L2".into(),
            gb_per_s: 1e9,
            chunked: false,
        };
        let peak = Peak::Float(Precision::F32);
        let (flops, bytes) = (1e9, 1 << 20);
        let r = bounds
            .pp_roofline((peak, 64), (flops, bytes), &fast, (1.0, 1e9))
            .unwrap();
        assert_eq!(r.bound_by, "compute (its matmuls alone at pp's shapes)");
        assert_eq!((r.attainable_gflop_per_s, r.pct), (1e9, 1e-7));
        assert!(r.gemm_peak_gflop_per_s < 1e9 && r.gemm_size == 128);
        // Slower matmuls alone: the square product is the ceiling.
        let r = bounds
            .pp_roofline((peak, 64), (flops, bytes), &fast, (1.0, 1e-9))
            .unwrap();
        assert_eq!(r.bound_by, "compute");
        assert_eq!(r.attainable_gflop_per_s, r.gemm_peak_gflop_per_s);
        // A quantized row's own product on the suite's kernels, 256 wide.
        let q = Peak::Quantized(GgmlDType::Q4_1, true);
        let r = bounds
            .pp_roofline((q, 64), (flops, bytes), &fast, (1.0, 1e-9))
            .unwrap();
        assert_eq!(
            (r.gemm_precision.as_str(), r.gemm_size),
            ("q4_1 (the suite's QLinear)", 256)
        );
        // A row on Candle's kernels is held to the machine's best product of
        // its block type: the faster of Candle's and the suite's, named.
        let q = Peak::Quantized(GgmlDType::Q8_0, false);
        let r = bounds
            .pp_roofline((q, 64), (flops, bytes), &fast, (1.0, 1e-9))
            .unwrap();
        let candle = bounds.compute_peak(q, 64).unwrap();
        let lab = bounds
            .compute_peak(Peak::Quantized(GgmlDType::Q8_0, true), 64)
            .unwrap();
        assert!(candle > 0.0, "Candle's QMatMul measured");
        assert_eq!(r.gemm_peak_gflop_per_s, candle.max(lab));
        let named = if lab > candle {
            "q8_0 (the suite's QLinear)"
        } else {
            "q8_0 (Candle's QMatMul)"
        };
        assert_eq!(r.gemm_precision, named);
    }

    #[test]
    fn the_compute_ceiling_is_never_under_the_rows_own_matmuls() {
        compute_ceiling_on(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn the_compute_ceiling_is_never_under_the_rows_own_matmuls_cuda() {
        compute_ceiling_on(&Device::new_cuda(0).unwrap());
    }
}
