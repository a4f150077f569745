//! generate's three tables, a row's cells in each: the speed table (tokens/s
//! beside the bounds and the roofline), each row against fp32 (with the
//! interval each ratio has, or "apart"), and where a token's time goes (shares
//! of the measured token, the remainder shown).

use super::verdicts::{self, Which};
use super::{opt, what};
use crate::export::table::Table;
use crate::export::views;
use crate::schema::{
    GenerateMeasured, GenerateResults, RatioInterval, ResultFile, Timed, TokenOpClass, VsFp32,
};
use crate::units::mib;

/// The speed table, its title the model and the run's token counts.
pub(super) fn speed_table(file: &ResultFile, r: &GenerateResults) -> Table {
    let m = &r.model;
    let title = format!(
        "generate: {}, {:.0}M parameters, on {} ({}): pp{} and tg{} tokens/s",
        what(m),
        m.params as f64 / 1e6,
        file.device.label,
        file.device.name,
        r.pp_tokens,
        r.tg_tokens
    );
    Table::new(
        title,
        &[
            "precision",
            "pp tok/s",
            "tg tok/s",
            "tg threads held",
            "tg bound (level)",
            "% bound",
            "DRAM bound",
            "first token ms",
            "pp GFLOP/s",
            "% roofline (bound by)",
            "pp vs matmuls alone",
            "weights MiB",
            "read/token MiB",
            "peak MiB",
        ],
    )
}

/// A measured row's cells in the speed table; a bound read from a ladder
/// point measured on a contended machine is marked " contended".
pub(super) fn speed_cells(r: &GenerateResults, p: &str, x: &GenerateMeasured) -> Vec<String> {
    let mark = views::mark(x.tg.availability.as_ref());
    let (level_mark, dram_mark) = (
        verdicts::mark(r, x, Which::Level),
        verdicts::mark(r, x, Which::Dram),
    );
    let level = x
        .tg_bound
        .as_ref()
        .map_or(String::new(), |b| format!(" ({})", b.level));
    vec![
        p.to_string(),
        format!("{:.1}", x.pp_tokens_per_s),
        format!("{:.1}{mark}", x.tg_tokens_per_s),
        views::threads_cell(x.tg.availability.as_ref()),
        opt(x.tg_bound_tokens_per_s, |v| {
            format!("{v:.0}{level}{level_mark}")
        }),
        opt(x.tg_pct_of_bound, |v| format!("{v:.0}%")),
        opt(
            x.tg_bound_dram_tokens_per_s,
            |v| match verdicts::dram_bounds(x) {
                true => format!("{v:.0}{dram_mark}"),
                false => format!("({v:.0}){dram_mark}"),
            },
        ),
        format!("{:.1}", x.ttft.median_ms),
        format!("{:.1}", x.pp_gflop_per_s),
        x.pp_roofline
            .as_ref()
            .map_or("-".into(), |r| format!("{:.0}% ({})", r.pct, r.bound_by)),
        format!("{:.0}%", x.pp_vs_matmuls_alone_pct),
        format!("{:.1}", mib(x.weight_bytes)),
        format!("{:.1}", mib(x.weight_bytes_per_token)),
        opt(x.peak_bytes.map(|b| b as f64), |b| {
            format!("{:.1}", b / 1048576.0)
        }),
    ]
}

/// The table of each row against fp32.
pub(super) fn vs_table() -> Table {
    Table::new(
        "against fp32 (fp32's median over the row's, with its 95% bootstrap interval; a \
         lab-kernels row against fp32 on the lab's kernels): the matmuls alone (each row's \
         timed on its own, so drift between them is inside that ratio), then the whole model \
         (pp and tg timed in turn with a copy of the fp32 model, A B A B; \"apart\": fp32's own \
         row, measured at another moment)",
        &["precision", "matmuls at pp", "matmuls at tg", "pp", "tg"],
    )
}

