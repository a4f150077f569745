//! The generate experiment shown: per precision the tokens/s of prompt
//! processing and generation beside generation's bandwidth bound and the
//! matmul roofline, the speedups over fp32 (matmuls alone, pp, tg), where a
//! generated token's time goes, each precision's answer, and the line that
//! answers the reference lab's caveat with a whole model.

use super::{num, Records, Shown};
use crate::export::table::Table;
use crate::schema::{GenerateResults, ResultFile, TokenOpClass, WeightSource};
use crate::units::mib;

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

/// The generate tables and notes.
pub fn show(file: &ResultFile, r: &GenerateResults) -> Shown {
    let m = &r.model;
    let random = m.source == WeightSource::Random;
    let what = match (&m.file, &m.shape) {
        (Some(f), _) => format!("{} ({f})", m.name),
        (_, Some(s)) => format!("{s}, RANDOM WEIGHTS"),
        _ => m.name.clone(),
    };
    let title = format!(
        "generate: {what}, {:.0}M parameters, on {} ({}): pp{} and tg{} tokens/s",
        m.params as f64 / 1e6,
        file.device.label,
        file.device.name,
        r.pp_tokens,
        r.tg_tokens
    );
    let mut speed = Table::new(
        title,
        &[
            "precision",
            "pp tok/s",
            "tg tok/s",
            "tg bound",
            "% bound",
            "first token ms",
            "pp GFLOP/s",
            "matmuls GFLOP/s",
            "% matmul roofline",
            "weights MiB",
            "read/token MiB",
            "peak MiB",
        ],
    );
    let mut vs = Table::new(
        "against fp32 (fp32's median over the row's): the lab's one matmul, then the whole model",
        &["precision", "matmuls at pp", "matmuls at tg", "pp", "tg"],
    );
    let mut header = vec!["precision"];
    header.extend(TokenOpClass::ALL.iter().map(|c| c.name()));
    header.extend([
        "sum ms",
        "tg ms/token",
        "held back by (under half the bound)",
    ]);
    let mut parts = Table::new(
        "where a generated token's time goes: ms per token (share of the sum), each class timed alone",
        &header,
    );
    let mut notes = Vec::new();
    for row in &r.rows {
        let p = row.precision.clone();
        let Some(x) = &row.measured else {
            speed.row([
                p.clone(),
                format!("error: {}", row.error.as_deref().unwrap_or("")),
            ]);
            continue;
        };
        let mark = super::mark(x.tg.availability.as_ref());
        speed.row([
            p.clone(),
            format!("{:.1}", x.pp_tokens_per_s),
            format!("{:.1}{mark}", x.tg_tokens_per_s),
            opt(x.tg_bound_tokens_per_s, |v| format!("{v:.0}")),
            opt(x.tg_pct_of_bound, |v| format!("{v:.0}%")),
            format!("{:.1}", x.ttft.median_ms),
            format!("{:.1}", x.pp_gflop_per_s),
            format!("{:.1}", x.matmuls_pp_gflop_per_s),
            format!("{:.0}%", x.pp_pct_of_matmul_roofline),
            format!("{:.1}", mib(x.weight_bytes)),
            format!("{:.1}", mib(x.weight_bytes_per_token)),
            opt(x.peak_bytes.map(|b| b as f64), |b| {
                format!("{:.1}", b / 1048576.0)
            }),
        ]);
        if let Some(v) = &x.vs_fp32 {
            vs.row([
                p.clone(),
                format!("{:.2}x", v.matmuls_pp),
                format!("{:.2}x", v.matmuls_tg),
                format!("{:.2}x", v.pp),
                format!("{:.2}x", v.tg),
            ]);
        }
        let mut cells = vec![p.clone()];
        for class in TokenOpClass::ALL {
            cells.push(match x.parts.iter().find(|t| t.class == class) {
                Some(t) => format!(
                    "{:.2} ({:.0}%)",
                    t.ms_per_token,
                    100.0 * t.ms_per_token / x.parts_sum_ms
                ),
                None => "-".into(),
            });
        }
        cells.push(format!("{:.2}", x.parts_sum_ms));
        cells.push(format!("{:.2}", 1e3 / x.tg_tokens_per_s));
        cells.push(x.held_back_by.clone().unwrap_or_else(|| "-".into()));
        parts.row(cells);
        let a = &x.answer;
        let differs = match a.differs_from_fp32_at {
            Some(i) => format!(" [parts from fp32's at token {i}]"),
            None => String::new(),
        };
        match &a.text {
            Some(t) => notes.push(format!("{p} answer{differs}: {t:?}")),
            None => notes.push(format!(
                "{p} tokens{differs}: {:?}",
                &a.token_ids[..a.token_ids.len().min(16)]
            )),
        }
    }
    if random {
        notes.insert(
            0,
            format!(
                "RANDOM WEIGHTS (seed {}) at the shape of {}: speed and memory only; its tokens \
                 are ids, not text, and say nothing about a model's quality",
                r.seed, m.name
            ),
        );
    } else if let Some(u) = &r.prompt.user {
        notes.insert(
            0,
            format!(
                "prompt: {u:?} ({} tokens with the chat template)",
                r.prompt.token_ids.len()
            ),
        );
    }
    notes.push(format!(
        "tg bound: copy bandwidth measured here ({}) over the weight bytes a token reads; pp and \
         tg as llama-bench runs them (from an empty cache), median of {} runs after {} warm-up",
        opt(r.copy_gb_per_s, |v| format!("{v:.1} GB/s")),
        r.iters,
        r.warmup
    ));
    notes.extend(r.notes.iter().cloned());
    notes.extend(caveat(r));
    Shown {
        tables: vec![speed, vs, parts],
        notes,
    }
}

