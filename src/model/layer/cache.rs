//! The decoder's key/value cache, preallocated and rewindable: what a
//! decode step appends to in place, and what a benchmark rewinds to time
//! one step many times.

use anyhow::{ensure, Result};
use candle_core::{DType, Device, Tensor};

use super::Kernels;

/// A preallocated key/value cache: two (batch, kv_heads, capacity, head_dim)
/// buffers and how many positions they hold. [`KvCache::append`] writes new
/// keys and values in place (`slice_set`) and hands back views of what is
/// held; nothing already cached is copied. (`candle_nn::kv_cache::KvCache`
/// works the same way but cannot be rewound, which a benchmark timing one
/// decode step many times needs: [`KvCache::truncate`].)
pub struct KvCache {
    k: Tensor,
    v: Tensor,
    len: usize,
}

impl KvCache {
    /// An empty cache of `capacity` positions.
    pub fn new(
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        head_dim: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let shape = (batch, kv_heads, capacity, head_dim);
        Ok(Self {
            k: Tensor::zeros(shape, dtype, device)?,
            v: Tensor::zeros(shape, dtype, device)?,
            len: 0,
        })
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.k.dims()[2]
    }

    /// Sequences it holds.
    pub fn batch(&self) -> usize {
        self.k.dims()[0]
    }

    pub fn dtype(&self) -> DType {
        self.k.dtype()
    }

    /// Writes `k` and `v` (batch, kv_heads, tokens, head_dim) after what is
    /// held, rounded to the cache's dtype where it is another (a 16-bit
    /// cache under f32 activations; by `kernels`' conversion), and returns
    /// views of everything held now (no copy: the views are strided when
    /// the cache is not full).
    pub fn append(&mut self, k: &Tensor, v: &Tensor, kernels: Kernels) -> Result<(Tensor, Tensor)> {
        let t = k.dim(2)?;
        ensure!(
            self.len + t <= self.capacity(),
            "the KV cache holds {} positions: {} more do not fit after {}",
            self.capacity(),
            t,
            self.len
        );
        let stored = |x: &Tensor| -> Result<Tensor> {
            Ok(match x.dtype() == self.dtype() {
                true => x.contiguous()?,
                false => kernels.to_dtype(x, self.dtype())?,
            })
        };
        self.k.slice_set(&stored(k)?, 2, self.len)?;
        self.v.slice_set(&stored(v)?, 2, self.len)?;
        self.len += t;
        Ok((
            self.k.narrow(2, 0, self.len)?,
            self.v.narrow(2, 0, self.len)?,
        ))
    }

    /// Forgets every position from `len` on (their bytes stay until
    /// overwritten).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}
