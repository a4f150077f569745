//! Matmul rows shown: the terminal table `matmul`, `cpu_vs_gpu` and the
//! sweep print, and `matmul`'s tables and records.

use super::{num, Records, Shown};
use crate::export::table::Table;
use crate::schema::{MatmulResults, Measured, RatioInterval, ResultFile, Row, TimeSource};

/// The terminal table of benchmark rows.
pub fn rows_table(title: &str, rows: &[Row]) -> Table {
    let mut t = Table::new(
        title,
        &[
            "precision",
            "median ms",
            "GFLOP/s",
            "x fp32",
            "IQR/median",
            "GPU ms",
            "GPU x fp32",
            "% datasheet",
            "peak MiB",
            "peak x fp32",
            "payload MiB",
            "max rel err",
        ],
    );
    let opt =
        |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    // Against the fp32 row: speed (2.00x is twice as fast), peak (0.50x is half).
    let times = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
    // The ratio measured side by side, on its own clock's column, with its
    // interval; the other column fp32's own row's median over this row's.
    let beside = |m: &Measured, source: TimeSource| {
        let s = m.vs_fp32_side_by_side.as_ref()?;
        (s.time_source == source).then(|| match s.interval {
            Some(i) => format!("{:.2}x [{:.2}, {:.2}]", s.speedup, i.lo, i.hi),
            None => format!("{:.2}x (direction only)", s.speedup),
        })
    };
    for r in rows {
        let Some(m) = &r.measured else {
            t.row([r.precision.to_string(), r.not_measured()]);
            continue;
        };
        let spread = format!(
            "{:.1}%{}",
            100.0 * m.wall_ms.iqr_over_median,
            if m.wall_ms.noisy { " noisy" } else { "" },
        ) + super::mark(m.availability.as_ref());
        t.row([
            r.precision.to_string(),
            format!("{:.3}", m.median_ms),
            format!("{:.1}", m.gflops),
            beside(m, TimeSource::MedianMs).unwrap_or_else(|| times(m.speedup_vs_fp32_wall)),
            spread,
            opt(m.gpu_median_ms, 3),
            beside(m, TimeSource::GpuMedianMs).unwrap_or_else(|| times(m.speedup_vs_fp32_gpu)),
            opt(m.pct_of_datasheet, 1),
            opt(m.peak_mib, 1),
            times(m.peak_vs_fp32),
            format!("{:.1}", m.payload_mib),
            crate::units::sci(m.accuracy.max_rel_err, 2),
        ]);
    }
    t
}

/// `matmul`'s tables: its rows, then the CPU comparison a GPU run makes.
pub fn show(file: &ResultFile, r: &MatmulResults) -> Shown {
    let n = r.size;
    let d = &file.device;
    let mut tables = vec![rows_table(
        &format!("matmul {n}x{n} on {} ({})", d.label, d.name),
        &r.precisions,
    )];
    if let Some(cpu) = &r.cpu_fp32 {
        tables.push(rows_table(
            "the same fp32 matmul on the CPU",
            std::slice::from_ref(cpu),
        ));
    }
    let gpu_fp32 = r
        .precisions
        .iter()
        .find(|row| row.fp32_median_ms().is_some());
    let mut notes: Vec<String> = r
        .gpu_speedup_fp32
        .iter()
        .map(|&s| speedup_note(s, r.cpu_fp32.as_ref(), gpu_fp32))
        .collect();
    notes.push(vs_fp32_note(&r.precisions));
    Shown { tables, notes }
}

/// What the "x fp32" columns are: where a row was timed in turn with fp32's
/// (2.6), the ratio of that pass on its clock's column, with its interval;
/// else each row sampled on its own, one after the other.
fn vs_fp32_note(rows: &[Row]) -> String {
    let pass = rows
        .iter()
        .filter_map(|r| r.measured.as_ref()?.vs_fp32_side_by_side.as_ref())
        .next();
    match pass {
        Some(s) => format!(
            "{}: the row and fp32 timed in turn (A B A B, {} rounds after each row's own \
             sampling), fp32's median over the row's [its 95% bootstrap interval]{}",
            match s.time_source {
                TimeSource::GpuMedianMs => "GPU x fp32",
                TimeSource::MedianMs => "x fp32",
            },
            s.row.samples_ms().len(),
            match s.time_source {
                TimeSource::GpuMedianMs =>
                    "; x fp32 (wall): the medians of each row's own \
                                           sampling, one after the other (apart)",
                TimeSource::MedianMs => "",
            }
        ),
        None => "x fp32: each precision's row sampled on its own, one after the other, not in \
                 turn with fp32's, so drift between rows is inside the ratio: a direction \
                 without an interval"
            .into(),
    }
}