/// The reference lab's caveat answered with a whole model: per row, the
/// matmuls' speedup over fp32 beside prompt processing's and generation's.
pub fn caveat(r: &GenerateResults) -> Vec<String> {
    r.rows
        .iter()
        .filter(|row| row.precision != "fp32")
        .filter_map(|row| {
            let v = row.measured.as_ref()?.vs_fp32.as_ref()?;
            Some(format!(
                "{} against fp32, whole model: matmuls alone {:.2}x (pp shapes), prompt \
                 processing {:.2}x, generation {:.2}x",
                row.precision, v.matmuls_pp, v.pp, v.tg
            ))
        })
        .collect()
}

/// One record per precision: machine, experiment, precision, path, status,
/// pp and tg tokens/s, the bound and its fraction, time to first token, the
/// rates beside the matmul roofline, bytes, speedups, and each op class's ms
/// per token (`part_matmuls_ms`, ...).
pub fn records(machine: &str, r: &GenerateResults) -> Records {
    let mut header: Vec<String> = [
        "machine",
        "experiment",
        "model",
        "precision",
        "path",
        "status",
        "pp_tokens",
        "tg_tokens",
        "pp_tokens_per_s",
        "tg_tokens_per_s",
        "tg_bound_tokens_per_s",
        "tg_pct_of_bound",
        "ttft_ms",
        "pp_gflop_per_s",
        "matmuls_pp_gflop_per_s",
        "weight_bytes",
        "weight_bytes_per_token",
        "peak_bytes",
        "matmuls_pp_vs_fp32",
        "pp_vs_fp32",
        "tg_vs_fp32",
    ]
    .map(String::from)
    .to_vec();
    header.extend(
        TokenOpClass::ALL
            .iter()
            .map(|c| format!("part_{}_ms", c.name().replace('-', ""))),
    );
    let model = r
        .model
        .shape
        .clone()
        .unwrap_or_else(|| r.model.name.clone());
    let rows = r
        .rows
        .iter()
        .map(|row| {
            let m = row.measured.as_ref();
            let vs = m.and_then(|m| m.vs_fp32.as_ref());
            let mut cells = vec![
                machine.to_string(),
                "generate".into(),
                model.clone(),
                row.precision.clone(),
                format!("{:?}", row.path).to_lowercase(),
                if m.is_some() { "ok" } else { "error" }.into(),
                r.pp_tokens.to_string(),
                r.tg_tokens.to_string(),
                num(m.map(|m| m.pp_tokens_per_s)),
                num(m.map(|m| m.tg_tokens_per_s)),
                num(m.and_then(|m| m.tg_bound_tokens_per_s)),
                num(m.and_then(|m| m.tg_pct_of_bound)),
                num(m.map(|m| m.ttft.median_ms)),
                num(m.map(|m| m.pp_gflop_per_s)),
                num(m.map(|m| m.matmuls_pp_gflop_per_s)),
                num(m.map(|m| m.weight_bytes as f64)),
                num(m.map(|m| m.weight_bytes_per_token as f64)),
                num(m.and_then(|m| m.peak_bytes.map(|b| b as f64))),
                num(vs.map(|v| v.matmuls_pp)),
                num(vs.map(|v| v.pp)),
                num(vs.map(|v| v.tg)),
            ];
            for class in TokenOpClass::ALL {
                let part = m.and_then(|m| m.parts.iter().find(|x| x.class == class));
                cells.push(num(part.map(|x| x.ms_per_token)));
            }
            cells
        })
        .collect();
    Records { header, rows }
}
