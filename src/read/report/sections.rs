//! The README's `cpu_vs_gpu` section, a table across machines (the `matmul`
//! one and the shared Markdown helpers are in the parent module; the sections
//! drawn from a view's tables, in `shown`).

use super::{link, row, Source};
use crate::schema::Body;

/// Speedups: every `cpu_vs_gpu` file, and every matmul file that timed fp32 on
/// both a GPU and the CPU (a GPU run's CPU comparison, the reference lab's).
pub(super) fn cpu_vs_gpu(out: &mut String, cvg: &[&Source], matmul: &[&Source]) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in cvg {
        let Some(Body::CpuVsGpu(c)) = s.content_body() else {
            continue;
        };
        let f = s.facts();
        let speedup = match (c.gpu_speedup_fp32, &c.gpu_skipped) {
            (Some(x), _) => format!("{x:.1}x"),
            (None, Some(why)) => format!("n/a: {why}"),
            (None, None) => "n/a".into(),
        };
        rows.push(vec![
            s.machine.clone(),
            link(&s.file, &s.path()),
            c.size.to_string(),
            ms(c.cpu_fp32_ms),
            ms(c.gpu_fp32_ms),
            speedup,
            f.commit,
            f.date,
        ]);
    }
    for s in matmul {
        let entries = s.entries();
        let fp32 = |kind: &str| {
            entries
                .iter()
                .find(|e| e.precision == "fp32" && e.device_kind == kind)
        };
        let (Some(cpu), Some(gpu)) = (fp32("cpu"), fp32("cuda")) else {
            continue;
        };
        let f = s.facts();
        rows.push(vec![
            s.machine.clone(),
            format!("{} (its CPU comparison)", link(&s.file, &s.path())),
            gpu.size.to_string(),
            ms(Some(cpu.median_ms)),
            ms(Some(gpu.median_ms)),
            format!("{:.1}x", cpu.median_ms / gpu.median_ms),
            f.commit,
            f.date,
        ]);
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("## cpu_vs_gpu\n\n");
    out.push_str(
        "The same fp32 matmul on the CPU and the GPU: the speedup is the CPU median over the GPU \
         median.\n\n",
    );
    let header = [
        "machine",
        "file",
        "size n",
        "CPU fp32 ms",
        "GPU fp32 ms",
        "speedup",
        "commit",
        "date",
    ];
    row(out, &header.map(String::from));
    row(out, &vec!["---".to_string(); header.len()]);
    for r in &rows {
        row(out, r);
    }
    out.push('\n');
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

impl Source {
    /// The typed result file, when this is one.
    pub(super) fn result(&self) -> Option<&crate::schema::ResultFile> {
        match &self.content {
            super::Content::Result(f) => Some(f),
            _ => None,
        }
    }

    pub(super) fn content_body(&self) -> Option<&Body> {
        self.result().map(|f| &f.body)
    }
}
