//! What a generate row's verdicts rest on, said where they could mislead:
//! every bound a row shows (its level bound, and its DRAM bound where the
//! weights live past the caches) held to [`BEATEN_PCT`], a bound read from a ladder point that was measured on a
//! contended machine marked beside it, and a ratio against Candle's
//! quantized rows named by its baseline (a scalar dot product or a
//! vectorized one). Plain readings of the file: nothing is re-measured.

use crate::schema::{GenerateMeasured, GenerateResults, LadderPoint, BEATEN_PCT};
use crate::units::mib;

/// Which of a row's two bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The ladder's read where the weights live (`tg_bound`).
    Level,
    /// The same past the caches (`tg_bound_dram_tokens_per_s`).
    Dram,
}

impl Which {
    /// As a message names it: "level bound", "DRAM bound".
    pub fn name(self) -> &'static str {
        match self {
            Which::Level => "level bound",
            Which::Dram => "DRAM bound",
        }
    }
}

/// Whether the row's DRAM figure bounds it: where its level bound is
/// memory's own (or it has none). Where the weights live in a cache a
/// token reads them from there, and the same bytes from memory are a
/// reference, not a bound the row is held to: SmolLM2's q8_0 weights (143
/// MB) in the 260 MiB L3 of a 2-core Xeon VM (f6m207) ran tg at 111% of
/// them, a warning that named no wrong bound.
pub fn dram_bounds(x: &GenerateMeasured) -> bool {
    x.tg_bound.as_ref().is_none_or(|b| b.level == "DRAM")
}

/// Each bound the row shows, with its tokens/s and tg's share of it: the
/// level bound, then the DRAM bound ([`dram_bounds`]).
pub fn shown(x: &GenerateMeasured) -> Vec<(Which, f64, f64)> {
    let level = x.tg_bound_tokens_per_s.map(|b| (Which::Level, b));
    let dram = x
        .tg_bound_dram_tokens_per_s
        .filter(|_| dram_bounds(x))
        .map(|b| (Which::Dram, b));
    [level, dram]
        .into_iter()
        .flatten()
        .filter(|(_, b)| *b > 0.0)
        .map(|(w, b)| (w, b, 100.0 * x.tg_tokens_per_s / b))
        .collect()
}

/// Two rates that are one reading (a rate carried through tokens/s and back
/// moves in its last bits only).
fn same_rate(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs())
}

/// The ladder point a row's bound was read from, where the file's ladder
/// holds it. The level bound names its point (kernel, threads, footprint,
/// parts); the DRAM bound is kept as tokens/s only, so its point is the one
/// of the level bound's kernel whose rate, over the bytes a token reads,
/// gives those tokens/s.
pub fn point<'a>(
    r: &'a GenerateResults,
    x: &GenerateMeasured,
    which: Which,
) -> Option<&'a LadderPoint> {
    let points = &r.ladder.as_ref()?.points;
    let level = x.tg_bound.as_ref();
    match which {
        Which::Level => {
            let b = level?;
            points.iter().find(|p| {
                (p.kernel, p.threads, p.footprint_bytes, p.chunked)
                    == (b.kernel, b.threads, b.footprint_bytes, b.chunked)
                    && same_rate(p.gb_per_s, b.gb_per_s)
            })
        }
        Which::Dram => {
            let gb = x.tg_bound_dram_tokens_per_s? * x.weight_bytes_per_token as f64 / 1e9;
            points
                .iter()
                .find(|p| level.is_none_or(|b| b.kernel == p.kernel) && same_rate(p.gb_per_s, gb))
        }
    }
}

/// The point behind `which`, where it was measured on a contended machine.
fn contended<'a>(
    r: &'a GenerateResults,
    x: &GenerateMeasured,
    which: Which,
) -> Option<&'a LadderPoint> {
    point(r, x, which).filter(|p| p.timed.availability.as_ref().is_some_and(|a| a.contended))
}

/// The mark a bound's cell carries when its ladder point was read on a
/// contended machine: " contended", or nothing.
pub(super) fn mark(r: &GenerateResults, x: &GenerateMeasured, which: Which) -> &'static str {
    match contended(r, x, which) {
        Some(_) => " contended",
        None => "",
    }
}

/// The rows above [`BEATEN_PCT`] of any bound they show, the level bound or
/// the DRAM bound, in one warning.
pub(super) fn above_bounds(r: &GenerateResults) -> Option<String> {
    let above: Vec<String> = r
        .rows
        .iter()
        .filter_map(|row| Some((&row.precision, row.measured.as_ref()?)))
        .flat_map(|(p, x)| {
            shown(x)
                .into_iter()
                .filter(|(_, _, pct)| *pct > BEATEN_PCT)
                .map(move |(w, b, pct)| {
                    let mark = mark(r, x, w);
                    format!(
                        "{p} tg at {pct:.0}% of its {} ({b:.0} tok/s{mark})",
                        w.name()
                    )
                })
        })
        .collect();
    (!above.is_empty()).then(|| {
        format!(
            "warning: above a bound it shows (over {BEATEN_PCT:.0}%: a bound that is beaten is \
             the wrong bound, its level or footprint, or a reading the machine's contention \
             slowed, not a record): {}",
            above.join(", ")
        )
    })
}

