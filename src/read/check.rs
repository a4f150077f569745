//! What the schema cannot check, checked once for every reader (compare,
//! summary, report): the times and rates they show are positive, finite numbers
//! in a range a measurement can have, and a row's median is the median of the
//! samples it keeps (a verdict comes from the samples and a ratio from the
//! median: they must tell the same story). It reads the file's JSON before it is
//! typed, so that every layout is checked alike (schema 2.x, schema 1, the
//! reference lab's file) and a refusal names the row and the field: a `"NaN"`
//! median is a string here, where the typed reader would only see a row whose
//! measurements went missing.

use anyhow::{bail, Result};
use serde_json::{Map, Value};

use crate::stats::quantile_sorted;

/// A kind of number and the range a measured one can have.
struct Range {
    what: &'static str,
    lo: f64,
    hi: f64,
}

/// A time in milliseconds: from a nanosecond (no clock here resolves less) to
/// 10^9 ms (11.6 days, beyond any run). The ratio of two such times stays
/// within 10^-15..10^15, finite, and every cell stays short.
const MS: Range = Range {
    what: "a time in ms",
    lo: 1e-6,
    hi: 1e9,
};

/// GFLOP/s, GB/s and speedups: 10^15 GFLOP/s is a yottaflop, beyond any machine.
const RATE: Range = Range {
    what: "a rate",
    lo: 1e-9,
    hi: 1e15,
};

/// The fields the readers show or compute with, wherever they appear.
const FIELDS: [(&str, &Range); 11] = [
    ("median_ms", &MS),
    ("gpu_median_ms", &MS),
    ("cpu_fp32_ms", &MS),
    ("gpu_fp32_ms", &MS),
    ("samples_wall_ms", &MS),
    ("samples_gpu_ms", &MS),
    ("gflops", &RATE),
    ("gpu_gflops", &RATE),
    ("gpu_speedup_fp32", &RATE),
    ("memory_gb_per_s", &RATE),
    ("compute_gflop_per_s", &RATE),
];

/// Each median beside the samples it was taken from.
const MEDIANS: [(&str, &str); 2] = [
    ("median_ms", "samples_wall_ms"),
    ("gpu_median_ms", "samples_gpu_ms"),
];

/// How far a recorded median may sit from the median of its samples: the
/// writers compute it from the same samples, so only float printing differs.
const MEDIAN_TOLERANCE: f64 = 1e-6;

/// Refuses the first number of `file` that no measurement can give, naming
/// where it is: `/matmul/precisions/0 (fp32): median_ms is 0, not a time in ms
/// (1e-6 to 1e9)`.
pub fn check(file: &Value) -> Result<()> {
    walk(file, &mut String::new())
}

