//! Matmul: how precision changes the speed and memory of one square matrix
//! multiply. Times C = A x B per precision on the selected device (warm-up,
//! synchronized samples, CUDA events on a GPU), with peak memory, GFLOP/s, the
//! share of the datasheet peak, and accuracy against f64. On a GPU it also times
//! fp32 on the CPU, as the reference lab does, for the speedup. The JSON keeps
//! the reference's field names.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::matmul::{self, check_fits, rows_table, speedup, Config, Inputs};
use candle_lab::cli::{finish, parse, result_file, BenchSize, Common, Completion, Dtypes};
use candle_lab::device::select;
use candle_lab::export::table::print_tables;
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, MatmulResults, Row};
use clap::Parser;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Square matmul per precision: median time, GFLOP/s, peak memory, accuracy.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,

    #[command(flatten)]
    bench: BenchSize,

    #[command(flatten)]
    dtypes: Dtypes,

    /// Rows of the result checked against an f64 reference on the CPU.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    accuracy_rows: u64,

    /// On a GPU, skip the fp32 CPU comparison (max(3, iters/4) CPU runs).
    #[arg(long)]
    no_cpu: bool,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

/// The benchmark the flags ask for, checked (a cuBLAS mode needs a GPU).
fn config(args: &Args, on_cuda: bool) -> Result<Config> {
    Ok(Config {
        size: args.bench.n(),
        plan: args.bench.plan(),
        precisions: args.dtypes.for_device(on_cuda)?,
        accuracy_rows: args.accuracy_rows as usize,
    })
}

/// A failed row does not end the run: its error is in its row, the report is
/// written, and the exit code says that rows failed.
fn run(args: Args) -> Result<Completion> {
    if args.common.dry_run {
        let cfg = config(&args, args.common.device.expects_cuda())?;
        return args.common.dry_run("matmul", &args, &cfg);
    }
    let (device, info) = select(args.common.device)?;
    let cfg = config(&args, device.is_cuda())?;
    // On a GPU, the reference lab also times fp32 on the CPU.
    let compare_cpu = device.is_cuda() && !args.no_cpu;
    let host = args.bench.host_check();
    check_fits(&device, &cfg, host)?;
    if compare_cpu {
        check_fits(&Device::Cpu, &cfg.cpu_fp32_comparison(), host)?;
    }
    let output = args.common.output("matmul", &info)?;
    let n = cfg.size;
    eprintln!(
        "matmul {n}x{n}, warmup {}, iters {}, on {}",
        cfg.plan.warmup, cfg.plan.iters, info.label
    );

    let inputs = Inputs::random(n, cfg.accuracy_rows)?;
    let on_gpu = device.is_cuda();
    let gpu_name = on_gpu.then_some(info.name.as_str());
    let rows = matmul::run(&device, gpu_name, &cfg, &inputs)?;
    let cpu_row = if compare_cpu {
        Some(matmul::run_cpu_fp32(&cfg, &inputs)?)
    } else {
        None
    };
    let device_fp32 = rows.iter().find_map(Row::fp32_median_ms);
    let cpu_fp32_ms = if on_gpu {
        cpu_row.as_ref().and_then(Row::fp32_median_ms)
    } else {
        device_fp32
    };
    let result = MatmulResults {
        size: n,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        gpu_iters: on_gpu.then_some(cfg.plan.iters),
        // The CPU comparison's runs on a GPU; on a CPU run, the fp32 row's own.
        cpu_iters: match &cpu_row {
            Some(_) => Some(cfg.cpu_fp32_comparison().plan.iters),
            None if !on_gpu => device_fp32.map(|_| cfg.plan.iters),
            None => None,
        },
        device: info.kind,
        precisions: rows,
        cpu_fp32_ms,
        gpu_speedup_fp32: if on_gpu {
            cpu_fp32_ms.zip(device_fp32).map(|(c, g)| speedup(c, g))
        } else {
            None
        },
        cpu_fp32: cpu_row,
        flops_per_matmul: matmul::matmul_flops(n),
    };

    let mut tables = vec![rows_table(
        &format!("matmul {n}x{n} on {} ({})", info.label, info.name),
        &result.precisions,
    )];
    if let Some(cpu) = &result.cpu_fp32 {
        tables.push(rows_table(
            "the same fp32 matmul on the CPU",
            std::slice::from_ref(cpu),
        ));
    }
    let notes: Vec<String> = result
        .gpu_speedup_fp32
        .iter()
        .map(|s| {
            format!(
                "GPU is {s:.1}x faster than the CPU at fp32 (median wall time, device synchronized)"
            )
        })
        .collect();
    let done = matmul::completion(result.precisions.iter().chain(&result.cpu_fp32));
    output.save(&result_file(info, Body::Matmul(result)))?;
    print_tables(&tables, &notes, output.screen())?;
    Ok(done)
}