/// A row's cells against fp32 (`v`): the matmuls' ratios with the interval
/// of the two rows' own samples, pp's and tg's with the interval of the
/// samples taken side by side, or "(apart)" when they were not.
pub(super) fn vs_cells(
    r: &GenerateResults,
    p: &str,
    x: &GenerateMeasured,
    v: &VsFp32,
) -> Vec<String> {
    let base = r
        .rows
        .iter()
        .find(|b| Some(&b.precision) == v.against.as_ref())
        .and_then(|b| b.measured.as_ref());
    let with = |value: f64, t: fn(&GenerateMeasured) -> &Timed| match base {
        Some(b) => speedup_cell(value, t(x), t(b)),
        None => format!("{value:.2}x"),
    };
    let whole = |value: f64, i: Option<RatioInterval>, t: fn(&GenerateMeasured) -> &Timed| match (
        v.side_by_side,
        i,
    ) {
        (true, Some(i)) => format!("{value:.2}x [{:.2}, {:.2}]", i.lo, i.hi),
        (true, None) => format!("{value:.2}x (direction only)"),
        (false, _) => with(value, t) + " (apart)",
    };
    vec![
        p.to_string(),
        with(v.matmuls_pp, |m| &m.matmuls_pp),
        with(v.matmuls_tg, |m| &m.matmuls_tg),
        whole(v.pp, v.pp_interval, |m| &m.pp),
        whole(v.tg, v.tg_interval, |m| &m.tg),
    ]
}

/// The table of where a token's time goes.
pub(super) fn parts_table() -> Table {
    let mut header = vec!["precision"];
    header.extend(TokenOpClass::ALL.iter().map(|c| c.name()));
    header.extend([
        "outside the parts",
        "token ms",
        "ops/token",
        "host floor ms",
        "hand-offs/token",
        "timed",
        "held back by",
    ]);
    Table::new(
        "where a generated token's time goes: ms per token (share of the token), each class \
         timed inside the decode steps (spans, tg runs of their own) or, for candle's quantized \
         model, alone",
        &header,
    )
}

/// A row's parts of a token, as shares of the token they were measured in
/// (the spanned one, in the pass, else the clean one), and the remainder;
/// `None` for a row without parts.
pub(super) fn parts_cells(p: &str, x: &GenerateMeasured) -> Option<Vec<String>> {
    let sum_ms = x.parts_sum_ms?;
    let token = sum_ms
        + x.parts_remainder_ms
            .unwrap_or(1e3 / x.tg_tokens_per_s - sum_ms);
    // Spans that cost over a tenth of the clean token: times, no shares.
    let clean = x.parts_overhead_ms.map_or(token, |o| token - o);
    let costly = match x.parts_in_pass {
        true => crate::schema::spans_too_costly(x.parts_overhead_ms, clean),
        false => None,
    };
    let share = |ms: f64| match costly {
        Some(_) => format!("{ms:.2}"),
        None => format!("{ms:.2} ({:.0}%)", 100.0 * ms / token),
    };
    let mut cells = vec![p.to_string()];
    for class in TokenOpClass::ALL {
        cells.push(match x.parts.iter().find(|t| t.class == class) {
            Some(t) => share(t.ms_per_token),
            None => "-".into(),
        });
    }
    let rest = token - sum_ms;
    cells.push(share(rest));
    cells.push(format!("{token:.2}"));
    cells.push(opt(x.ops_per_token.map(|n| n as f64), |n| {
        format!("{n:.0}")
    }));
    cells.push(opt(x.host_floor_ms, |f| format!("{f:.2}")));
    cells.push(opt(x.hand_offs_per_token, |h| format!("{h:.0}")));
    cells.push(match (x.parts_in_pass, x.parts_overhead_ms) {
        (true, Some(o)) if costly.is_some() => {
            format!("in the pass (spans +{o:.2} ms: over a tenth of the token, no shares)")
        }
        (true, Some(o)) => format!("in the pass (spans +{o:.2} ms)"),
        _ => "alone".into(),
    });
    cells.push(x.held_back_by.clone().unwrap_or_else(|| "-".into()));
    Some(cells)
}

/// A speedup (`a`'s time over `b`'s: fp32's over the row's) with its 95%
/// bootstrap interval from the samples of `row` and `base`, or "(direction
/// only)" with too few of them.
fn speedup_cell(value: f64, row: &Timed, base: &Timed) -> String {
    match RatioInterval::of(row.samples_ms(), base.samples_ms()) {
        Some(i) => format!("{value:.2}x [{:.2}, {:.2}]", i.lo, i.hi),
        None => format!("{value:.2}x (direction only)"),
    }
}
