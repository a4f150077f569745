//! scaling's tables, each narrow enough for a 120-column terminal: one per
//! axis with points (every row's points against their bounds, the spread of
//! the samples, a batch's rate per sequence, a depth's memory), where a tg
//! point's step goes, the KV cache's bytes per token, and how many
//! sequences fit beside each row's weights.

use crate::export::table::Table;
use crate::export::views::mark;
use crate::schema::{Axis, ScalingMeasured, ScalingPoint, ScalingResults, TokenOpClass};
use crate::units::{mib, size};

/// `v` at `digits` decimals, "-" where it is not a number (a rate of a
/// zero time): a table cell never says "NaN" or "inf".
pub(super) fn fixed(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "-".into()
    }
}

/// A point's samples' spread in tokens/s, slowest to fastest: "281-301".
fn spread(p: &ScalingPoint) -> String {
    let digits = usize::from(p.tokens_per_s_max < 100.0);
    format!(
        "{}-{}",
        fixed(p.tokens_per_s_min, digits),
        fixed(p.tokens_per_s_max, digits)
    )
}

/// A rate in a cell: one decimal under 1000 tokens/s, none from there (the
/// samples' spread is wider than a decimal).
fn rate(v: f64) -> String {
    fixed(v, usize::from(v.abs() < 1000.0))
}

/// The axis' table title and its columns beyond the common ones.
fn words(axis: Axis) -> (&'static str, &'static [&'static str]) {
    match axis {
        Axis::Depth => (
            "context depth: tokens/s after d tokens in the cache, against each point's bound",
            &["peak MiB"],
        ),
        Axis::Prompt => (
            "prompt length: prompt processing's tokens/s, against each point's bound",
            &[],
        ),
        Axis::Batch => (
            "batch: B sequences decoding together, every sequence's tokens/s and one's",
            &["per seq"],
        ),
    }
}

/// One table per axis that has points: row, point, tokens/s (with its
/// samples' spread), the bound, the share of it, what binds it, and the
/// axis' own column (a depth's peak memory, a batch's rate per sequence).
pub(super) fn axis_table(r: &ScalingResults, axis: Axis) -> Option<Table> {
    let (title, extra) = words(axis);
    let mut header = vec!["row", "point", "tok/s", "min-max"];
    header.extend(extra);
    header.extend(["bound", "% bound", "bound by"]);
    let mut t = Table::new(title, &header);
    t.align_left(&[1, header.len() - 1]);
    let mut any = false;
    for row in &r.rows {
        for p in row.measured.iter().flat_map(|m| &m.points) {
            if p.axis != axis {
                continue;
            }
            any = true;
            let mut cells = vec![
                row.precision.clone(),
                p.name(),
                rate(p.tokens_per_s) + mark(p.timed.availability.as_ref()),
                spread(p),
            ];
            match axis {
                Axis::Depth => cells.push(
                    p.peak_bytes
                        .map_or("-".into(), |b| format!("{:.1}", mib(b))),
                ),
                Axis::Batch => cells.push(rate(p.per_sequence_tokens_per_s)),
                Axis::Prompt => {}
            }
            cells.extend([
                rate(p.bound_tokens_per_s),
                fixed(p.pct_of_bound, 0) + "%",
                p.bound_by.clone(),
            ]);
            t.row(cells);
        }
    }
    any.then_some(t)
}

/// Where each tg point's step goes (the points that have a split): the
/// clean and the spanned step, the matmuls' and attention's time and the
/// rate each read its bytes at (the weights; the KV cache), the rest.
pub(super) fn parts_table(r: &ScalingResults) -> Option<Table> {
    let mut t = Table::new(
        "where a tg step goes: one sample more, its op classes timed (ms a step)",
        &[
            "row",
            "point",
            "ms/step",
            "spanned",
            "matmuls",
            "GB/s",
            "attention",
            "GB/s",
            "rest",
        ],
    );
    t.align_left(&[1]);
    let ms = |v: f64| fixed(v, 2);
    let gbs = |v: Option<f64>| v.map_or("-".into(), |g| fixed(g, 1));
    let mut any = false;
    for row in &r.rows {
        for p in row.measured.iter().flat_map(|m| &m.points) {
            let Some(s) = &p.step_parts else { continue };
            any = true;
            let part = |c: TokenOpClass| s.parts.iter().find(|q| q.class == c);
            let (mm, at) = (part(TokenOpClass::Matmuls), part(TokenOpClass::Attention));
            let named: f64 = [mm, at].iter().flatten().map(|q| q.ms_per_step).sum();
            t.row([
                row.precision.clone(),
                p.name(),
                ms(s.clean_ms_per_step),
                ms(s.spanned_ms_per_step),
                mm.map_or("-".into(), |q| ms(q.ms_per_step)),
                gbs(mm.and_then(|q| q.gb_per_s)),
                at.map_or("-".into(), |q| ms(q.ms_per_step)),
                gbs(at.and_then(|q| q.gb_per_s)),
                ms(s.spanned_ms_per_step - named),
            ]);
        }
    }
    any.then_some(t)
}

/// What the deepest tg point and the largest batch of a row wait on, from
/// their step's split: the matmuls' and attention's rates beside what the
/// point is held to (the ladder's read at its footprint; the compute
/// ceiling).
pub(super) fn step_notes(p: &str, m: &ScalingMeasured) -> Vec<String> {
    let split = |axis: Axis, x: fn(&ScalingPoint) -> usize| {
        m.points
            .iter()
            .filter(|q| q.axis == axis && q.test == crate::schema::Test::Tg)
            .filter(|q| q.step_parts.is_some())
            .max_by_key(|q| x(q))
    };
    let part = |q: &ScalingPoint, c: TokenOpClass| -> Option<(f64, Option<f64>, Option<f64>)> {
        let s = q.step_parts.as_ref()?.parts.iter().find(|x| x.class == c)?;
        Some((s.ms_per_step, s.gb_per_s, s.gflop_per_s))
    };
    let num = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| fixed(v, d));
    let mut out = Vec::new();
    if let Some(q) = split(Axis::Depth, |q| q.depth).filter(|q| q.depth > 0) {
        let (mm, at) = (
            part(q, TokenOpClass::Matmuls),
            part(q, TokenOpClass::Attention),
        );
        out.push(format!(
            "{p}: {}'s step: the matmuls {} ms reading the weights at {} GB/s, attention {} ms \
             reading the KV cache at {} GB/s, where the ladder reads {} GB/s at the step's \
             footprint ({})",
            q.name(),
            num(mm.map(|x| x.0), 2),
            num(mm.and_then(|x| x.1), 1),
            num(at.map(|x| x.0), 2),
            num(at.and_then(|x| x.1), 1),
            fixed(q.memory.gb_per_s, 1),
            q.memory.level
        ));
    }
    if let Some(q) = split(Axis::Batch, |q| q.batch).filter(|q| q.batch > 1) {
        let s = q.step_parts.as_ref().map_or(0.0, |s| s.spanned_ms_per_step);
        let (mm, at) = (
            part(q, TokenOpClass::Matmuls),
            part(q, TokenOpClass::Attention),
        );
        let named = mm.map_or(0.0, |x| x.0) + at.map_or(0.0, |x| x.0);
        let share = mm
            .and_then(|x| x.2)
            .map(|g| 100.0 * g / m.compute_peak_gflop_per_s);
        out.push(format!(
            "{p}: {}'s step ({} ms spanned): the matmuls {} ms at {} GFLOP/s ({}% of the \
             compute ceiling), attention {} ms reading the KV cache at {} GB/s, the rest {} ms",
            q.name(),
            fixed(s, 2),
            num(mm.map(|x| x.0), 2),
            num(mm.and_then(|x| x.2), 0),
            num(share, 0),
            num(at.map(|x| x.0), 2),
            num(at.and_then(|x| x.1), 1),
            fixed(s - named, 2)
        ));
    }
    out
}

