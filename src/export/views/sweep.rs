//! The sweep shown: a terminal table, long-format CSV records and the chart
//! (GFLOP/s against n), all pure: results in, text out.

use anyhow::Result;

use super::{num, Records, Shown};
use crate::export::lines::{sweep_svg, SweepSeries};
use crate::export::table::Table;
use crate::schema::{
    DeviceInfo, DeviceKind, Environment, ResultFile, StopRule, SweepPoint, SweepResults,
};

/// One line per finished point, for stderr: progress that survives a log file.
pub fn point_line(p: &SweepPoint) -> String {
    let name = format!("{} {}", p.row.precision, p.size);
    match (&p.row.measured, p.stopped_by) {
        (Some(m), Some(rule)) => format!(
            "{name}: {:.3} ms, {:.1} GFLOP/s, {} samples, stopped by {}",
            m.median_ms,
            m.gflops,
            m.wall_ms.n,
            rule_name(rule)
        ),
        _ => format!("{name}: {}", p.row.not_measured()),
    }
}

/// A stop rule's name as the JSON spells it ("noise_target").
pub fn rule_name(rule: StopRule) -> String {
    serde_json::to_value(rule)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// The points in long format, one record per point: machine, experiment, size,
/// precision, status, median_ms, gflops, n_samples, stopped_by, and whether the
/// sweep was complete when the file was written (every record says so, as the
/// JSON's `complete` does, so a reader of the CSV alone sees an interrupted run).
/// A point that failed has empty numbers.
pub fn records(machine: &str, results: &SweepResults) -> Records {
    let header = [
        "machine",
        "experiment",
        "size",
        "precision",
        "status",
        "median_ms",
        "gflops",
        "n_samples",
        "stopped_by",
        "sweep_complete",
    ];
    let rows = results
        .points
        .iter()
        .map(|p| {
            let m = p.row.measured.as_ref();
            vec![
                machine.to_string(),
                "sweep".into(),
                p.size.to_string(),
                p.row.precision.name().into(),
                p.row.status.name().into(),
                num(m.map(|m| m.median_ms)),
                num(m.map(|m| m.gflops)),
                m.map_or(0, |m| m.wall_ms.n).to_string(),
                p.stopped_by.map(rule_name).unwrap_or_default(),
                results.complete.to_string(),
            ]
        })
        .collect();
    Records::new(&header, rows)
}

/// The chart's title: "matmul sweep on AMD EPYC (cpu, 2 threads)", and
/// "(interrupted: N of M points)" while the sweep is not complete.
pub fn title(device: &DeviceInfo, env: &Environment, results: &SweepResults) -> String {
    let place = match device.kind {
        DeviceKind::Cpu => format!("cpu, {} threads", env.compute_threads),
        DeviceKind::Cuda => device.label.clone(),
    };
    let done = if results.complete {
        String::new()
    } else {
        format!(
            " (incomplete: {} of {} points)",
            results.points.len(),
            results.planned()
        )
    };
    format!(
        "matmul sweep on {} ({place}), median wall time{done}",
        device.name
    )
}

/// GFLOP/s against n, one line per precision, with each precision's datasheet
/// peak (GPUs in `src/peaks.rs`) as a dashed line. Fails when no point has a
/// measurement yet.
pub fn chart(title: &str, results: &SweepResults) -> Result<String> {
    let series: Vec<SweepSeries> = results
        .precisions
        .iter()
        .map(|&p| {
            let of_p = || {
                results
                    .points
                    .iter()
                    .filter(move |pt| pt.row.precision == p)
            };
            SweepSeries {
                label: p.name().to_string(),
                points: of_p()
                    .filter_map(|pt| Some((pt.size, pt.gflops()?)))
                    .collect(),
                peak_gflops: of_p()
                    .find_map(|pt| pt.row.measured.as_ref()?.datasheet_tflops)
                    .map(|t| t * 1e3),
            }
        })
        .collect();
    sweep_svg(title, &series)
}

/// The terminal table: one row per point.
pub fn table(title: &str, results: &SweepResults) -> Table {
    let mut t = Table::new(
        title,
        &[
            "size",
            "precision",
            "median ms",
            "GFLOP/s",
            "IQR/median",
            "samples",
            "stopped by",
            "seconds",
        ],
    );
    for p in &results.points {
        let (Some(m), Some(rule)) = (&p.row.measured, p.stopped_by) else {
            t.row([
                p.size.to_string(),
                p.row.precision.to_string(),
                p.row.not_measured(),
            ]);
            continue;
        };
        t.row([
            p.size.to_string(),
            p.row.precision.to_string(),
            format!("{:.3}", m.median_ms),
            format!("{:.1}", m.gflops),
            format!("{:.1}%", 100.0 * m.wall_ms.iqr_over_median)
                + super::mark(m.availability.as_ref()),
            m.wall_ms.n.to_string(),
            rule_name(rule),
            p.sampling_s.map_or("-".into(), |s| format!("{s:.1}")),
        ]);
    }
    t
}

/// The sweep's tables (every point, then GFLOP/s by size and precision),
/// and under them how it was sampled and the clock's own overhead.
pub fn show(file: &ResultFile, r: &SweepResults) -> Shown {
    let o = &r.clock_overhead;
    let state = if r.complete {
        "complete".to_string()
    } else {
        format!("interrupted: {} of {} points", r.points.len(), r.planned())
    };
    Shown {
        tables: vec![
            table(&title(&file.device, &file.environment, r), r),
            by_size(r),
        ],
        notes: vec![
            format!(
                "{} points ({state}); per point: {}",
                r.points.len(),
                r.sampling
            ),
            format!(
                "clock overhead (an empty sample through the same path, {} samples): median {:.6} ms wall{}",
                o.samples,
                o.wall_median_ms,
                o.gpu_median_ms
                    .map_or(String::new(), |g| format!(", {g:.6} ms CUDA events"))
            ),
        ],
    }
}

/// GFLOP/s with sizes down and precisions across: the chart's numbers.
fn by_size(r: &SweepResults) -> Table {
    let mut header = vec!["n".to_string()];
    header.extend(r.precisions.iter().map(|p| format!("{p} GFLOP/s")));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new("GFLOP/s by size and precision", &header);
    for &n in &r.sizes {
        let mut cells = vec![n.to_string()];
        for &p in &r.precisions {
            let point = r
                .points
                .iter()
                .find(|pt| pt.size == n && pt.row.precision == p);
            cells.push(match point {
                None => "-".into(),
                Some(pt) => match (pt.gflops(), &pt.row.measured) {
                    (Some(g), Some(m)) => format!("{g:.1}") + super::mark(m.availability.as_ref()),
                    _ => pt.row.status.name().into(),
                },
            });
        }
        t.row(cells);
    }
    t
}

/// The sweep's view.
impl super::View for SweepResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(machine, self))
    }

    fn chart(&self, file: &ResultFile) -> Option<String> {
        // GFLOP/s against size.
        chart(&title(&file.device, &file.environment, self), self).ok()
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        super::Section::Own(super::Own::new(
            "Matmul throughput across sizes: one line per precision, GFLOP/s from the median \
             wall time, each point sampled until its median was known to the target or its time \
             ran out.",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sweep::tests::{failed, point, results};
    use crate::formulas::gflops;
    use crate::precision::Precision;

    #[test]
    fn csv_has_one_row_per_point_in_long_format() {
        let r = results(vec![
            point(64, Precision::F32, 0.5, None),
            point(64, Precision::Bf16, 2.0, None),
            failed(1024, Precision::F32),
        ]);
        let text = crate::export::csv::write(&records("amd-epyc-2t", &r)).unwrap();
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
        lines[0],
        "machine,experiment,size,precision,status,median_ms,gflops,n_samples,stopped_by,sweep_complete"
    );
        assert_eq!(lines.len(), 1 + 3);
        let gflops = gflops(64, 0.5);
        assert_eq!(
            lines[1],
            format!("amd-epyc-2t,sweep,64,fp32,ok,0.5,{gflops},3,noise_target,false")
        );
        assert!(
            lines[2].starts_with("amd-epyc-2t,sweep,64,bf16,ok,2.0,"),
            "{}",
            lines[2]
        );
        assert_eq!(lines[3], "amd-epyc-2t,sweep,1024,fp32,error,,,0,,false");
        // Read back with the same crate: ten fields a row.
        let mut reader = ::csv::Reader::from_reader(text.as_bytes());
        assert!(reader.records().all(|r| r.unwrap().len() == 10));
    }

    /// The text nodes of an SVG document.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
            .collect()
    }

    #[test]
    fn chart_draws_one_line_per_precision_and_gpu_peaks() {
        let r = results(vec![
            point(64, Precision::F32, 0.5, None),
            point(1024, Precision::F32, 10.0, None),
            point(64, Precision::Bf16, 2.0, None),
            failed(1024, Precision::Bf16),
        ]);
        let svg = chart("matmul sweep on X (cpu, 2 threads)", &r).unwrap();
        let t = texts(&svg);
        for want in [
            "matmul sweep on X (cpu, 2 threads)",
            "fp32",
            "bf16",
            "throughput (GFLOP/s)",
        ] {
            assert!(t.contains(&want), "{want} missing in {t:?}");
        }
        // fp32's markers are circles: two points and the legend's.
        assert_eq!(svg.matches("<circle").count(), 2 + 1);
        assert!(!svg.contains("datasheet peak"), "no peak on a CPU");
        let mut gpu = r.clone();
        gpu.points = vec![point(1024, Precision::Bf16, 0.01, Some(989.5))];
        let svg = chart("t", &gpu).unwrap();
        assert!(texts(&svg).contains(&"bf16 datasheet peak"));
        // Nothing measured yet: no chart.
        assert!(chart("t", &results(vec![failed(64, Precision::F32)])).is_err());
    }

    #[test]
    fn title_names_the_device_and_the_table_every_point() {
        let (_, info) = crate::device::select(crate::device::DeviceArg::Cpu).unwrap();
        let r = results(vec![
            point(64, Precision::F32, 0.5, None),
            failed(1024, Precision::F32),
        ]);
        let t = title(&info, &crate::env::capture(), &r);
        assert!(
            t.starts_with("matmul sweep on ") && t.contains("(cpu, "),
            "{t}"
        );
        // Not complete: the title says so, as the JSON and the CSV do.
        assert!(
            t.ends_with(&format!("(incomplete: 2 of {} points)", r.planned())),
            "{t}"
        );
        let text = table("sweep", &r).to_string();
        assert!(
            text.contains("noise_target") && text.contains("error: CUDA_ERROR_OUT_OF_MEMORY"),
            "{text}"
        );
    }
}
