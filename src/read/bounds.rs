//! Bounds that hold: every row a result file holds against a ceiling (a
//! `memory` op against the ladder, a `kernels` variant against its bound (its
//! matrix-vector rows too), a
//! `block` row against its footprint's, a `generate` row's generation against
//! its bandwidth bound) is listed here when it beats that ceiling by more
//! than [`BEATEN_PCT`] - 100. A ceiling an op beats is the wrong ceiling (its
//! threads, footprint or cache level), not a record: `report` says so, in
//! the README and on standard error. A `generate` row shows two bounds, its
//! level's and DRAM's, and is held to both.

use crate::export::views::generate::verdicts::{self, Which};
use crate::schema::{Body, ResultFile, BEATEN_PCT};

/// The rows of `file` above [`BEATEN_PCT`] of their bound, each as
/// "what: N% of its bound" (each body says which of its rows are held
/// against a ceiling: [`crate::schema::TimedRow::bounded`]), then a
/// `generate` row's DRAM bound ([`dram_beaten`]).
pub fn beaten(file: &ResultFile) -> Vec<String> {
    let rows = file.body.timed_rows().into_iter();
    let mut out: Vec<String> = rows
        .filter_map(|r| r.bounded)
        .filter(|b| b.pct > BEATEN_PCT)
        .map(|b| format!("{}: {:.0}% of its bound", b.what, b.pct))
        .collect();
    out.extend(dram_beaten(file));
    out
}

/// The `generate` rows above [`BEATEN_PCT`] of the DRAM bound they show
/// beside their level bound (the body's `bounded` is the level bound's
/// alone), named as the body names its rows ("generate fp32 tg", a further
/// model's after its key).
fn dram_beaten(file: &ResultFile) -> Vec<String> {
    let Body::Generate(g) = &file.body else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, m) in g.models().into_iter().enumerate() {
        for row in &m.rows {
            let Some(x) = &row.measured else { continue };
            let name = match i {
                0 => row.precision.clone(),
                _ => format!("{}: {}", m.model.key(), row.precision),
            };
            let dram = verdicts::shown(x)
                .into_iter()
                .filter(|s| s.0 == Which::Dram);
            out.extend(
                dram.filter(|s| s.2 > BEATEN_PCT)
                    .map(|(_, _, pct)| format!("generate {name} tg: {pct:.0}% of its DRAM bound")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Body;

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

    #[test]
    fn a_generate_row_over_its_dram_bound_is_named_though_its_level_bound_holds() {
        let path = std::path::Path::new("tests/fixtures/generate-candle-cpu.json");
        let mut file = crate::schema::read(path).unwrap();
        assert_eq!(
            beaten(&file),
            Vec::<String>::new(),
            "the fixture's rows hold"
        );
        let Body::Generate(g) = &mut file.body else {
            panic!("a generate file")
        };
        // fp32 at 15.1 tok/s, 45% of its level bound (33.1); a DRAM bound
        // of 7.3 tok/s (a contended reading, say) puts it at 207%.
        let x = g.rows[0].measured.as_mut().unwrap();
        assert!(x.tg_pct_of_bound.unwrap() < 50.0);
        x.tg_bound_dram_tokens_per_s = Some(7.3);
        assert_eq!(beaten(&file), ["generate fp32 tg: 207% of its DRAM bound"]);
        // A further model's row is named after its model.
        let Body::Generate(g) = &mut file.body else {
            panic!("a generate file")
        };
        let mut other = g.clone();
        other.model.file = Some("other.gguf".into());
        g.more_models = vec![other];
        assert_eq!(
            beaten(&file),
            [
                "generate fp32 tg: 207% of its DRAM bound",
                "generate other.gguf: fp32 tg: 207% of its DRAM bound"
            ]
        );
    }

    /// One matrix-vector row of a `kernels` run (the lab's variant at 93%).
    const MATVEC_BODY: &str = r#"{"warmup":1,"iters":5,"cpu_threads":2,"cache_bytes":314572800,"telemetry":{"source":null,"unavailable_reason":"the device is the CPU: there is no GPU state to read"},"cases":[],"rows":[],"matvec":[{"model":"smollm2-135m","matrix":"down","n":576,"k":1536,"tokens":1,"weights":"fp32","weight_bytes":3538944,"ceiling":{"call":"the ladder's read on 2 thread(s) at 3.4 MiB (L3)","bytes_copied":1769472,"time_ms":0.05014820000000001,"time_source":"median_ms","gb_per_s":70.56971137548307,"bound":{"kernel":"read","threads":2,"footprint_bytes":3538944,"level":"L3","gb_per_s":70.56971137548307},"median_ms":0.25079300000000004,"gpu_median_ms":null,"wall_ms":{"n":5,"median":0.25079300000000004,"mean":0.24926620000000002,"min":0.23058700000000001,"max":0.276912,"p10":0.23214500000000002,"p25":0.234482,"p75":0.25355700000000003,"p90":0.26757000000000003,"stddev":0.018388293985576797,"cv":0.07376970477977679,"iqr_over_median":0.07605874167141839,"noisy":false},"gpu_ms":null,"samples_wall_ms":[0.25355700000000003,0.23058700000000001,0.276912],"samples_gpu_ms":[],"gpu_before":null,"gpu_after":null,"availability":null},"bound_ms":0.05014820000000001,"variants":[{"implementation":"lab","call":"candle_lab::kernels::linear(x, w)","status":"ok","error":null,"measured":{"time_ms":0.053641999999999995,"time_source":"median_ms","gb_per_s":65.97337906864024,"pct_of_ceiling":93.48682002908168,"speedup_vs_candle":4.002451437306589,"accuracy":{"elements_checked":64,"max_rel_err":2.5808539311383654e-07,"mean_rel_err":1.940306623841932e-07},"calls_per_sample":3,"threads_held":1.816164832790568,"median_ms":0.16097799999999998,"gpu_median_ms":null,"wall_ms":{"n":5,"median":0.16097799999999998,"mean":0.1712538,"min":0.14785399999999999,"max":0.197689,"p10":0.1506256,"p25":0.154783,"p75":0.194965,"p90":0.1965994,"stddev":0.023374509421590015,"cv":0.13649045698016635,"iqr_over_median":0.24961174818919354,"noisy":true},"gpu_ms":null,"samples_wall_ms":[0.194965,0.16097799999999998,0.14785399999999999],"samples_gpu_ms":[],"gpu_before":null,"gpu_after":null,"availability":null}}]}]}"#;

    #[test]
    fn a_matrix_vector_row_over_its_bound_is_named() {
        let path = std::path::Path::new("tests/fixtures/intel-xeon-2t/block.json");
        let mut file = crate::schema::read(path).unwrap();
        let mut k: crate::schema::KernelsResults = serde_json::from_str(MATVEC_BODY).unwrap();
        file.body = Body::Kernels(k.clone());
        assert_eq!(beaten(&file), Vec::<String>::new(), "93% holds");
        let m = k.matvec[0].variants[0].measured.as_mut().unwrap();
        m.pct_of_ceiling = 116.0;
        file.body = Body::Kernels(k);
        assert_eq!(
            beaten(&file),
            ["kernels matvec smollm2-135m down fp32 t1 lab: 116% of its bound"]
        );
    }
}