/// One warning per row whose bound (level, DRAM or both) was read from a
/// ladder point measured on a contended machine: the bound understates the
/// machine, the row's share of it overstates the row.
pub(super) fn contended_bounds(r: &GenerateResults) -> Vec<String> {
    r.rows
        .iter()
        .filter_map(|row| {
            let x = row.measured.as_ref()?;
            let said: Vec<String> = [Which::Level, Which::Dram]
                .into_iter()
                .filter_map(|w| {
                    let p = contended(r, x, w)?;
                    let reasons = p.timed.availability.as_ref().map_or(String::new(), |a| {
                        a.reasons.iter().map(|s| format!(": {s}")).collect()
                    });
                    Some(format!(
                        "its {} ({} on {} thread(s) at {:.0} MiB, {:.1} GB/s{reasons})",
                        w.name(),
                        p.kernel.name(),
                        p.threads,
                        mib(p.footprint_bytes),
                        p.gb_per_s
                    ))
                })
                .collect();
            (!said.is_empty()).then(|| {
                format!(
                    "warning: {}: {} came from a ladder point read on a contended machine: the \
                     bound understates this machine and the row's share of it overstates the row; \
                     run again on a quiet machine (--require-quiet)",
                    row.precision,
                    said.join(" and ")
                )
            })
        })
        .collect()
}

/// What a quantized row's ratio against Candle's is against, on the CPU
/// (candle-core's `quantized/k_quants.rs`): its Q4_1, Q5_0 and Q5_1 dot
/// products are scalar loops (no SIMD form on any architecture), its Q4_0,
/// Q8_0 and k-quant ones vectorized. `None` for a float row or a mixture
/// (whose types the precision does not name).
pub(super) fn candle_baseline(precision: &str) -> Option<String> {
    let t = precision.split(' ').next()?;
    let kind = match t {
        "q4_1" | "q5_0" | "q5_1" => "scalar",
        "q4_0" | "q8_0" | "q2_k" | "q3_k" | "q4_k" | "q5_k" | "q6_k" => "vectorized",
        _ => return None,
    };
    Some(format!(
        "against Candle's {kind} {} product",
        t.to_uppercase()
    ))
}

