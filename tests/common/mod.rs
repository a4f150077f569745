//! What the integration tests share: finding the suite's programs and running
//! them. Each test file is its own crate and uses what it needs of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The program `name`: from `CANDLE_LAB_BIN_DIR` when set (a packed bundle's
/// `experiments/` folder, where cargo's build paths do not exist), else the one
/// cargo built for this test.
pub fn bin(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("CANDLE_LAB_BIN_DIR") {
        return Path::new(&dir).join(name);
    }
    match name {
        "basics" => env!("CARGO_BIN_EXE_basics"),
        "precision" => env!("CARGO_BIN_EXE_precision"),
        "matmul" => env!("CARGO_BIN_EXE_matmul"),
        "cpu_vs_gpu" => env!("CARGO_BIN_EXE_cpu_vs_gpu"),
        "memory" => env!("CARGO_BIN_EXE_memory"),
        "overhead" => env!("CARGO_BIN_EXE_overhead"),
        "sweep" => env!("CARGO_BIN_EXE_sweep"),
        "summary" => env!("CARGO_BIN_EXE_summary"),
        "compare" => env!("CARGO_BIN_EXE_compare"),
        "report" => env!("CARGO_BIN_EXE_report"),
        other => panic!("no binary {other}"),
    }
    .into()
}

/// Runs the program `name` with `args` and waits for it.
pub fn run(name: &str, args: &[&str]) -> Output {
    Command::new(bin(name))
        .args(args)
        .output()
        .expect("the binary starts")
}
