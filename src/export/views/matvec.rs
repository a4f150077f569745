//! The `kernels` matrix-vector rows shown: one table (per model shape,
//! matrix and weight type: the bound its bytes set, the suite's op and
//! Candle's, each's share of the bound and threads held), the notes that hold
//! the rows to their target (the suite's op never slower than Candle's at a
//! real model's shapes) and say how far each miss is, and their CSV records
//! in the kernels' long format.

use super::num;
use crate::export::table::Table;
use crate::schema::{Implementation, KernelsResults, MatvecRow, VariantMeasured};
use crate::units::mib;

fn ms(m: Option<&VariantMeasured>) -> String {
    m.map_or("-".into(), |m| {
        format!("{:.4}", m.time_ms) + super::mark(m.timed.availability.as_ref())
    })
}

fn pct(m: Option<&VariantMeasured>) -> String {
    m.map_or("-".into(), |m| format!("{:.0}%", m.pct_of_ceiling))
}

fn held(m: Option<&VariantMeasured>) -> String {
    m.and_then(|m| m.threads_held)
        .map_or("-".into(), |h| format!("{h:.2}"))
}

/// The matrix-vector rows' table, if there are any.
pub fn table(device: &str, threads: usize, r: &KernelsResults) -> Option<Table> {
    let first = r.matvec.first()?;
    let mut t = Table::new(
        format!(
            "matvec: y = x W^T at {} activation row(s), the suite's op and Candle's against the \
             bound the weight's bytes set (the ladder's read at their footprint, timed in turn \
             with the two ops) on {device}, {threads} threads; lab vs candle with its 95% interval",
            first.tokens
        ),
        &[
            "model",
            "matrix",
            "n x k",
            "weights",
            "MiB",
            "bound ms",
            "lab ms",
            "candle ms",
            "lab % bound",
            "candle % bound",
            "lab threads",
            "candle threads",
            "lab vs candle",
        ],
    );
    t.align_left(&[0, 1, 2, 3]);
    for row in &r.matvec {
        let (lab, candle) = (
            row.measured(Implementation::Lab),
            row.measured(Implementation::Candle),
        );
        t.row([
            row.model.clone(),
            row.matrix.clone(),
            format!("{} x {}", row.n, row.k),
            row.weights.clone(),
            format!("{:.2}", mib(row.weight_bytes)),
            format!("{:.4}", row.bound_ms),
            ms(lab),
            ms(candle),
            pct(lab),
            pct(candle),
            held(lab),
            held(candle),
            super::speedup(lab),
        ]);
    }
    Some(t)
}

fn name(row: &MatvecRow) -> String {
    format!("{} {} {}", row.model, row.matrix, row.weights)
}

/// The target (never slower than Candle's op at these shapes), met or missed
/// and by how much; the rows that reach their bound; failures.
pub fn notes(r: &KernelsResults) -> Vec<String> {
    let rows = r.matvec.iter().filter_map(|row| {
        let m = row.measured(Implementation::Lab)?;
        Some((name(row), m))
    });
    let mut notes: Vec<String> = slower_note("matvec target", rows).into_iter().collect();
    let over: Vec<String> = r
        .matvec
        .iter()
        .filter_map(|row| {
            let p = row.measured(Implementation::Lab)?.pct_of_ceiling;
            (p > 100.0).then(|| format!("{} {p:.0}%", name(row)))
        })
        .collect();
    if !over.is_empty() {
        notes.push(format!(
            "matvec: {} rows beat their bound ({}): a bound that is beaten is the wrong bound \
             (its kernel reads slower than the op's pattern, or it was read at a busier moment)",
            over.len(),
            over.join(", ")
        ));
    }
    for row in &r.matvec {
        for v in row.variants.iter().filter(|v| v.measured.is_none()) {
            notes.push(format!(
                "matvec {} {}: failed ({})",
                name(row),
                v.implementation.name(),
                v.error.as_deref().unwrap_or("no error recorded")
            ));
        }
    }
    notes
}

/// The rows in the kernels' long format: op "matvec", case "<model>
/// <matrix>", precision the weight type, shape "n x k x tokens", bytes the
/// weight's.
pub fn records(machine: &str, r: &KernelsResults) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for row in &r.matvec {
        let start = |implementation: &str| {
            vec![
                machine.to_string(),
                "kernels".into(),
                "matvec".into(),
                format!("{} {}", row.model, row.matrix),
                row.weights.clone(),
                implementation.to_string(),
                format!("{}x{}x{}", row.n, row.k, row.tokens),
                row.weight_bytes.to_string(),
            ]
        };
        let c = &row.ceiling;
        // No compute roof here: the roofline is the bound ("memory (L3)").
        let binds = format!(
            "memory ({})",
            c.bound.as_ref().map_or("copy", |b| b.level.as_str())
        );
        let mut ceiling = start("ceiling");
        ceiling.extend([
            num(Some(row.bound_ms)),
            format!("{:?}", c.time_source),
            num(Some(c.gb_per_s)),
            num(Some(100.0)),
            String::new(),
            String::new(),
            String::new(),
            binds.clone(),
        ]);
        out.push(ceiling);
        for v in &row.variants {
            let m = v.measured.as_ref();
            let mut rec = start(v.implementation.name());
            rec.extend([
                num(m.map(|m| m.time_ms)),
                m.map_or(String::new(), |m| format!("{:?}", m.time_source)),
                num(m.map(|m| m.gb_per_s)),
                num(m.map(|m| m.pct_of_ceiling)),
                num(m.and_then(|m| m.speedup_vs_candle)),
                num(m.map(|m| m.accuracy.max_rel_err)),
                num(m.map(|m| m.pct_of_ceiling)),
                binds.clone(),
            ]);
            out.push(rec);
        }
    }
    out
}

