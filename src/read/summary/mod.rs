//! The reference lab's closing table ("Week 5 in one place"), measured on this
//! machine: bytes per element, 1024 x 1024 tensor sizes, matmul time and
//! GFLOP/s per precision on the GPU, the CPU's fp32 time, GPU-vs-CPU and
//! fp16-vs-fp32 speed, and the measured peaks, each with this machine's value,
//! the lab's GB10 value and their ratio. A value a run cannot give (a GPU row
//! after a CPU-only run, a file not yet written) says why instead. Then the CUDA
//! version the driver supports beside the one the binaries were built with.
//!
//! Everything here is pure: a [`Side`] is built from parsed files (this
//! machine's result files, or the lab's `week05-results-gb10.json`), and
//! [`rows`] and [`build`] turn two sides into rows and tables. Fed the lab's
//! file on both sides, the table gives the lab's numbers back with ratio 1.00.
//! The `summary` program (tools/summary.rs) reads the files and writes the output.
//!
//! `side` reads the files (through the shared loader) and makes the sides.

use crate::export::table::Table;
use crate::precision::Precision::{self, Bf16, F16, F32};

mod notes;
mod side;
pub use side::*;

/// One row of the lab's table. Where the lab put two quantities in one row
/// (time and GFLOP/s, the fp32 and fp16 peaks) they are two rows here, so that
/// each has one unit and one ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    ElementBytes(Precision),
    /// Total bytes of a 1024 x 1024 tensor.
    Tensor1024Bytes(Precision),
    GpuMatmulMs(Precision),
    GpuMatmulGflops(Precision),
    CpuFp32Ms,
    CpuFp32Gflops,
    /// CPU fp32 time over GPU fp32 time.
    GpuVsCpuFp32,
    /// GPU fp32 time over GPU fp16 time.
    Fp16VsFp32,
    GpuPeakMib(Precision),
}

/// The lab's table, in its order.
pub const ITEMS: [Item; 18] = [
    Item::ElementBytes(F32),
    Item::ElementBytes(F16),
    Item::ElementBytes(Bf16),
    Item::Tensor1024Bytes(F32),
    Item::Tensor1024Bytes(F16),
    Item::Tensor1024Bytes(Bf16),
    Item::GpuMatmulMs(F32),
    Item::GpuMatmulGflops(F32),
    Item::GpuMatmulMs(F16),
    Item::GpuMatmulGflops(F16),
    Item::GpuMatmulMs(Bf16),
    Item::GpuMatmulGflops(Bf16),
    Item::CpuFp32Ms,
    Item::CpuFp32Gflops,
    Item::GpuVsCpuFp32,
    Item::Fp16VsFp32,
    Item::GpuPeakMib(F32),
    Item::GpuPeakMib(F16),
];

impl Item {
    pub fn label(self) -> String {
        let up = |p: Precision| p.name().to_ascii_uppercase();
        match self {
            Self::ElementBytes(p) => format!("{} bytes per element", up(p)),
            Self::Tensor1024Bytes(p) => format!("1024x1024 {} tensor", up(p)),
            Self::GpuMatmulMs(p) => format!("GPU {} matmul, median", up(p)),
            Self::GpuMatmulGflops(p) => format!("GPU {} matmul, throughput", up(p)),
            Self::CpuFp32Ms => "CPU FP32 matmul, median".into(),
            Self::CpuFp32Gflops => "CPU FP32 matmul, throughput".into(),
            Self::GpuVsCpuFp32 => "GPU vs CPU at FP32".into(),
            Self::Fp16VsFp32 => "FP16 vs FP32 speed (GPU)".into(),
            Self::GpuPeakMib(p) => format!("{} matmul measured peak (GPU)", up(p)),
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Self::ElementBytes(_) | Self::Tensor1024Bytes(_) => "B",
            Self::GpuMatmulMs(_) | Self::CpuFp32Ms => "ms",
            Self::GpuMatmulGflops(_) | Self::CpuFp32Gflops => "GFLOP/s",
            Self::GpuVsCpuFp32 | Self::Fp16VsFp32 => "x faster",
            Self::GpuPeakMib(_) => "MiB",
        }
    }

