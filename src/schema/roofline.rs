//! A `kernels` row's roofline (2.12): the lower of the ladder's bound and
//! the row's compute roof ([`ComputeRoof`]), and what binds it.

use super::kernels::{ComputeRoof, KernelRow};

impl KernelRow {
    /// The row's roofline in its own GB/s, the lower of the ladder's bound
    /// and the compute roof, and what binds ("memory (DRAM)", "compute (exp)").
    pub fn roofline(&self) -> (f64, String) {
        if let Some(c) = self.binding_roof() {
            return (c.gb_per_s, format!("compute ({})", c.resource));
        }
        let level = self
            .ceiling
            .bound
            .as_ref()
            .map_or("copy", |b| b.level.as_str());
        (self.ceiling.gb_per_s, format!("memory ({level})"))
    }

    /// The compute roof where it binds: under the ceiling, and measured on
    /// no fewer bytes than the row moves (a smaller row sits in a nearer
    /// cache, which a roof read in the L2 does not bound).
    pub fn binding_roof(&self) -> Option<&ComputeRoof> {
        self.compute
            .as_ref()
            .filter(|c| c.gb_per_s < self.ceiling.gb_per_s && c.footprint_bytes <= self.bytes_moved)
    }
}