/// The kernels line's closing sentence on the CPU: what its quantized
/// ratios are against.
pub(super) const CANDLE_BASELINES: &str =
    "Candle's Q4_1, Q5_0 and Q5_1 CPU dot products are scalar, so a ratio against those rows \
     (or a mixture holding those types) mostly measures Candle's missing SIMD; its Q4_0, Q8_0 \
     and k-quant products are vectorized: q8_0's ratio is the fair comparison";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Availability, Body, Bound, Ladder, LadderKernel};

    /// A read point of the ladder at `gb_per_s`, contended or not.
    fn ladder_point(footprint: u64, gb_per_s: f64, contended: bool) -> LadderPoint {
        let mut timed = crate::telemetry::timed_at(&[1.0; 3], &[]);
        timed.availability = contended.then(|| {
            serde_json::from_value::<Availability>(serde_json::json!({
                "row_kind": "cpu", "wall_s": 1.0, "process_cpu_s": 1.0, "threads": 2,
                "threads_held": 2.0, "held_fraction": 1.0, "logical_cpus": 2,
                "others_cpu_pct": 0.0, "steal_pct": 29.0, "procs_running_before": 3,
                "procs_running_after": 3, "load_1m_before": 2.0, "load_1m_after": 2.0,
                "judged": true, "contended": true, "reasons": ["steal 29%"],
            }))
            .unwrap()
        });
        LadderPoint {
            kernel: LadderKernel::Read,
            threads: 2,
            footprint_bytes: footprint,
            level: if footprint > 1 << 28 { "DRAM" } else { "L3" }.into(),
            standard: true,
            bytes_moved: footprint,
            calls_per_sample: 1,
            time_per_call_ms: 1.0,
            gb_per_s,
            chunked: false,
            from_fastest_sample: true,
            timed,
        }
    }

    /// The test file's generate body with a ladder: its q4_1 row (tg 21.3
    /// tok/s, 1000 bytes a token) bound at L3 (20 GB/s at 64 MiB: 2e7
    /// tok/s) and at DRAM (`dram` GB/s at 1 GiB, contended or not).
    fn with_ladder(dram: f64, dram_contended: bool) -> GenerateResults {
        let Body::Generate(mut r) = super::super::tests::file().body else {
            panic!("not generate")
        };
        let (l3, memory) = (
            ladder_point(64 << 20, 20.0, false),
            ladder_point(1 << 30, dram, dram_contended),
        );
        let x = r.rows[0].measured.as_mut().unwrap();
        x.tg_bound = Some(Bound {
            kernel: l3.kernel,
            threads: l3.threads,
            footprint_bytes: l3.footprint_bytes,
            level: l3.level.clone(),
            gb_per_s: l3.gb_per_s,
            chunked: false,
        });
        x.tg_bound_tokens_per_s = Some(20.0 * 1e9 / 1000.0);
        x.tg_pct_of_bound = Some(100.0 * x.tg_tokens_per_s / 2e7);
        x.tg_bound_dram_tokens_per_s = Some(dram * 1e9 / 1000.0);
        r.ladder = Some(Ladder {
            caches: Vec::new(),
            pool_threads: 2,
            clock_overhead_ms: 0.0,
            points: vec![l3, memory],
        });
        r
    }

    #[test]
    fn a_row_above_its_dram_bound_is_warned_though_its_level_bound_holds() {
        // DRAM at 1e-5 GB/s: 10 tok/s, the row's 21.3 at 213% of it; the
        // level bound read at memory's own level (as a "796 (DRAM)" level
        // bound beside a DRAM bound of 486 once did).
        let at_dram = |dram: f64| {
            let mut r = with_ladder(dram, false);
            let x = r.rows[0].measured.as_mut().unwrap();
            x.tg_bound.as_mut().unwrap().level = "DRAM".into();
            r
        };
        let r = at_dram(1e-5);
        let line = above_bounds(&r).expect("a warning");
        assert!(
            line.ends_with(": q4_1 (stored) tg at 213% of its DRAM bound (10 tok/s)"),
            "{line}"
        );
        assert!(!line.contains("level bound"), "{line}");
        // Within 105% of both: no warning.
        assert_eq!(above_bounds(&at_dram(1e-4)), None);
        // Each bound shown, level first.
        let x = r.rows[0].measured.as_ref().unwrap();
        let which: Vec<Which> = shown(x).iter().map(|s| s.0).collect();
        assert_eq!(which, [Which::Level, Which::Dram]);
        // Weights in the L3: the DRAM figure is no bound on the row, and
        // passing it is no warning.
        let in_l3 = with_ladder(1e-5, false);
        assert_eq!(above_bounds(&in_l3), None);
        let x = in_l3.rows[0].measured.as_ref().unwrap();
        let which: Vec<Which> = shown(x).iter().map(|s| s.0).collect();
        assert_eq!(which, [Which::Level]);
    }

    #[test]
    fn a_bound_from_a_contended_ladder_point_is_marked_and_said() {
        let quiet = with_ladder(1e-5, false);
        let x = quiet.rows[0].measured.as_ref().unwrap();
        assert_eq!(
            point(&quiet, x, Which::Dram).map(|p| p.footprint_bytes),
            Some(1 << 30)
        );
        assert_eq!(
            point(&quiet, x, Which::Level).map(|p| p.footprint_bytes),
            Some(64 << 20)
        );
        assert_eq!(mark(&quiet, x, Which::Dram), "");
        assert!(contended_bounds(&quiet).is_empty());

        // The level bound at memory's own level, so that the DRAM bound
        // holds the row ([`dram_bounds`]).
        let mut r = with_ladder(1e-5, true);
        let m = r.rows[0].measured.as_mut().unwrap();
        m.tg_bound.as_mut().unwrap().level = "DRAM".into();
        let x = r.rows[0].measured.as_ref().unwrap();
        assert_eq!(
            (mark(&r, x, Which::Level), mark(&r, x, Which::Dram)),
            ("", " contended")
        );
        let said = contended_bounds(&r);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(
                "warning: q4_1 (stored): its DRAM bound (read on 2 thread(s) at 1024 MiB, \
                 0.0 GB/s: steal 29%) came from a ladder point read on a contended machine"
            ),
            "{said:?}"
        );
        // The beaten bound says its reading was contended.
        let line = above_bounds(&r).unwrap();
        assert!(line.ends_with("(10 tok/s contended)"), "{line}");
        // Both views carry it: the full one's notes and its speed table's
        // DRAM cell, and the compact one's notes.
        let mut f = super::super::tests::file();
        f.body = Body::Generate(r.clone());
        let full = super::super::show(&f, &r);
        assert!(
            full.notes.iter().any(|n| n == &said[0]),
            "{:#?}",
            full.notes
        );
        let speed = full.tables[0].markdown();
        assert!(speed.contains(" 10 contended "), "{speed}");
        let compact = super::super::compact::compact(&f, &r);
        assert!(compact.notes.iter().any(|n| n == &said[0]));
    }

    #[test]
    fn a_ratio_against_candle_names_its_baseline() {
        let b = |p: &str| candle_baseline(p);
        assert_eq!(
            b("q4_1 (stored)").as_deref(),
            Some("against Candle's scalar Q4_1 product")
        );
        assert_eq!(
            b("q5_0").as_deref(),
            Some("against Candle's scalar Q5_0 product")
        );
        assert_eq!(
            b("q8_0").as_deref(),
            Some("against Candle's vectorized Q8_0 product")
        );
        assert_eq!(b("q4_k_m"), None, "a mixture's types are not in its name");
        assert_eq!(b("fp32"), None);
    }
}