/// The line that states a GPU's speedup over the CPU at fp32 (`s`), with the
/// 95% bootstrap interval of the two rows' wall samples where both have
/// enough: the rows are sampled one after the other, so the interval holds
/// their spread, not the drift between them (small beside a ratio this size).
pub(super) fn speedup_note(s: f64, cpu: Option<&Row>, gpu: Option<&Row>) -> String {
    fn samples(r: Option<&Row>) -> Option<&[f64]> {
        Some(r?.measured.as_ref()?.samples_wall_ms.as_slice())
    }
    let interval = samples(gpu)
        .zip(samples(cpu))
        .and_then(|(g, c)| RatioInterval::of(g, c))
        .map_or(String::new(), |i| format!(" [{:.1}, {:.1}]", i.lo, i.hi));
    format!(
        "GPU is {s:.1}x{interval} faster than the CPU at fp32 (median wall time, device \
         synchronized; the two rows sampled one after the other)"
    )
}

/// Matmul rows in long format, one record per row: machine, experiment,
/// size, precision, device, status, median_ms, gflops, gpu_median_ms,
/// gpu_gflops, peak_mib, payload_mib, max_rel_err, n_samples, error.
pub fn records<'a>(
    machine: &str,
    experiment: &str,
    size: usize,
    rows: impl IntoIterator<Item = &'a Row>,
) -> Records {
    let header = [
        "machine",
        "experiment",
        "size",
        "precision",
        "memory_source",
        "status",
        "median_ms",
        "gflops",
        "gpu_median_ms",
        "gpu_gflops",
        "peak_mib",
        "payload_mib",
        "max_rel_err",
        "n_samples",
        "error",
    ];
    let rows = rows
        .into_iter()
        .map(|r| {
            let m = r.measured.as_ref();
            vec![
                machine.to_string(),
                experiment.to_string(),
                size.to_string(),
                r.precision.name().into(),
                r.memory_source.clone(),
                r.status.name().into(),
                num(m.map(|m| m.median_ms)),
                num(m.map(|m| m.gflops)),
                num(m.and_then(|m| m.gpu_median_ms)),
                num(m.and_then(|m| m.gpu_gflops)),
                num(m.and_then(|m| m.peak_mib)),
                num(m.map(|m| m.payload_mib)),
                num(m.map(|m| m.accuracy.max_rel_err)),
                m.map_or(0, |m| m.wall_ms.n).to_string(),
                r.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    Records::new(&header, rows)
}

/// matmul's view (no chart: the sweep draws the sizes).
impl super::View for MatmulResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(
            machine,
            "matmul",
            self.size,
            self.precisions.iter().chain(&self.cpu_fp32),
        ))
    }

    fn chart(&self, _file: &ResultFile) -> Option<String> {
        None
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        // One column per file in the README's matmul table.
        super::Section::Across
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Body;

    /// The GPU's speedup line carries the interval of the two rows' samples
    /// where both have them, and says the rows were sampled apart.
    #[test]
    fn the_speedup_line_has_the_rows_interval() {
        let file = crate::schema::read(std::path::Path::new(
            "tests/fixtures/amd-epyc-2t/matmul.json",
        ))
        .unwrap();
        let Body::Matmul(m) = &file.body else {
            panic!("not a matmul file")
        };
        let fp32 = m.precisions.iter().find(|r| r.fp32_median_ms().is_some());
        let line = speedup_note(1.0, fp32, fp32);
        assert!(line.contains("1.0x [1.0, 1.0] faster"), "{line}");
        assert!(line.contains("one after the other"), "{line}");
        let bare = speedup_note(2.0, None, fp32);
        assert!(bare.starts_with("GPU is 2.0x faster"), "{bare}");
    }
}