/// The share of its bound from which the note reads a row as held by the
/// memory level the bound names: the threshold the note states, not a
/// measurement (a row there moves about as fast as the ladder's own read).
const AT_BOUND_PCT: f64 = 80.0;

/// The "never slower than Candle's op" line over `rows` (a name and the
/// lab's measurement each), `what` naming the target. A row is slower when
/// its speed against Candle's is shown below 1 beyond the noise band
/// ([`crate::stats::BAND`], as `compare` says SLOW): its whole 95% interval
/// under 1/1.05 (the ratio itself, where it has no interval). Rows under 1
/// that are not shown slower are listed as such: two ops that both run at
/// memory's speed read 0.97x or 1.03x by the run's noise alone. A row shown
/// slower says how near its bound both ops ran, which is why it is slower:
/// sharing a saturated memory level, or held by costs that are not bytes.
pub(super) fn slower_note<'a>(
    what: &str,
    rows: impl Iterator<Item = (String, &'a VariantMeasured)>,
) -> Option<String> {
    let (mut slower, mut within, mut compared) = (Vec::new(), Vec::new(), 0);
    let floor = 1.0 / (1.0 + crate::stats::BAND);
    for (name, m) in rows {
        let Some(s) = m.speedup_vs_candle else {
            continue;
        };
        compared += 1;
        let hi = m.speedup_interval.map_or(s, |i| i.hi);
        if hi < floor {
            // Candle's share of the bound follows from the ratio: the
            // speedup is Candle's time over the lab's, so Candle's rate is
            // the lab's divided by it.
            let (lab, candle) = (m.pct_of_ceiling, m.pct_of_ceiling / s);
            slower.push(format!(
                "{name} ({s:.2}x; {lab:.0}% of its bound, Candle's {candle:.0}%)"
            ));
        } else if s < 1.0 {
            within.push(format!("{name} ({s:.2}x)"));
        }
    }
    let within = match within.is_empty() {
        true => String::new(),
        false => format!(
            "; under 1x but not shown slower (interval reaching the +-5% band): {}",
            within.join(", ")
        ),
    };
    (compared > 0).then(|| {
        if slower.is_empty() {
            format!(
                "{what} met: no lab kernel is shown slower than Candle's op ({compared} rows){within}"
            )
        } else {
            format!(
                "{what} (never slower than Candle's op) missed on {} of {compared} rows: {} \
                 (why: near {AT_BOUND_PCT:.0}% of the bound or above, both ops wait on the memory \
                 level it names; far under it, on each call's fixed costs or the kernel's own \
                 pace){within}",
                slower.len(),
                slower.join(", ")
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::RatioInterval;

    fn lab(speedup: f64, lo: f64, hi: f64) -> VariantMeasured {
        VariantMeasured {
            speedup_vs_candle: Some(speedup),
            speedup_interval: Some(RatioInterval { lo, hi }),
            ..crate::export::views::tests::measured_for_tests(1.0, 50.0)
        }
    }

    #[test]
    fn slower_is_an_interval_below_the_band_not_a_ratio_under_one() {
        let rows = [
            ("shown slower", lab(0.9, 0.85, 0.94)),
            ("within noise", lab(0.97, 0.93, 1.01)),
            ("faster", lab(1.3, 1.2, 1.4)),
        ];
        let note = |rows: &[(&str, VariantMeasured)]| {
            slower_note("t", rows.iter().map(|(n, m)| (n.to_string(), m))).unwrap()
        };
        assert_eq!(
            note(&rows),
            "t (never slower than Candle's op) missed on 1 of 3 rows: shown slower (0.90x; 50% \
             of its bound, Candle's 56%) (why: near 80% of the bound or above, both ops wait on \
             the memory level it names; far under it, on each call's fixed costs or the kernel's \
             own pace); under 1x but not shown slower (interval reaching the +-5% band): within \
             noise (0.97x)"
        );
        assert_eq!(
            note(&rows[1..]),
            "t met: no lab kernel is shown slower than Candle's op (2 rows); under 1x but not \
             shown slower (interval reaching the +-5% band): within noise (0.97x)"
        );
        assert_eq!(slower_note("t", std::iter::empty()), None);
    }
}
