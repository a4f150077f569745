//! The README's `kernels` section: per file, the suite's kernels beside
//! Candle's ops (or, in the PyTorch twin's file, PyTorch's ops), the composed
//! forms and the copy ceiling, row by row, the matrix-vector rows' table, the
//! lines that hold the run to its targets, and the chart of % of the ceiling
//! (drawn again from the JSON).

use anyhow::Result;

use super::{figure, link, row, Built, Source};
use crate::export::views::kernels::{chart, notes};
use crate::schema::{Body, Implementation, KernelRow, VariantMeasured};

fn ms(m: Option<&VariantMeasured>) -> String {
    m.map_or("-".into(), |m| {
        let mark = match &m.timed.availability {
            Some(a) if a.contended => " (contended)",
            _ => "",
        };
        format!("{:.4}{mark}", m.time_ms)
    })
}

fn own(r: &KernelRow) -> Option<&VariantMeasured> {
    r.measured(Implementation::Lab)
        .or_else(|| r.measured(Implementation::Pytorch))
}

pub(super) fn kernels(built: &mut Built, files: &[&Source]) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    built.readme.push_str("## kernels\n\n");
    built.readme.push_str(
        "The suite's own kernels (`src/kernels`) beside Candle's op, the same math from \
         primitive ops and a copy of the same bytes measured in the same run (the ceiling), per \
         op, shape and precision (docs/kernels.md). In PyTorch's file its op takes the kernel's \
         column.\n\n",
    );
    for s in files {
        let (Some(file), Some(Body::Kernels(r))) = (s.result(), s.content_body()) else {
            continue;
        };
        let f = s.facts();
        let out = &mut built.readme;
        out.push_str(&format!(
            "### {} on {}\n\nFrom {} ({}, commit {}, {}); {} warm-up and {} timed runs per \
             variant.\n\n",
            f.framework,
            s.machine,
            link(&s.file, &s.path()),
            f.device,
            f.commit,
            f.date,
            r.warmup,
            r.iters
        ));
        let header = [
            "op",
            "case",
            "precision",
            "MiB moved",
            "ceiling GB/s",
            "kernel ms",
            "Candle ms",
            "composed ms",
            "kernel % ceiling",
            "x Candle",
        ]
        .map(String::from);
        row(out, &header);
        row(out, &vec!["---".to_string(); header.len()]);
        for k in &r.rows {
            let mine = own(k);
            row(
                out,
                &[
                    k.op.name().into(),
                    k.case.clone(),
                    k.precision.to_string(),
                    format!("{:.2}", k.bytes_moved as f64 / (1 << 20) as f64),
                    format!("{:.1}", k.ceiling.gb_per_s),
                    ms(mine),
                    ms(k.measured(Implementation::Candle)),
                    ms(k.measured(Implementation::Composed)),
                    mine.map_or("-".into(), |m| format!("{:.0}%", m.pct_of_ceiling)),
                    mine.and_then(|m| m.speedup_vs_candle)
                        .map_or("-".into(), |x| format!("{x:.2}x")),
                ],
            );
        }
        out.push('\n');
        if let Some(t) = crate::export::views::matvec::table(&f.device, r.cpu_threads, r) {
            out.push_str(&t.markdown());
            out.push('\n');
        }
        for line in notes(r) {
            out.push_str(&format!("- {line}\n"));
        }
        out.push('\n');
        if let Ok(svg) = chart(file, r) {
            let path = s.chart_path();
            built.readme.push_str(&figure(
                &format!("kernels on {}", s.machine),
                &path,
                &s.path(),
            ));
            built.files.push((path, svg));
        }
    }
    Ok(())
}
