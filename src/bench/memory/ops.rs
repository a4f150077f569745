//! Candle's memory-bound operations, and the bytes and FLOPs each one moves by
//! STREAM's counting (the module above).

use candle_core::{DType, Tensor};

use crate::formulas::Traffic;

/// A memory-bound operation Candle offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `a.copy()`: a contiguous copy into a new tensor.
    Copy,
    /// `a + b`.
    Add,
    /// `a.affine(2.0, 1.0)`: a x 2 + 1, one multiply-add per element in one kernel.
    Affine,
    /// `a.t().contiguous()`: a strided read, a contiguous write.
    Transpose,
    /// `a.to_dtype(..)`.
    Cast,
    /// `a.sum_all()`: every element read, one written.
    Sum,
}

impl Op {
    /// The operations every dtype runs (casts run from f32 only).
    pub const PER_DTYPE: [Op; 5] = [Op::Copy, Op::Add, Op::Affine, Op::Transpose, Op::Sum];

    pub fn name(self) -> &'static str {
        match self {
            Op::Copy => "copy",
            Op::Add => "add",
            Op::Affine => "affine",
            Op::Transpose => "transpose",
            Op::Cast => "cast",
            Op::Sum => "sum",
        }
    }

    pub fn call(self, out: DType) -> String {
        match self {
            Op::Copy => "a.copy()".into(),
            Op::Add => "a + b".into(),
            Op::Affine => "a.affine(2.0, 1.0)".into(),
            Op::Transpose => "a.t().contiguous()".into(),
            Op::Cast => format!("a.to_dtype({})", out.as_str()),
            Op::Sum => "a.sum_all()".into(),
        }
    }

    /// Streams it reads and writes: what the ladder's kernel for it moves.
    pub fn streams(self) -> (u64, u64) {
        match self {
            Op::Copy | Op::Transpose | Op::Cast | Op::Affine => (1, 1),
            Op::Add => (2, 1),
            Op::Sum => (1, 0),
        }
    }

    /// Whether its stores are `memcpy`'s choice (Candle's copy clones the
    /// storage: non-temporal stores past the C library's size), so that it
    /// is held to the faster of the ladder's store kinds; the others store
    /// the ordinary way.
    pub fn memcpy(self) -> bool {
        self == Op::Copy
    }

    /// Runs the operation once on Candle tensors.
    pub(super) fn run(self, a: &Tensor, b: &Tensor, out: DType) -> candle_core::Result<Tensor> {
        match self {
            Op::Copy => a.copy(),
            Op::Add => a + b,
            Op::Affine => a.affine(2.0, 1.0),
            Op::Transpose => a.t()?.contiguous(),
            Op::Cast => a.to_dtype(out),
            Op::Sum => a.sum_all(),
        }
    }
}

/// What `op` moves over `n` elements, `in_bytes` and `out_bytes` per element:
/// inputs read once, outputs written once (STREAM's counting, see the module).
/// Add reads two inputs; sum writes one element and makes n - 1 additions;
/// affine makes a multiply and an add per element.
pub fn traffic(op: Op, n: u64, in_bytes: u64, out_bytes: u64) -> Traffic {
    let (inputs, outputs, flops) = match op {
        Op::Copy | Op::Transpose | Op::Cast => (1, n, 0),
        Op::Add => (2, n, n),
        Op::Affine => (1, n, 2 * n),
        Op::Sum => (1, 1, n.saturating_sub(1)),
    };
    Traffic {
        bytes_read: inputs * n * in_bytes,
        bytes_written: outputs * out_bytes,
        flops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formulas::copy_traffic;

    #[test]
    fn bytes_are_counted_per_operation() {
        let n = 1000;
        let add = traffic(Op::Add, n, 4, 4);
        assert_eq!(
            (add.bytes_read, add.bytes_written, add.flops),
            (8000, 4000, 1000)
        );
        assert_eq!(add.bytes_moved(), 12000);
        let copy = traffic(Op::Copy, n, 2, 2);
        assert_eq!(
            (copy.bytes_read, copy.bytes_written, copy.flops),
            (2000, 2000, 0)
        );
        assert_eq!(traffic(Op::Transpose, n, 4, 4), traffic(Op::Copy, n, 4, 4));
        let affine = traffic(Op::Affine, n, 4, 4);
        assert_eq!((affine.bytes_moved(), affine.flops), (8000, 2000));
        assert_eq!(affine.flop_per_byte(), 0.25);
        let cast = traffic(Op::Cast, n, 4, 2);
        assert_eq!((cast.bytes_read, cast.bytes_written), (4000, 2000));
        let sum = traffic(Op::Sum, n, 4, 4);
        assert_eq!(
            (sum.bytes_read, sum.bytes_written, sum.flops),
            (4000, 4, 999)
        );
        assert_eq!(copy_traffic(64).bytes_moved(), 128);
        // Half the element size, half the bytes.
        assert_eq!(
            traffic(Op::Add, n, 2, 2).bytes_moved() * 2,
            traffic(Op::Add, n, 4, 4).bytes_moved()
        );
    }
}