/// The KV cache's size per token at each precision it can be kept in, and
/// at the model's whole context.
pub(super) fn kv_table(r: &ScalingResults) -> Option<Table> {
    if r.kv_cache.is_empty() {
        return None;
    }
    let context = r.model.context;
    let at_context = format!("MiB at {context} tokens");
    let mut t = Table::new(
        "KV cache: every layer's keys and values, per token",
        &[
            "KV precision",
            "bytes/token",
            "MiB/1024 tokens",
            &at_context,
        ],
    );
    for kv in &r.kv_cache {
        let b = kv.bytes_per_token;
        t.row([
            kv.precision.clone(),
            b.to_string(),
            format!("{:.1}", mib(b.saturating_mul(1024))),
            format!("{:.1}", mib(b.saturating_mul(context as u64))),
        ]);
    }
    Some(t)
}

/// Per row with a capacity: how many sequences of the model's context fit
/// beside its weights in the device's memory.
pub(super) fn capacity_table(r: &ScalingResults) -> Option<Table> {
    let rows: Vec<_> = r
        .rows
        .iter()
        .filter_map(|row| {
            let m = row.measured.as_ref()?;
            Some((row, m, m.capacity.as_ref()?))
        })
        .collect();
    let (_, _, first) = rows.first()?;
    let title = format!(
        "capacity: sequences of {} tokens that fit beside the weights in {}",
        first.context_tokens,
        size(first.device_bytes)
    );
    let mut t = Table::new(
        title,
        &[
            "row",
            "KV in",
            "KV bytes/token",
            "weights MiB",
            "MiB/sequence",
            "sequences",
        ],
    );
    for (row, m, c) in rows {
        t.row([
            row.precision.clone(),
            m.kv_precision.clone(),
            m.kv_bytes_per_token.to_string(),
            format!("{:.1}", mib(c.weight_bytes)),
            format!("{:.1}", mib(c.kv_bytes_per_sequence)),
            c.sequences.to_string(),
        ]);
    }
    Some(t)
}
