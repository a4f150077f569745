//! Precision: the limits of each float format (bits, max, smallest normal and
//! subnormal, eps, decimal digits), then what they mean, shown by converting
//! real Candle tensors on the selected device: 1 + eps/2 rounds back to 1,
//! 70000 overflows f16 but not bf16, bf16 skips integers above 256, 0.1 is
//! stored inexactly, and summing 0.01 ten thousand times drifts or stalls.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use candle_lab::bench::floats::{sci, FORMATS};
use candle_lab::cli::{finish, parse, result_file, Common};
use candle_lab::device::select;
use candle_lab::export::table::{print_tables, Table};
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{
    Accumulation, Body, FormatLimits, JsonF64, PointOne, PrecisionResults as Precision, RoundTrip,
};
use clap::Parser;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Limits of f64, f32, f16, bf16 and f8e4m3, and what they do to real numbers.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,
}

/// The formats the demonstrations convert to.
const DEMO_DTYPES: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];
/// Values around the f16 maximum (65504).
const OVERFLOW_VALUES: [f64; 3] = [65504.0, 65520.0, 70000.0];
/// Consecutive integers where bf16 (8 significant bits) starts skipping.
const INTEGERS: [f64; 5] = [256.0, 257.0, 258.0, 259.0, 260.0];
const STEP: f64 = 0.01;
const STEPS: usize = 10_000;

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn run(args: Args) -> Result<()> {
    if args.common.dry_run {
        // Nothing to plan beyond the flags: every table has fixed shapes.
        return args
            .common
            .dry_run("precision", &args, &"the fixed tables")
            .map(drop);
    }
    let (device, info) = select(args.common.device)?;
    let output = args.common.output("precision", &info)?;
    let results = compute(&device)?;
    let tables = tables(&results);
    output.save(&result_file(info, Body::Precision(results)))?;
    print_tables(&tables, &[], output.screen())
}

fn compute(dev: &Device) -> Result<Precision> {
    let formats = FORMATS
        .iter()
        .map(|f| {
            let (limits, crate_limits) = (f.limits(), f.crate_limits());
            FormatLimits {
                format: f.name.into(),
                limits,
                crate_limits,
                crate_differs_in: limits
                    .differences(&crate_limits)
                    .into_iter()
                    .map(String::from)
                    .collect(),
            }
        })
        .collect();
    let per_dtype = |values: &dyn Fn(DType) -> Vec<f64>| -> Result<Vec<RoundTrip>> {
        DEMO_DTYPES
            .iter()
            .map(|&dt| round_trip(&values(dt), dt, dev))
            .collect()
    };
    let one_plus_eps = per_dtype(&|dt| {
        let eps = eps(dt);
        vec![1.0 + eps / 2.0, 1.0 + eps]
    })?;
    let overflow = per_dtype(&|_| OVERFLOW_VALUES.to_vec())?;
    let integers = per_dtype(&|_| INTEGERS.to_vec())?;
    let point_one = DEMO_DTYPES
        .iter()
        .map(|&dt| {
            let stored = round_trip(&[0.1], dt, dev)?.stored[0].0;
            // Against 1/10 itself, not f64's 0.1: |stored - 1/10| = |10 stored - 1| / 10,
            // with 10 stored - 1 from one fused multiply-add, which keeps f64's own
            // error (5.6e-18) that `stored - 0.1` would cancel to 0.
            let abs_error = stored.mul_add(10.0, -1.0).abs() / 10.0;
            Ok(PointOne {
                dtype: dt.as_str().into(),
                stored,
                abs_error,
                rel_error: abs_error / 0.1,
            })
        })
        .collect::<Result<_>>()?;
    let accumulation = DEMO_DTYPES
        .iter()
        .map(|&dt| accumulate(dt, dev))
        .collect::<Result<_>>()?;
    Ok(Precision {
        formats,
        one_plus_eps,
        overflow,
        integers,
        point_one,
        accumulation,
    })
}

fn eps(dt: DType) -> f64 {
    FORMATS
        .iter()
        .find(|f| f.name == dt.as_str())
        .map_or(f64::EPSILON, |f| f.limits().eps)
}

/// `values` as an f64 tensor on `dev`, converted to `dtype` and back.
fn round_trip(values: &[f64], dtype: DType, dev: &Device) -> Result<RoundTrip> {
    let stored = Tensor::new(values, dev)?
        .to_dtype(dtype)?
        .to_dtype(DType::F64)?
        .to_vec1::<f64>()?;
    Ok(RoundTrip {
        dtype: dtype.as_str().into(),
        input: values.to_vec(),
        stored: stored.into_iter().map(JsonF64).collect(),
    })
}

fn accumulate(dtype: DType, dev: &Device) -> Result<Accumulation> {
    let step = Tensor::new(STEP, dev)?.to_dtype(dtype)?;
    let mut running = Tensor::zeros((), dtype, dev)?;
    for _ in 0..STEPS {
        running = (&running + &step)?;
    }
    let many = Tensor::full(STEP, STEPS, dev)?.to_dtype(dtype)?;
    let scalar = |t: Tensor| -> Result<f64> { Ok(t.to_dtype(DType::F64)?.to_scalar()?) };
    Ok(Accumulation {
        dtype: dtype.as_str().into(),
        running_sum: scalar(running)?,
        candle_sum: scalar(many.sum_all()?)?,
        exact: STEP * STEPS as f64,
    })
}

fn tables(r: &Precision) -> Vec<Table> {
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
    let round_trips = |title: &str, rows: &[RoundTrip]| {
        let inputs: Vec<String> = rows[0].input.iter().map(|v| format!("{v}")).collect();
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
    };
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
    let mut sums = Table::new(
        format!(
            "adding {STEP} {STEPS} times (exact: {})",
            STEP * STEPS as f64
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
    vec![
        limits,
        one,
        round_trips(
            "overflow: f16 tops out at 65504, bf16 keeps f32's range",
            &r.overflow,
        ),
        round_trips(
            "integers: bf16 has 8 significant bits, so above 256 it skips",
            &r.integers,
        ),
        tenth,
        sums,
    ]
}