    fn format(self, v: f64) -> String {
        match self.unit() {
            "B" => format!("{v:.0}"),
            "ms" => format!("{v:.3}"),
            "x faster" => format!("{v:.2}"),
            _ => format!("{v:.1}"),
        }
    }
}

/// A value and the matmul size n it was measured at (none for sizes of tensors).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    pub value: f64,
    pub size: Option<usize>,
}

/// A value, or why there is none.
pub type Filled = Result<Cell, String>;

/// A version, or why there is none.
pub type Version = Result<String, String>;

/// One item on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    pub item: Item,
    pub here: Filled,
    pub lab: Filled,
}

impl SummaryRow {
    /// This machine's value over the lab's, when both exist and were measured
    /// at the same matmul size.
    pub fn ratio(&self) -> Result<f64, String> {
        let here = self.here.clone()?;
        let lab = self.lab.clone().map_err(|e| format!("lab: {e}"))?;
        if here.size != lab.size {
            let n = |s: Option<usize>| s.map_or("-".to_string(), |n| n.to_string());
            return Err(format!(
                "not compared: n = {} here, {} in the lab",
                n(here.size),
                n(lab.size)
            ));
        }
        if lab.value == 0.0 {
            return Err("lab: value is 0".into());
        }
        Ok(here.value / lab.value)
    }
}

/// The lab's table with both sides, in its order.
pub fn rows(here: &Side, lab: &Side) -> Vec<SummaryRow> {
    ITEMS
        .iter()
        .map(|&item| SummaryRow {
            item,
            here: here.value(item),
            lab: lab.value(item),
        })
        .collect()
}

/// Whether the driver can run what the binaries were built for: the same
/// version matches; a newer driver runs code built for an older CUDA; an older
/// one may refuse it (Candle's kernels are PTX that the driver compiles, and a
/// driver cannot compile PTX newer than itself).
pub fn cuda_verdict(driver: &Version, build: &Version) -> String {
    let (driver, build) = match (driver, build) {
        (Ok(d), Ok(b)) => (d, b),
        (Err(why), _) | (_, Err(why)) => return format!("n/a: {why}"),
    };
    let parse = |v: &str| -> Option<(u32, u32)> {
        let (major, minor) = v.split_once('.')?;
        let minor = minor.split('.').next()?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    };
    match (parse(driver), parse(build)) {
        (Some(d), Some(b)) if d == b => "match".into(),
        (Some(d), Some(b)) if d > b => {
            format!("ok: the driver ({driver}) is newer than the build ({build}) and runs it")
        }
        (Some(_), Some(_)) => format!(
            "mismatch: the driver supports CUDA {driver}, older than the build's {build}; \
             update the driver"
        ),
        _ => format!("cannot compare \"{driver}\" with \"{build}\""),
    }
}

/// The summary as text blocks and tables, for the terminal and for Markdown.
pub struct Summary {
    pub title: String,
    /// Where each side's values come from, and how to read the ratio.
    pub notes: Vec<String>,
    pub tables: Vec<Table>,
}

/// What the two sides' peaks include, beside the peak rows: the lab's
/// `max_memory_allocated` was read with cuBLAS's workspace allocated inside the
/// window (224 and 128 MiB are 192 and 96 MiB of payload plus about 32 MiB);
/// Candle's pool peak, like the PyTorch reference's here, leaves it out.
pub const PEAK_NOTE: &str =
    "here: without cuBLAS's workspace; the lab's: with it (about 32 MiB above payload)";

