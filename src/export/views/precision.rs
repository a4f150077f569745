//! The precision experiment shown: the formats' limits and what they do.

use super::{Records, Shown};
use crate::export::table::Table;
use crate::schema::{Accumulation, PrecisionResults as Precision, ResultFile, RoundTrip};
use crate::units::sci;

/// The precision tables.
pub fn show(r: &Precision) -> Shown {
    Shown {
        tables: tables(r),
        notes: Vec::new(),
    }
}

fn tables(r: &Precision) -> Vec<Table> {
    vec![
        limits(r),
        one_plus_eps(r),
        round_trips(
            "overflow: f16 tops out at 65504, bf16 keeps f32's range",
            &r.overflow,
        ),
        round_trips(
            "integers: bf16 has 8 significant bits, so above 256 it skips",
            &r.integers,
        ),
        point_one(r),
        sums(r),
    ]
}

/// Each format's limits from its bit layout, and whether the crate's
/// constants agree.
fn limits(r: &Precision) -> Table {
    let mut limits = Table::new(
        "float formats (values from the bit layout = torch.finfo)",
        &[
            "format",
            "bits",
            "exp bits",
            "mant bits",
            "max",
            "smallest normal",
            "smallest subnormal",
            "eps",
            "digits",
            "crate constants",
        ],
    );
    for f in &r.formats {
        let l = &f.limits;
        let agrees = match f.crate_differs_in.as_slice() {
            [] => "agree".to_string(),
            fields => format!(
                "differ in {} (max {})",
                fields.join(", "),
                f.crate_limits.max
            ),
        };
        limits.row([
            f.format.to_string(),
            l.bits.to_string(),
            l.exponent_bits.to_string(),
            l.mantissa_bits.to_string(),
            sci(l.max, 3),
            sci(l.smallest_normal, 3),
            sci(l.smallest_subnormal, 3),
            sci(l.eps, 3),
            l.decimal_digits.to_string(),
            agrees,
        ]);
    }
    limits
}

/// Values stored in each dtype, one column per input.
fn round_trips(title: &str, rows: &[RoundTrip]) -> Table {
    let first = rows.first().map_or(&[][..], |r| &r.input[..]);
    let inputs: Vec<String> = first.iter().map(|v| format!("{v}")).collect();
    let mut header = vec!["dtype".to_string()];
    header.extend(inputs);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(title, &header);
    for row in rows {
        let mut cells = vec![row.dtype.to_string()];
        cells.extend(row.stored.iter().map(|v| format!("{}", v.0)));
        t.row(cells);
    }
    t
}

/// Where 1 + eps stops rounding back to 1.
fn one_plus_eps(r: &Precision) -> Table {
    let mut one = Table::new(
        "1 + eps/2 rounds back to 1; 1 + eps does not",
        &["dtype", "1 + eps/2 stored", "1 + eps stored"],
    );
    for row in &r.one_plus_eps {
        one.row([
            row.dtype.to_string(),
            format!("{}", row.stored[0].0),
            format!("{}", row.stored[1].0),
        ]);
    }
    one
}

/// 0.1 as each dtype stores it.
fn point_one(r: &Precision) -> Table {
    let mut tenth = Table::new(
        "0.1 is stored inexactly",
        &["dtype", "stored", "abs error", "rel error"],
    );
    for p in &r.point_one {
        tenth.row([
            p.dtype.to_string(),
            format!("{:.20}", p.stored),
            sci(p.abs_error, 3),
            sci(p.rel_error, 3),
        ]);
    }
    tenth
}

/// A long sum, one add at a time and by Candle's reduction.
fn sums(r: &Precision) -> Table {
    let mut sums = Table::new(
        format!(
            "adding {} {} times (exact: {})",
            Accumulation::STEP,
            Accumulation::STEPS,
            Accumulation::STEP * Accumulation::STEPS as f64
        ),
        &["dtype", "one add at a time", "Candle sum()"],
    );
    for a in &r.accumulation {
        sums.row([
            a.dtype.to_string(),
            format!("{}", a.running_sum),
            format!("{}", a.candle_sum),
        ]);
    }
    sums
}

/// The precision experiment's view (no rows for a CSV, nothing to chart).
impl super::View for Precision {
    fn show(&self, _file: &ResultFile) -> Shown {
        show(self)
    }

    fn records(&self, _machine: &str) -> Option<Records> {
        None
    }

    fn chart(&self, _file: &ResultFile) -> Option<String> {
        None
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        // The same on every machine: read under the README's Files.
        super::Section::Across
    }
}
