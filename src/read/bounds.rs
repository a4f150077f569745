//! Bounds that hold: every row a result file holds against a ceiling (a
//! `memory` op against the ladder, a `kernels` variant against its bound, a
//! `block` row against its footprint's, a `generate` row's generation against
//! its bandwidth bound) is listed here when it beats that ceiling by more
//! than [`BEATEN_PCT`] - 100. A ceiling an op beats is the wrong ceiling (its
//! threads, footprint or cache level), not a record: `report` says so, in
//! the README and on standard error.

use crate::schema::{Body, ResultFile, BEATEN_PCT};

/// The rows of `file` above [`BEATEN_PCT`] of their bound, each as
/// "what: N% of its bound".
pub fn beaten(file: &ResultFile) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |what: String, pct: Option<f64>| {
        if let Some(p) = pct.filter(|p| *p > BEATEN_PCT) {
            out.push(format!("{what}: {p:.0}% of its bound"));
        }
    };
    match &file.body {
        Body::Memory(m) => {
            for r in &m.ops {
                check(
                    format!("memory {} {}", r.op, r.dtype_in),
                    Some(r.pct_of_ceiling),
                );
            }
        }
        Body::Kernels(k) => {
            for row in &k.rows {
                for v in &row.variants {
                    let pct = v.measured.as_ref().map(|m| m.pct_of_ceiling);
                    let what = format!(
                        "kernels {} {} {} {}",
                        row.op.name(),
                        row.case,
                        row.precision,
                        v.implementation.name()
                    );
                    check(what, pct);
                }
            }
        }
        Body::Block(b) => {
            for ph in &b.phases {
                for row in &ph.rows {
                    let pct = row.measured.as_ref().and_then(|m| m.pct_of_copy_ceiling);
                    check(format!("block {} {}", ph.phase.name(), row.precision), pct);
                }
            }
        }
        Body::Generate(g) => {
            for row in &g.rows {
                let pct = row.measured.as_ref().and_then(|m| m.tg_pct_of_bound);
                check(format!("generate {} tg", row.precision), pct);
            }
        }
        Body::Basics(_)
        | Body::Precision(_)
        | Body::Matmul(_)
        | Body::CpuVsGpu(_)
        | Body::Sweep(_)
        | Body::Overhead(_) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_over_its_bound_is_named_and_the_others_are_not() {
        // Relative to the repository root, where cargo and the packed GPU run
        // both run the tests (the build machine's path is not there).
        let path = std::path::Path::new("tests/fixtures/intel-xeon-2t/block.json");
        let mut file = crate::schema::read(path).unwrap();
        assert_eq!(
            beaten(&file),
            Vec::<String>::new(),
            "the fixture's rows hold"
        );
        let Body::Block(b) = &mut file.body else {
            panic!("a block file")
        };
        let m = b.phases[0].rows[0].measured.as_mut().unwrap();
        m.pct_of_copy_ceiling = Some(130.0);
        let name = format!(
            "block {} {}",
            b.phases[0].phase.name(),
            b.phases[0].rows[0].precision
        );
        assert_eq!(beaten(&file), [format!("{name}: 130% of its bound")]);
    }
}
