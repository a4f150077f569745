//! `cpu_vs_gpu`'s tables: the CPU row, the GPU row (matmul's row table), and
//! the speedup. Its CSV records are matmul's.

use super::matmul::{rows_table, speedup_note};
use super::{Records, Shown};
use crate::schema::{CpuVsGpuResults, ResultFile};

/// `cpu_vs_gpu`'s tables: the CPU row, the GPU row, and the speedup.
pub fn show(file: &ResultFile, r: &CpuVsGpuResults) -> Shown {
    let n = r.size;
    let mut tables = vec![rows_table(
        &format!(
            "fp32 {n}x{n} on the CPU ({}, {} threads)",
            file.environment.cpu_model, r.cpu_threads
        ),
        std::slice::from_ref(&r.cpu),
    )];
    if let Some(gpu) = &r.gpu {
        tables.push(rows_table(
            &format!(
                "fp32 {n}x{n} on {} ({})",
                file.device.label, file.device.name
            ),
            std::slice::from_ref(gpu),
        ));
    }
    let mut notes: Vec<String> = r
        .gpu_skipped
        .iter()
        .map(|why| format!("GPU row skipped: {why}"))
        .collect();
    notes.push(match r.gpu_speedup_fp32 {
        Some(s) => speedup_note(s, Some(&r.cpu), r.gpu.as_ref()),
        None => "speedup: n/a (no GPU row)".to_string(),
    });
    Shown { tables, notes }
}

/// cpu_vs_gpu's view (no chart: two rows).
impl super::View for CpuVsGpuResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(super::matmul::records(
            machine,
            "cpu_vs_gpu",
            self.size,
            std::iter::once(&self.cpu).chain(&self.gpu),
        ))
    }

    fn chart(&self, _file: &ResultFile) -> Option<String> {
        None
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        // One row per file in the README's speedups table.
        super::Section::Across
    }
}