/// The summary of `here` beside `lab`.
pub fn build(here: &Side, lab: &Side) -> Summary {
    let mut table = Table::new(
        "the reference lab's table, measured here",
        &[
            "item",
            "unit",
            "this machine",
            "reference lab",
            "this / lab",
            "note",
        ],
    );
    table.align_left(&[1, 5]);
    for r in rows(here, lab) {
        let show = |v: &Filled| match v {
            Ok(c) => r.item.format(c.value),
            Err(_) => "-".into(),
        };
        let ratio = r.ratio();
        let note = match (&r.here, &r.lab, &ratio) {
            (Err(why), _, _) => why.clone(),
            (_, Err(why), _) => format!("lab: {why}"),
            (_, _, Err(why)) => why.clone(),
            _ => match r.item {
                Item::GpuPeakMib(_) => PEAK_NOTE.into(),
                _ => String::new(),
            },
        };
        table.row([
            r.item.label(),
            r.item.unit().into(),
            show(&r.here),
            show(&r.lab),
            ratio.map_or("-".into(), |x| format!("{x:.2}")),
            note,
        ]);
    }

    let mut cuda = Table::new(
        "CUDA: the driver's version and the build's",
        &["", "this machine", "reference lab"],
    );
    cuda.align_left(&[1, 2]);
    let show = |v: &Version| match v {
        Ok(v) => v.clone(),
        Err(why) => format!("- ({why})"),
    };
    cuda.row([
        "newest CUDA the driver supports".into(),
        show(&here.driver_cuda),
        show(&lab.driver_cuda),
    ]);
    cuda.row([
        "CUDA the binaries were built with".into(),
        show(&here.build_cuda),
        show(&lab.build_cuda),
    ]);
    cuda.row([
        "driver and build".into(),
        cuda_verdict(&here.driver_cuda, &here.build_cuda),
        cuda_verdict(&lab.driver_cuda, &lab.build_cuda),
    ]);

    Summary {
        title: format!("In one place: {} beside {}", here.name, lab.name),
        notes: vec![
            format!("This machine: {} ({}).", here.name, here.sources.join("; ")),
            format!("Reference lab: {} ({}).", lab.name, lab.sources.join("; ")),
            "this / lab is this machine's value over the lab's: above 1 is more \
             (slower for ms, faster for GFLOP/s and x faster, more memory for MiB). \
             Matmul values are compared only at the same size n."
                .into(),
        ]
        .into_iter()
        .chain(here.notes.iter().cloned())
        .collect(),
        tables: vec![table, cuda],
    }
}

impl Summary {
    /// For the terminal: the notes, then the tables.
    pub fn text(&self) -> String {
        let mut out = format!("{}\n\n", self.title);
        for n in &self.notes {
            out.push_str(n);
            out.push('\n');
        }
        for t in &self.tables {
            out.push('\n');
            out.push_str(&t.to_string());
        }
        out
    }