fn walk(value: &Value, at: &mut String) -> Result<()> {
    let len = at.len();
    match value {
        Value::Object(map) => {
            check_object(map, at)?;
            for (key, inner) in map {
                // The clock's own cost, measured back to back: zero is a fair reading.
                if key == "clock_overhead" {
                    continue;
                }
                at.push('/');
                at.push_str(key);
                walk(inner, at)?;
                at.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                at.push_str(&format!("/{i}"));
                walk(inner, at)?;
                at.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

fn check_object(map: &Map<String, Value>, at: &str) -> Result<()> {
    let row = || match map.get("precision").and_then(Value::as_str) {
        Some(p) => format!("{at} ({})", short(p)),
        None if at.is_empty() => "the top level".to_string(),
        None => at.to_string(),
    };
    for (key, range) in FIELDS {
        match map.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) if key.starts_with("samples_") => {
                for (i, item) in items.iter().enumerate() {
                    number(item, range)
                        .map_err(|why| anyhow::anyhow!("{}: {key}[{i}] {why}", row()))?;
                }
            }
            Some(other) => {
                number(other, range).map_err(|why| anyhow::anyhow!("{}: {key} {why}", row()))?;
            }
        }
    }
    for (median_key, samples_key) in MEDIANS {
        let (Some(median), Some(samples)) = (
            map.get(median_key).and_then(Value::as_f64),
            map.get(samples_key).and_then(Value::as_array),
        ) else {
            continue;
        };
        let mut sorted: Vec<f64> = samples.iter().filter_map(Value::as_f64).collect();
        if sorted.is_empty() {
            continue;
        }
        sorted.sort_by(f64::total_cmp);
        let of_samples = quantile_sorted(&sorted, 0.5);
        if (of_samples - median).abs() > MEDIAN_TOLERANCE * of_samples {
            bail!(
                "{}: {median_key} is {median}, but the median of its {} {samples_key} is {of_samples}",
                row(),
                sorted.len()
            );
        }
    }
    Ok(())
}

/// `Ok` when `value` is a number within `range`, else why not ("is 0, not a
/// time in ms (1e-6 to 1e9)").
fn number(value: &Value, range: &Range) -> Result<(), String> {
    let ok = value
        .as_f64()
        .is_some_and(|x| x.is_finite() && (range.lo..=range.hi).contains(&x));
    if ok {
        return Ok(());
    }
    Err(format!(
        "is {}, not {} ({:e} to {:e})",
        short(&value.to_string()),
        range.what,
        range.lo,
        range.hi
    ))
}

/// Text from a file, cut short: an error line stays one short line.
fn short(text: &str) -> String {
    const MAX: usize = 40;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(median: Value, samples: Value) -> Value {
        json!({"matmul": {"precisions": [
            {"precision": "fp32", "median_ms": 1.0, "samples_wall_ms": [1.0, 1.0, 1.0]},
            {"precision": "fp16", "median_ms": median, "samples_wall_ms": samples, "gflops": 5.0},
        ]}})
    }

    fn refusal(file: &Value) -> String {
        format!("{:#}", check(file).unwrap_err())
    }

    #[test]
    fn impossible_times_are_refused_by_row_and_field() {
        let at = "/matmul/precisions/1 (fp16): median_ms is";
        for (median, shown) in [
            (json!(0), "0"),
            (json!(-5), "-5"),
            (json!(1e308), "1e+308"),
            (json!("NaN"), "\"NaN\""),
            (json!("inf"), "\"inf\""),
            (json!(true), "true"),
        ] {
            let err = refusal(&row(median, json!([])));
            assert_eq!(
                err,
                format!("{at} {shown}, not a time in ms (1e-6 to 1e9)"),
                "{err}"
            );
        }
        let err = refusal(&row(json!(2.0), json!([2.0, -1.0, 2.0])));
        assert!(err.contains("samples_wall_ms[1] is -1.0"), "{err}");
        let mut file = row(json!(2.0), json!([]));
        file["matmul"]["precisions"][1]["gflops"] = json!(0.0);
        assert!(refusal(&file).contains("gflops is 0.0, not a rate"));
        let long = "x".repeat(1000);
        let err = refusal(&row(json!(long), json!([])));
        assert!(err.len() < 120, "{err}");
    }

    #[test]
    fn a_median_must_be_the_median_of_its_samples() {
        check(&row(json!(2.0), json!([1.0, 2.0, 9.0]))).unwrap();
        check(&row(json!(2.5), json!([1.0, 2.0, 3.0, 9.0]))).unwrap();
        let err = refusal(&row(json!(5.0), json!([10.0, 10.2, 9.8])));
        assert_eq!(
            err,
            "/matmul/precisions/1 (fp16): median_ms is 5, but the median of its 3 samples_wall_ms is 10"
        );
    }

    #[test]
    fn nulls_absent_fields_and_the_clocks_own_cost_pass() {
        check(&json!({"cpu_fp32_ms": null, "rows": [], "x": {"median": 0}})).unwrap();
        check(&json!({"clock_overhead": {"gpu_median_ms": 0.0}})).unwrap();
        let err = refusal(&json!({"cpu_vs_gpu": {"gpu_speedup_fp32": -1}}));
        assert!(
            err.starts_with("/cpu_vs_gpu: gpu_speedup_fp32 is -1"),
            "{err}"
        );
    }

    #[test]
    fn every_committed_fixture_passes() {
        for text in [
            include_str!("../../tests/fixtures/amd-epyc-2t/matmul.json"),
            include_str!("../../tests/fixtures/amd-epyc-2t/cpu_vs_gpu.json"),
            include_str!("../../tests/fixtures/amd-epyc-2t/basics.json"),
            include_str!("../../tests/fixtures/amd-epyc-2t/precision.json"),
            include_str!("../../tests/fixtures/reference-lab-gb10/week05-results-gb10.json"),
        ] {
            check(&serde_json::from_str(text).unwrap()).unwrap();
        }
    }
}
