//! The scaling experiment shown: per axis (context depth, prompt length,
//! batch) a compact table of every row's points against their bounds, the
//! batch's ridge, and the KV cache's bytes and capacity.

use super::{num, Records, Shown};
use crate::export::table::Table;
use crate::schema::{Axis, ResultFile, ScalingResults};

/// One table per axis that has points: row, point, tokens/s, bound, share, what binds it.
fn axis_table(r: &ScalingResults, axis: Axis) -> Option<Table> {
    let mut t = Table::new(
        format!("{}: tokens/s against each point's bound", axis.name()),
        &[
            "row",
            "point",
            "tok/s",
            "per seq",
            "bound",
            "% of bound",
            "bound by",
        ],
    );
    let mut any = false;
    for row in &r.rows {
        for p in row.measured.iter().flat_map(|m| &m.points) {
            if p.axis != axis {
                continue;
            }
            any = true;
            t.row([
                row.precision.clone(),
                p.name(),
                num(Some(p.tokens_per_s)),
                num(Some(p.per_sequence_tokens_per_s)),
                num(Some(p.bound_tokens_per_s)),
                format!("{:.0}%", p.pct_of_bound),
                p.bound_by.clone(),
            ]);
        }
    }
    any.then_some(t)
}

impl super::View for ScalingResults {
    fn show(&self, _file: &ResultFile) -> Shown {
        let tables = [Axis::Depth, Axis::Prompt, Axis::Batch]
            .into_iter()
            .filter_map(|a| axis_table(self, a))
            .collect();
        Shown {
            tables,
            notes: self.notes.clone(),
        }
    }

    fn records(&self, _machine: &str) -> Option<Records> {
        None
    }

    fn chart(&self, _file: &ResultFile) -> Option<String> {
        None
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        super::Section::Own(super::Own::new(
            "Cost as work grows: generation against context depth, prompt processing against \
             prompt length, and decode of several sequences at once against the batch, each \
             point against its own bound (memory or compute).",
        ))
    }
}
