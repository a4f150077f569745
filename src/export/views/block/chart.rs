//! The block's chart: where a layer's time goes, each op class's time per
//! call (its parts table) as a group of bars per phase and precision, so
//! that the matmuls' share is seen at a glance.

use crate::export::svg::{time_bars_svg, BarSeries};
use crate::schema::{BlockResults, OpClass, ResultFile};

/// The chart of `b`'s parts; `None` when no row was measured.
pub(super) fn chart(file: &ResultFile, b: &BlockResults) -> Option<String> {
    let mut categories = Vec::new();
    let mut values: Vec<Vec<Option<f64>>> = vec![Vec::new(); OpClass::ALL.len()];
    for ph in &b.phases {
        for (r, m) in ph
            .rows
            .iter()
            .filter_map(|r| Some((r, r.measured.as_ref()?)))
        {
            categories.push(format!("{} {}", ph.phase.name(), r.precision));
            for (i, class) in OpClass::ALL.iter().enumerate() {
                let part = m.parts.iter().find(|x| x.class == *class);
                values[i].push(part.map(|x| x.timed.rate_ms().0));
            }
        }
    }
    if categories.is_empty() {
        return None;
    }
    let series: Vec<BarSeries> = OpClass::ALL
        .iter()
        .zip(values)
        .map(|(c, values)| BarSeries {
            label: c.name().to_string(),
            values,
        })
        .collect();
    let title = format!(
        "where a block's time goes on {} (ms per call, by op class)",
        super::super::machine(file)
    );
    time_bars_svg(&title, &categories, &series).ok()
}
