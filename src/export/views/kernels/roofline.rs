//! A kernels row against its roofline: the lower of the ladder's bound and
//! the row's compute roof ([`KernelRow::roofline`]), a variant's share of
//! it, the table's cell that names what binds, and the notes that hold the
//! target rows to it.

use super::TARGET_PCT;
use crate::schema::{Implementation, KernelRow, VariantMeasured};

/// A variant's share of its row's roofline ([`KernelRow::roofline`]).
pub fn pct_of_roofline(row: &KernelRow, m: &VariantMeasured) -> f64 {
    100.0 * m.gb_per_s / row.roofline().0
}

/// "88% exp", "91% DRAM": the share of the roofline and what binds it (the
/// compute roof's resource, or the memory level).
pub(super) fn roofline_cell(row: &KernelRow, m: Option<&VariantMeasured>) -> String {
    let Some(m) = m else { return "-".into() };
    let what = match &row.compute {
        Some(c) if c.gb_per_s < row.ceiling.gb_per_s => c.resource.clone(),
        _ => row
            .ceiling
            .bound
            .as_ref()
            .map_or("copy".into(), |b| b.level.clone()),
    };
    format!("{:.0}% {what}", pct_of_roofline(row, m))
}

/// The target case's target: every lab kernel at [`TARGET_PCT`] of its
/// roofline (the lower of its bound and its compute roof), each miss named
/// with what binds it.
pub(super) fn large_target(case: &str, large: &[&KernelRow]) -> Option<String> {
    let short: Vec<String> = large
        .iter()
        .filter_map(|row| {
            let m = row.measured(Implementation::Lab)?;
            let pct = pct_of_roofline(row, m);
            (pct < TARGET_PCT).then(|| {
                format!(
                    "{} {} {pct:.0}% of {} ({:.0} points short)",
                    row.op.name(),
                    row.precision,
                    row.roofline().1,
                    TARGET_PCT - pct
                )
            })
        })
        .collect();
    let measured_large = large
        .iter()
        .filter(|row| row.measured(Implementation::Lab).is_some())
        .count();
    (measured_large > 0).then(|| {
        if short.is_empty() {
            format!(
                "target met: every lab kernel reaches {TARGET_PCT:.0}% of its roofline (the lower \
                 of the ladder's bound at its footprint and its own rate on cached data) on {case}"
            )
        } else {
            format!(
                "target ({TARGET_PCT:.0}% of the roofline on {case}) missed by {} of \
                 {measured_large}: {}",
                short.len(),
                short.join(", ")
            )
        }
    })
}

/// The target rows whose compute roof is under their memory bound: what
/// they wait on is their own arithmetic, which faster memory would not
/// speed up.
pub(super) fn compute_bound(case: &str, large: &[&KernelRow]) -> Option<String> {
    let bound: Vec<String> = large
        .iter()
        .filter_map(|row| {
            let c = row
                .compute
                .as_ref()
                .filter(|c| c.gb_per_s < row.ceiling.gb_per_s)?;
            Some(format!(
                "{} {} ({}: {:.2} G elements/s in {}, {:.0}% of the memory bound)",
                row.op.name(),
                row.precision,
                c.resource,
                c.g_elements_per_s,
                c.level,
                100.0 * c.gb_per_s / row.ceiling.gb_per_s
            ))
        })
        .collect();
    (!bound.is_empty()).then(|| {
        format!(
            "compute-bound on {case} (the kernel on data its cores' caches hold is slower than \
             memory would feed it): {}",
            bound.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::precision::Precision;
    use crate::schema::{Bound, ComputeRoof, KernelCeiling, LadderKernel, TimeSource};
    use crate::schema::{KernelOp, DRAM_CASE};

    fn row(compute_gb_per_s: Option<f64>) -> KernelRow {
        let timed = crate::telemetry::timed_at(&[1.0; 3], &[]);
        KernelRow {
            op: KernelOp::Softmax,
            case: DRAM_CASE.into(),
            precision: Precision::F32,
            shape: vec![1, 8, 4096],
            elements: 8 * 4096,
            bytes_read: 8 * 4096 * 4,
            bytes_written: 8 * 4096 * 4,
            bytes_moved: 1 << 30,
            ceiling: KernelCeiling {
                call: String::new(),
                bytes_copied: 8 * 4096 * 4,
                time_ms: 1.0,
                time_source: TimeSource::MedianMs,
                gb_per_s: 30.0,
                bound: Some(Bound {
                    kernel: LadderKernel::Copy,
                    threads: 2,
                    footprint_bytes: 1 << 30,
                    level: "DRAM".into(),
                    gb_per_s: 30.0,
                    chunked: false,
                }),
                side_by_side: true,
                timed: timed.clone(),
            },
            compute: compute_gb_per_s.map(|gb_per_s| ComputeRoof {
                resource: "exp".into(),
                implementation: Implementation::Lab,
                shape: vec![1, 64, 4096],
                footprint_bytes: 2 << 20,
                level: "L2".into(),
                threads: 2,
                calls_per_sample: 1,
                g_elements_per_s: gb_per_s / 8.0,
                gb_per_s,
                timed: timed.clone(),
            }),
            variants: Vec::new(),
        }
    }

    fn measured(gb_per_s: f64) -> VariantMeasured {
        crate::export::views::tests::measured_for_tests(gb_per_s, 100.0 * gb_per_s / 30.0)
    }

    #[test]
    fn a_row_is_held_to_the_lower_of_memory_and_its_compute_roof() {
        // The kernel on cached data does 12 GB/s of the row's bytes: under
        // memory's 30, so compute binds, and 10.8 GB/s is 90% of it.
        let slow = row(Some(12.0));
        assert_eq!(slow.roofline(), (12.0, "compute (exp)".to_string()));
        assert_eq!(roofline_cell(&slow, Some(&measured(10.8))), "90% exp");
        // A roof over memory's bound: memory binds, named by its level.
        let fast = row(Some(45.0));
        assert_eq!(fast.roofline(), (30.0, "memory (DRAM)".to_string()));
        assert_eq!(roofline_cell(&fast, Some(&measured(27.0))), "90% DRAM");
        // No roof (a copy, a file before 2.12): the bound alone.
        assert_eq!(row(None).roofline().0, 30.0);
        // The target line names what binds a miss; the compute note the roof.
        let rows = [&slow];
        let mut missed = slow.clone();
        missed.variants = vec![crate::schema::KernelVariant {
            implementation: Implementation::Lab,
            call: String::new(),
            status: crate::schema::RowStatus::Ok,
            error: None,
            measured: Some(measured(6.0)),
        }];
        let line = large_target("the dram case", &[&missed]).unwrap();
        assert!(line.contains("softmax fp32 50% of compute (exp)"), "{line}");
        let note = compute_bound("the dram case", &rows).unwrap();
        assert!(
            note.contains("exp: 1.50 G elements/s in L2, 40% of the memory bound"),
            "{note}"
        );
    }
}
