//! The README's `generate` section: per machine and model, each precision's
//! prompt processing and generation tokens/s beside generation's bandwidth
//! bound, the speedups over fp32 (matmuls alone, pp, tg), and what holds a
//! row back where it reaches under half its bound.

use super::{link, row, Built, Source};
use crate::schema::{Body, GenerateResults, WeightSource};

/// Every `generate` file, one table each.
pub(super) fn generate(built: &mut Built, files: &[&Source]) {
    let runs: Vec<(&Source, &GenerateResults)> = files
        .iter()
        .filter_map(|s| match s.content_body() {
            Some(Body::Generate(g)) => Some((*s, g)),
            _ => None,
        })
        .collect();
    if runs.is_empty() {
        return;
    }
    let out = &mut built.readme;
    out.push_str("## generate\n\n");
    out.push_str(
        "A whole Llama model per precision (docs/generate.md): prompt processing (pp) and \
         generation (tg) tokens/s as llama-bench measures them, generation against the bound \
         that reading every weight once per token at the measured copy bandwidth sets, and the \
         speedups over fp32 beside the matmuls' alone.\n\n",
    );
    for (s, g) in runs {
        let f = s.facts();
        let m = &g.model;
        let what = match m.source {
            WeightSource::File => format!("{} ({})", m.name, m.file.as_deref().unwrap_or("")),
            WeightSource::Random => format!(
                "random weights at the shape {} (no text)",
                m.shape.as_deref().unwrap_or("")
            ),
        };
        out.push_str(&format!(
            "### {} on {}: {what}\n\nFrom {} ({}, commit {}, {}); pp{}, tg{}.\n\n",
            f.framework,
            s.machine,
            link(&s.file, &s.path()),
            f.device,
            f.commit,
            f.date,
            g.pp_tokens,
            g.tg_tokens
        ));
        let header = [
            "precision",
            "pp tok/s",
            "tg tok/s",
            "tg bound",
            "% bound",
            "matmuls x fp32",
            "pp x fp32",
            "tg x fp32",
            "held back by",
        ]
        .map(String::from);
        row(out, &header);
        row(out, &vec!["---".to_string(); header.len()]);
        let times = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}x"));
        for r in &g.rows {
            let Some(x) = &r.measured else {
                row(out, &[r.precision.clone(), "error".into()]);
                continue;
            };
            let mark = match &x.tg.availability {
                Some(a) if a.contended => " (contended)",
                _ => "",
            };
            let vs = x.vs_fp32.as_ref();
            row(
                out,
                &[
                    r.precision.clone(),
                    format!("{:.1}", x.pp_tokens_per_s),
                    format!("{:.1}{mark}", x.tg_tokens_per_s),
                    x.tg_bound_tokens_per_s
                        .map_or("-".into(), |v| format!("{v:.0}")),
                    x.tg_pct_of_bound.map_or("-".into(), |v| format!("{v:.0}%")),
                    times(vs.map(|v| v.matmuls_pp)),
                    times(vs.map(|v| v.pp)),
                    times(vs.map(|v| v.tg)),
                    x.held_back_by.clone().unwrap_or_else(|| "-".into()),
                ],
            );
        }
        out.push('\n');
    }
}