    /// As a Markdown document.
    pub fn markdown(&self) -> String {
        use crate::export::markdown::text;
        let mut out = format!("# {}\n\n", text(&self.title));
        for n in &self.notes {
            out.push_str(&text(n));
            out.push_str("\n\n");
        }
        for t in &self.tables {
            out.push_str(&t.markdown());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{
        Accuracy, Body, Broadcast, Described, DeviceInfo, DeviceKind, Elementwise, MatmulResults,
        Measured, Row, RowStatus, Transfer, TransferStatus,
    };
    use crate::stats::summarize;
    use side::at;

    /// `path` in the repository: relative, since tests run in its root (under
    /// cargo, and in the one-call GPU run).
    fn repo_file(path: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(path)
    }

    fn lab() -> LabFile {
        let path = repo_file("tests/fixtures/reference-lab-gb10/week05-results-gb10.json");
        parse_lab(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn value(rows: &[SummaryRow], item: Item) -> Filled {
        rows.iter().find(|r| r.item == item).unwrap().here.clone()
    }

    /// What the lab's table states, item by item (its "~" values to the
    /// digits it printed).
    fn assert_the_labs_numbers(rows: &[SummaryRow]) {
        let v = |item| value(rows, item).unwrap().value;
        for (p, bytes) in [(F32, 4.0), (F16, 2.0), (Bf16, 2.0)] {
            assert_eq!(v(Item::ElementBytes(p)), bytes);
            assert_eq!(v(Item::Tensor1024Bytes(p)), bytes * 1024.0 * 1024.0);
        }
        assert_eq!(v(Item::Tensor1024Bytes(F32)), 4_194_304.0);
        assert_eq!(v(Item::Tensor1024Bytes(F16)), 2_097_152.0);
        for (p, ms, gflops) in [
            (F32, 7.44, 18473.0),
            (F16, 1.548, 88807.9),
            (Bf16, 1.576, 87202.3),
        ] {
            assert_eq!(v(Item::GpuMatmulMs(p)), ms);
            assert_eq!(v(Item::GpuMatmulGflops(p)), gflops);
        }
        assert_eq!(v(Item::CpuFp32Ms), 168.281);
        assert_eq!(v(Item::CpuFp32Gflops).round(), 817.0);
        assert_eq!(v(Item::GpuVsCpuFp32), 22.6);
        assert_eq!(format!("{:.1}", v(Item::Fp16VsFp32)), "4.8");
        assert_eq!(v(Item::GpuPeakMib(F32)), 224.0);
        assert_eq!(v(Item::GpuPeakMib(F16)), 128.0);
    }

    #[test]
    fn the_labs_file_on_both_sides_gives_its_numbers_with_ratio_one() {
        let side = Side::from_lab(&lab());
        let rows = rows(&side, &side);
        assert_eq!(rows.len(), ITEMS.len());
        assert_the_labs_numbers(&rows);
        for r in &rows {
            assert_eq!(r.ratio(), Ok(1.0), "{}", r.item.label());
        }
        let md = build(&side, &side).markdown();
        // The Markdown table's "this / lab" column (the fifth) reads 1.00 in every row.
        let ratio_cells = md
            .lines()
            .filter(|l| l.starts_with('|') && l.split('|').nth(5).map(str::trim) == Some("1.00"))
            .count();
        assert_eq!(ratio_cells, ITEMS.len(), "{md}");
        assert!(md.contains(" 7.440 |"), "{md}");
        // The lab recorded the CUDA it was built with, not its driver's.
        assert_eq!(side.build_cuda, Ok("13.0".into()));
        assert!(md.contains("n/a: not recorded by the lab"), "{md}");
    }

    /// The lab's run as candle-lab result files: a GPU matmul and basics'
    /// 1024 x 1024 tensors.
    fn lab_as_result_files() -> MachineFiles {
        let lab = lab();
        let (_, cpu) = crate::device::select(crate::device::DeviceArg::Cpu).unwrap();
        let gpu = DeviceInfo {
            kind: DeviceKind::Cuda,
            label: "cuda:0".into(),
            name: lab.hardware.device.clone(),
            driver_cuda_version: Some("13.0".into()),
            ..cpu
        };
        let file = |body| {
            let mut f = crate::experiment::result_file(gpu.clone(), body);
            f.environment.cuda_build_version = Some("13.0".into());
            Ok(f)
        };
        let m = &lab.matmul;
        let precisions = m
            .precisions
            .iter()
            .map(|r| {
                let p: Precision = r.precision.parse().unwrap();
                lab_row(p, r.median_ms, r.gflops, r.peak_mib)
            })
            .collect();
        let matmul = MatmulResults {
            size: m.size,
            warmup: 5,
            iters: 20,
            sampling: None,
            gpu_iters: Some(20),
            cpu_iters: Some(5),
            device: DeviceKind::Cuda,
            precisions,
            cpu_fp32_ms: m.cpu_fp32_ms,
            gpu_speedup_fp32: m.gpu_speedup_fp32,
            cpu_fp32: None,
            flops_per_matmul: crate::formulas::matmul_flops(m.size),
        };
        let tensor = |dtype: &str, element_bytes: usize| Described {
            name: dtype.into(),
            rank: 2,
            shape: vec![1024, 1024],
            dtype: dtype.into(),
            element_bytes,
            total_bytes: element_bytes * 1024 * 1024,
            device: "cuda:0".into(),
        };
        let b = &lab.dtype_bytes;
        let basics = crate::schema::BasicsResults {
            tensors: vec![],
            dtypes: vec![
                tensor("f32", b.float32),
                tensor("f16", b.float16),
                tensor("bf16", b.bfloat16),
            ],
            elementwise_add: Elementwise {
                a: vec![],
                b: vec![],
                a_plus_b: vec![],
            },
            broadcasting: Broadcast {
                matrix_shape: vec![],
                row_shape: vec![],
                result: vec![],
            },
            views: vec![],
            memory_source: "test".into(),
            transfer: Transfer {
                status: TransferStatus::Skipped,
                reason: None,
                before: None,
                after: None,
                values_after: None,
            },
        };
        MachineFiles {
            basics: file(Body::Basics(basics)),
            matmul: file(Body::Matmul(matmul)),
            cpu_vs_gpu: Err("no cpu_vs_gpu.json yet".into()),
            block: Err("no block.json yet".into()),
            generate: Err("no generate.json yet".into()),
        }
    }

    fn lab_row(p: Precision, ms: f64, gflops: f64, peak_mib: Option<f64>) -> Row {
        Row {
            precision: p,
            dtype: p.dtype().as_str().into(),
            element_bytes: p.dtype().size_in_bytes(),
            gemm_reduced_precision: false,
            memory_source: "test".into(),
            status: RowStatus::Ok,
            error: None,
            measured: Some(Measured {
                median_ms: ms,
                gflops,
                peak_mib,
                peak_bytes: peak_mib.map(|m| (m * 1048576.0) as u64),
                payload_mib: 0.0,
                payload_bytes: 0,
                gpu_median_ms: None,
                gpu_gflops: None,
                datasheet_tflops: None,
                pct_of_datasheet: None,
                speedup_vs_fp32_wall: None,
                speedup_vs_fp32_gpu: None,
                vs_fp32_side_by_side: None,
                peak_vs_fp32: None,
                wall_ms: summarize(&[ms]).unwrap(),
                gpu_ms: None,
                samples_wall_ms: vec![ms],
                samples_gpu_ms: vec![],
                accuracy: Accuracy {
                    rows_checked: 0,
                    max_rel_err: 0.0,
                    mean_rel_err: 0.0,
                },
                availability: None,
            }),
        }
    }

    #[test]
    fn result_files_holding_the_labs_numbers_reproduce_its_table() {
        let files = lab_as_result_files();
        let here = Side::from_results(&files);
        let rows = rows(&here, &Side::from_lab(&lab()));
        assert_the_labs_numbers(&rows);
        for r in &rows {
            assert_eq!(r.ratio(), Ok(1.0), "{}", r.item.label());
        }
        assert!(
            here.name.starts_with("NVIDIA GB10, candle "),
            "{}",
            here.name
        );
        assert_eq!(cuda_verdict(&here.driver_cuda, &here.build_cuda), "match");
        // The peak rows say what each side's peak includes.
        let md = build(&here, &Side::from_lab(&lab())).markdown();
        let peak_rows: Vec<&str> = md.lines().filter(|l| l.contains("measured peak")).collect();
        assert_eq!(peak_rows.len(), 2, "{md}");
        assert!(peak_rows.iter().all(|l| l.contains(PEAK_NOTE)), "{md}");
    }

    #[test]
    fn other_sizes_failed_rows_and_missing_files_say_why() {
        let mut files = lab_as_result_files();
        if let Ok(f) = &mut files.matmul {
            if let Body::Matmul(m) = &mut f.body {
                m.size = 128;
                let fp16 = &mut m.precisions[1];
                fp16.status = RowStatus::Error;
                fp16.error = Some("CUDA_ERROR_OUT_OF_MEMORY".into());
                fp16.measured = None;
                // bf16 before compute capability 8.0: cuBLAS refuses it.
                let bf16 = m
                    .precisions
                    .iter_mut()
                    .find(|r| r.precision == Bf16)
                    .unwrap();
                bf16.status = RowStatus::Unsupported;
                bf16.error = Some("CublasError(CUBLAS_STATUS_ARCH_MISMATCH)".into());
                bf16.measured = None;
            }
        }
        files.basics = Err("no basics.json yet (run `just basics`)".into());
        let rows = rows(&Side::from_results(&files), &Side::from_lab(&lab()));
        let row = |item| rows.iter().find(|r| r.item == item).unwrap();
        let fp32 = row(Item::GpuMatmulMs(F32));
        assert_eq!(fp32.here.clone().unwrap().value, 7.44, "shown, at its size");
        assert_eq!(
            fp32.ratio(),
            Err("not compared: n = 128 here, 4096 in the lab".into())
        );
        assert_eq!(
            row(Item::GpuMatmulMs(F16)).here,
            Err("the fp16 row failed: CUDA_ERROR_OUT_OF_MEMORY".into())
        );
        assert!(row(Item::Fp16VsFp32).here.is_err());
        assert_eq!(
            row(Item::GpuMatmulGflops(Bf16)).here,
            Err(
                "the bf16 row is unsupported here: CublasError(CUBLAS_STATUS_ARCH_MISMATCH)".into()
            )
        );
        assert_eq!(
            row(Item::ElementBytes(F32)).ratio(),
            Err("no basics.json yet (run `just basics`)".into())
        );
    }

    #[test]
    fn a_cpu_only_run_fills_the_cpu_rows_and_says_why_not_the_gpu_rows() {
        // A committed CPU run (schema 1, upgraded on read).
        let dir = repo_file("tests/fixtures/amd-epyc-2t");
        let read = |name: &str| {
            crate::schema::read(&dir.join(format!("{name}.json"))).map_err(|e| e.to_string())
        };
        let files = MachineFiles {
            basics: read("basics"),
            matmul: read("matmul"),
            cpu_vs_gpu: read("cpu_vs_gpu"),
            block: read("block"),
            generate: read("generate"),
        };
        let Ok(Body::Matmul(m)) = files.matmul.as_ref().map(|f| &f.body) else {
            panic!("matmul.json");
        };
        let here = Side::from_results(&files);
        let rows = rows(&here, &Side::from_lab(&lab()));
        let row = |item| rows.iter().find(|r| r.item == item).unwrap();
        let cpu = row(Item::CpuFp32Ms);
        let cpu_ms = m.cpu_fp32_ms.unwrap();
        assert_eq!(cpu.here, Ok(at(4096, cpu_ms)));
        assert_eq!(cpu.ratio(), Ok(cpu_ms / 168.281));
        assert_eq!(row(Item::ElementBytes(Bf16)).ratio(), Ok(1.0));
        for item in [Item::GpuMatmulMs(F32), Item::GpuPeakMib(F16)] {
            let why = row(item).here.clone().unwrap_err();
            assert!(why.starts_with("no GPU in this run"), "{why}");
        }
        let why = row(Item::Fp16VsFp32).here.clone().unwrap_err();
        assert!(why.contains("on the CPU fp16 ran at"), "{why}");
        assert!(row(Item::GpuVsCpuFp32).here.is_err());
        assert_eq!(here.build_cuda, Err("built without CUDA".into()));
        assert_eq!(
            cuda_verdict(&here.driver_cuda, &here.build_cuda),
            "n/a: no CUDA device in this run"
        );
    }

    #[test]
    fn the_driver_must_be_at_least_as_new_as_the_build() {
        let v = |s: &str| Ok(s.to_string());
        assert_eq!(cuda_verdict(&v("13.0"), &v("13.0")), "match");
        assert!(cuda_verdict(&v("13.1"), &v("13.0")).starts_with("ok: the driver (13.1) is newer"));
        assert!(cuda_verdict(&v("12.8"), &v("13.0"))
            .starts_with("mismatch: the driver supports CUDA 12.8"));
        // 12.10 is newer than 12.8: versions compare as numbers, not text.
        assert!(cuda_verdict(&v("12.10"), &v("12.8")).starts_with("ok"));
        assert_eq!(
            cuda_verdict(&v("13.0"), &Err("built without CUDA".into())),
            "n/a: built without CUDA"
        );
        assert!(cuda_verdict(&v("thirteen"), &v("13.0")).starts_with("cannot compare"));
    }
}
