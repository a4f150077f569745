//! The `basics` experiment's core: what a tensor is to Candle, read from Candle
//! at run time. For a scalar, a vector, a matrix and a 3-D tensor: rank, shape,
//! dtype, element size, total bytes, device; one shape at every dtype; an
//! element-wise add and broadcasting; the views (broadcast, transpose) that copy
//! nothing until `.contiguous()`, with the bytes each step adds; and a
//! host-to-device transfer.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

use crate::device::label;
use crate::memory::MemoryMeter;
use crate::schema::{
    BasicsResults as Basics, Broadcast, Described, Elementwise, Transfer, TransferStatus, View,
};

/// The dtypes shown for one shape: every float Candle computes in, then integers.
const DTYPES: [DType; 10] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F8E4M3,
    DType::U8,
    DType::U32,
    DType::I16,
    DType::I32,
    DType::I64,
];

/// Side of the square used to show that views copy nothing.
const VIEW_SIDE: usize = 1024;

pub fn describe(name: &str, t: &Tensor) -> Described {
    Described {
        name: name.into(),
        rank: t.rank(),
        shape: t.dims().to_vec(),
        dtype: t.dtype().as_str().into(),
        element_bytes: t.dtype().size_in_bytes(),
        total_bytes: t.elem_count() * t.dtype().size_in_bytes(),
        device: label(t.device()),
    }
}

/// Every table of the experiment, computed on `dev`.
pub fn run(dev: &Device) -> Result<Basics> {
    let tensors = vec![
        describe("scalar", &Tensor::new(3.0f32, dev)?),
        describe("vector", &Tensor::new(&[1.0f32, 2.0, 3.0], dev)?),
        describe("matrix", &Tensor::zeros((2, 3), DType::F32, dev)?),
        describe("tensor3d", &Tensor::zeros((2, 3, 4), DType::F32, dev)?),
    ];
    let dtypes = DTYPES
        .iter()
        .map(|&dt| {
            Ok(describe(
                dt.as_str(),
                &Tensor::zeros((1024, 1024), dt, dev)?,
            ))
        })
        .collect::<Result<_>>()?;

    let a = Tensor::new(&[1.0f32, 2.0, 3.0], dev)?;
    let b = Tensor::new(&[10.0f32, 20.0, 30.0], dev)?;
    let elementwise_add = Elementwise {
        a: a.to_vec1()?,
        b: b.to_vec1()?,
        a_plus_b: (&a + &b)?.to_vec1()?,
    };

    let matrix = Tensor::ones((2, 3), DType::F32, dev)?;
    let broadcasting = Broadcast {
        matrix_shape: matrix.dims().to_vec(),
        row_shape: a.dims().to_vec(),
        result: matrix.broadcast_add(&a)?.to_vec2()?,
    };

    let meter = MemoryMeter::for_device(dev)?;
    let row = Tensor::randn(0f32, 1f32, VIEW_SIDE, dev)?;
    let square = Tensor::randn(0f32, 1f32, (VIEW_SIDE, VIEW_SIDE), dev)?;
    let views = vec![
        view("broadcast row", &meter, || {
            Ok(row.broadcast_as((VIEW_SIDE, VIEW_SIDE))?)
        })?,
        view("transpose", &meter, || Ok(square.t()?))?,
    ];

    Ok(Basics {
        tensors,
        dtypes,
        elementwise_add,
        broadcasting,
        views,
        memory_source: meter.source().into(),
        transfer: transfer(dev)?,
    })
}

/// Makes a view with `make`, then a contiguous copy of it, measuring how much
/// each grew the bytes in use. On the CPU the view's few bytes are its shape and stride.
fn view(
    name: &'static str,
    meter: &MemoryMeter,
    make: impl Fn() -> Result<Tensor>,
) -> Result<View> {
    let added = |before: Option<u64>| -> Result<Option<u64>> {
        Ok(before
            .zip(meter.used_bytes()?)
            .map(|(b, a)| a.saturating_sub(b)))
    };
    let before = meter.used_bytes()?;
    let v = make()?;
    let view_added_bytes = added(before)?;
    let before = meter.used_bytes()?;
    let copy = v.contiguous()?;
    let contiguous_added_bytes = added(before)?;
    drop(copy);
    Ok(View {
        name: name.into(),
        shape: v.dims().to_vec(),
        stride: v.stride().to_vec(),
        is_contiguous: v.is_contiguous(),
        view_added_bytes,
        contiguous_added_bytes,
        data_bytes: v.elem_count() * v.dtype().size_in_bytes(),
    })
}

/// Moves a small host tensor to the GPU: the device label changes, the values do not.
fn transfer(dev: &Device) -> Result<Transfer> {
    if !dev.is_cuda() {
        let reason = if cfg!(feature = "cuda") {
            "the selected device is the CPU"
        } else {
            "this build has no CUDA support"
        };
        return Ok(Transfer {
            status: TransferStatus::Skipped,
            reason: Some(reason.into()),
            before: None,
            after: None,
            values_after: None,
        });
    }
    let host = Tensor::ones(3, DType::F32, &Device::Cpu)?;
    let moved = host.to_device(dev)?;
    Ok(Transfer {
        status: TransferStatus::Done,
        reason: None,
        before: Some(label(host.device())),
        after: Some(label(moved.device())),
        values_after: Some(moved.to_vec1()?),
    })
}
