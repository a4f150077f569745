//! The README's `cpu_vs_gpu`, `sweep` and roofline (from `memory`)
//! sections (the `matmul` one and the shared Markdown helpers are in the
//! parent module; the sections drawn from a view's tables, in `shown`).

use anyhow::Result;

use super::{figure, link, rate, row, Built, Source};
use crate::export::svg::{roofline_svg, RooflineDot};
use crate::export::views::sweep;
use crate::schema::{Body, SweepResults};

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

/// Per sweep file: its chart and CSV (drawn again from the JSON, so they match
/// it), how it was sampled, and GFLOP/s as size x precision.
pub(super) fn sweep(built: &mut Built, files: &[&Source]) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    built.readme.push_str("## sweep\n\n");
    built.readme.push_str(
        "Matmul throughput across sizes: one line per precision, GFLOP/s from the median wall \
         time, each point sampled until its median was known to the target or its time ran out.\n\n",
    );
    for s in files {
        let (Some(file), Some(Body::Sweep(r))) = (s.result(), s.content_body()) else {
            continue;
        };
        let stem = s.file.strip_suffix(".json").unwrap_or(&s.file);
        let csv_path = format!("{}/{stem}.csv", s.machine);
        let f = s.facts();
        let out = &mut built.readme;
        out.push_str(&format!("### {}: {}\n\n", s.machine, f.device));
        let state = if r.complete {
            "complete".to_string()
        } else {
            format!("interrupted: {} of {} points", r.points.len(), r.planned())
        };
        let o = &r.clock_overhead;
        out.push_str(&format!(
            "{} points ({state}), commit {}, {}, {}. Per point: {}. Clock overhead: median {:.6} ms \
             wall{}. Long-format CSV: {}.\n\n",
            r.points.len(),
            f.commit,
            f.date,
            f.framework,
            r.sampling,
            o.wall_median_ms,
            o.gpu_median_ms
                .map_or(String::new(), |g| format!(", {g:.6} ms CUDA events")),
            link(&format!("{stem}.csv"), &csv_path),
        ));
        match sweep::chart(&sweep::title(&file.device, &file.environment, r), r) {
            Ok(svg) => {
                let path = s.chart_path();
                out.push_str(&figure(
                    &format!("sweep on {}", s.machine),
                    &path,
                    &s.path(),
                ));
                built.files.push((path, svg));
            }
            Err(_) => out.push_str("No point was measured: no chart.\n\n"),
        }
        sweep_table(out, r);
        let csv = crate::export::csv::write(&sweep::records(&s.machine, r))?;
        built.files.push((csv_path, String::from_utf8(csv)?));
    }
    Ok(())
}

/// The roofline of every `memory` file: its memory-bound operations and its
/// matmul points against the ceilings that file measured.
pub(super) fn roofline(built: &mut Built, files: &[&Source]) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    built.readme.push_str(
        "## memory: the roofline

",
    );
    for s in files {
        let Some(Body::Memory(m)) = s.content_body() else {
            continue;
        };
        let r = &m.roofline;
        let dots: Vec<RooflineDot> = r
            .points
            .iter()
            .map(|p| RooflineDot {
                label: p.label.clone(),
                matmul: p.kind == "matmul",
                flop_per_byte: p.flop_per_byte,
                gflops: p.gflop_per_s,
            })
            .collect();
        let f = s.facts();
        let title = format!("roofline on {}", f.device);
        let out = &mut built.readme;
        out.push_str(&format!(
            "### {}: {}\n\nMeasured ceilings: {} {:.1} GB/s{}; commit {}, {}, {}.\n\n",
            s.machine,
            f.device,
            if m.ladder.is_some() {
                "the ladder's copy past the caches"
            } else {
                "copy"
            },
            r.memory_gb_per_s,
            r.compute_gflop_per_s.map_or(String::new(), |c| format!(
                ", fastest matmul {} GFLOP/s",
                rate(c)
            )),
            f.commit,
            f.date,
            f.framework,
        ));
        if let Some(ladder) = &m.ladder {
            let title = format!("bandwidth ladder on {}", f.device);
            if let Ok(svg) = crate::export::views::ladder::chart(&title, ladder) {
                let path = s.chart_path();
                out.push_str(&figure(
                    &format!("bandwidth ladder on {}", s.machine),
                    &path,
                    &s.path(),
                ));
                built.files.push((path, svg));
            }
        }
        match roofline_svg(&title, r.memory_gb_per_s, r.compute_gflop_per_s, &dots) {
            Ok(svg) => {
                let path = s.chart_path().replace(".svg", "-roofline.svg");
                out.push_str(&figure(
                    &format!("roofline on {}", s.machine),
                    &path,
                    &s.path(),
                ));
                built.files.push((path, svg));
            }
            Err(_) => out.push_str("No point was measured: no chart.\n\n"),
        }
    }
    Ok(())
}

/// GFLOP/s with sizes down and precisions across.
fn sweep_table(out: &mut String, r: &SweepResults) {
    let mut header = vec!["n".to_string()];
    header.extend(r.precisions.iter().map(|p| format!("{p} GFLOP/s")));
    row(out, &header);
    row(out, &vec!["---".to_string(); header.len()]);
    for &n in &r.sizes {
        let mut cells = vec![n.to_string()];
        for &p in &r.precisions {
            let point = r
                .points
                .iter()
                .find(|pt| pt.size == n && pt.row.precision == p);
            cells.push(match point {
                None => "-".into(),
                Some(pt) => {
                    let contended = pt
                        .row
                        .measured
                        .as_ref()
                        .and_then(|m| m.availability.as_ref());
                    let mark = if contended.is_some_and(|a| a.contended) {
                        " (contended)"
                    } else {
                        ""
                    };
                    pt.gflops()
                        .map_or(pt.row.status.name().into(), |g| rate(g) + mark)
                }
            });
        }
        row(out, &cells);
    }
    out.push('\n');
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
