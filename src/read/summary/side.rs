//! The two sides of the summary: the reference lab's file ([`LabFile`]) and
//! this machine's result files ([`MachineFiles`]), each read through the shared
//! loader (size, type, the numbers checked), and the [`Side`] each makes.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

pub use super::notes::MachineFiles;
use super::{Cell, Filled, Item, Version, ITEMS};
use crate::error::error_line;
use crate::formulas::gflops;
use crate::precision::Precision::{self, F16, F32};
use crate::quote::shown;
use crate::read::folder::readable_inside;
use crate::read::load::{self, Loaded};
use crate::schema::{
    BasicsResults, Body, CpuVsGpuResults, DeviceKind, MatmulResults, Measured, ResultFile,
    RowStatus,
};

/// The reference lab's results file: its own small layout (what its Python
/// program printed), not a candle-lab result file.
#[derive(Clone, Debug, Deserialize)]
pub struct LabFile {
    pub captured_date: Option<String>,
    pub hardware: LabHardware,
    pub dtype_bytes: LabDtypeBytes,
    pub matmul: LabMatmul,
}

#[derive(Clone, Debug, Deserialize)]
pub struct LabHardware {
    pub device: String,
    /// PyTorch's version, e.g. "2.13.0+cu130".
    pub torch: String,
    /// `torch.version.cuda`: the CUDA version PyTorch was built against.
    pub cuda_runtime: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct LabDtypeBytes {
    pub float32: usize,
    pub float16: usize,
    pub bfloat16: usize,
}

#[derive(Clone, Debug, Deserialize)]
pub struct LabMatmul {
    pub size: usize,
    /// "cuda" or "cpu".
    pub device: String,
    pub precisions: Vec<LabRow>,
    pub cpu_fp32_ms: Option<f64>,
    pub gpu_speedup_fp32: Option<f64>,
    pub warmup: Option<usize>,
    pub gpu_iters: Option<usize>,
    pub cpu_iters: Option<usize>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct LabRow {
    pub precision: String,
    pub median_ms: f64,
    pub gflops: f64,
    pub peak_mib: Option<f64>,
}

/// Parses the lab's results file.
pub fn parse_lab(text: &str) -> Result<LabFile> {
    serde_json::from_str(text).context("not the reference lab's results layout")
}

/// Reads the lab's results file through the shared loader's steps (size,
/// type, the numbers checked), in the lab's own layout.
pub fn load_lab(path: &Path) -> Result<LabFile> {
    let text = load::read_text(path)
        .with_context(|| format!("cannot read the reference lab's file {}", shown(path)))?;
    let value = load::checked_json(&text).with_context(|| shown(path))?;
    let lab = LabFile::deserialize(&value)
        .with_context(|| format!("{}: not the reference lab's results layout", shown(path)))?;
    // Its rows keyed as every reader keys them: a precision given twice is refused.
    crate::read::entries::reference_lab_entries(&value).with_context(|| shown(path))?;
    Ok(lab)
}

/// This machine's `NAME.json` in `dir`, through the shared loader: read only
/// where a real file sits (no link, no FIFO), or why not on one line (`recipe`
/// names the `just` recipe that writes it).
pub fn load_machine_file(dir: &Path, name: &str, recipe: &str) -> Result<ResultFile, String> {
    let file = format!("{name}.json");
    let path = readable_inside(dir, Path::new(&file)).map_err(|e| error_line(&e))?;
    if !path.exists() {
        return Err(format!("no {file} yet (run `just {recipe}`)"));
    }
    match load::load(&path) {
        Ok(Loaded::Result(f)) => Ok(*f),
        Ok(Loaded::ReferenceLab(_)) => Err(format!("{file}: not a candle-lab result file")),
        Err(e) => Err(error_line(&e)),
    }
}

/// One side of the table: who measured, every item's value, the CUDA versions.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    /// The device and framework: "NVIDIA GB10, PyTorch 2.13.0+cu130".
    pub name: String,
    /// What the values were read from, one line each.
    pub sources: Vec<String>,
    /// One entry per [`ITEMS`], in that order.
    pub values: Vec<(Item, Filled)>,
    /// The newest CUDA version the driver supports.
    pub driver_cuda: Version,
    /// The CUDA version the binaries (or PyTorch) were built against.
    pub build_cuda: Version,
    /// What this side's files add in words: the block's answer to the lab's
    /// caveat, and which rows were measured on a contended machine.
    pub notes: Vec<String>,
}

impl Side {
    pub fn value(&self, item: Item) -> Filled {
        self.values
            .iter()
            .find(|(i, _)| *i == item)
            .map_or_else(|| Err("not measured".into()), |(_, v)| v.clone())
    }

    /// The lab's side, from its results file. Its 1024 x 1024 sizes are
    /// element bytes x 1024^2 and its CPU GFLOP/s is 2n^3 over its CPU time, as
    /// its table states them; everything else is the file's own number.
    pub fn from_lab(lab: &LabFile) -> Side {
        let m = &lab.matmul;
        let size = Some(m.size);
        // ITEMS name only fp32, fp16 and bf16.
        let bytes = |p: Precision| match p {
            F32 => lab.dtype_bytes.float32,
            F16 => lab.dtype_bytes.float16,
            _ => lab.dtype_bytes.bfloat16,
        };
        let gpu_row = |p: Precision| -> Result<&LabRow, String> {
            if m.device != "cuda" {
                return Err(format!("the lab's matmul ran on \"{}\"", m.device));
            }
            m.precisions
                .iter()
                .find(|r| r.precision == p.name())
                .ok_or_else(|| format!("the lab has no {p} row"))
        };
        let cell = |value: f64| Cell { value, size };
        let cpu_ms = m
            .cpu_fp32_ms
            .ok_or_else(|| "the lab has no CPU fp32 time".to_string());
        let values = ITEMS
            .iter()
            .map(|&item| {
                let v = match item {
                    Item::ElementBytes(p) => Ok(tensor_cell(bytes(p))),
                    Item::Tensor1024Bytes(p) => Ok(tensor_cell(bytes(p) * 1024 * 1024)),
                    Item::GpuMatmulMs(p) => gpu_row(p).map(|r| cell(r.median_ms)),
                    Item::GpuMatmulGflops(p) => gpu_row(p).map(|r| cell(r.gflops)),
                    Item::CpuFp32Ms => cpu_ms.clone().map(cell),
                    Item::CpuFp32Gflops => cpu_ms.clone().map(|ms| cell(gflops(m.size, ms))),
                    Item::GpuVsCpuFp32 => m
                        .gpu_speedup_fp32
                        .map(cell)
                        .ok_or_else(|| "the lab has no GPU speedup".into()),
                    Item::Fp16VsFp32 => {
                        gpu_row(F32).and_then(|a| Ok(cell(a.median_ms / gpu_row(F16)?.median_ms)))
                    }
                    Item::GpuPeakMib(p) => gpu_row(p).and_then(|r| {
                        r.peak_mib
                            .map(cell)
                            .ok_or_else(|| format!("the lab has no {p} peak"))
                    }),
                };
                (item, v)
            })
            .collect();
        Side {
            name: format!("{}, PyTorch {}", lab.hardware.device, lab.hardware.torch),
            sources: vec![format!(
                "the lab's results file{}{}",
                lab.captured_date
                    .as_deref()
                    .map_or(String::new(), |d| format!(", captured {d}")),
                match (
                    lab.matmul.warmup,
                    lab.matmul.gpu_iters,
                    lab.matmul.cpu_iters
                ) {
                    (Some(w), Some(g), Some(c)) => format!(
                        ", rows sampled warmup {w}, iters {g} (the CPU fp32 row: iters {c})"
                    ),
                    _ => String::new(),
                }
            )],
            values,
            notes: Vec::new(),
            driver_cuda: Err("not recorded by the lab".into()),
            build_cuda: lab
                .hardware
                .cuda_runtime
                .clone()
                .ok_or_else(|| "not recorded by the lab".into()),
        }
    }

    /// This machine's side, from its result files: each is the file read, or
    /// why there is none (missing, unreadable), which the rows then repeat.
    pub fn from_results(files: &MachineFiles) -> Side {
        let runs = Runs {
            basics: body(&files.basics, "basics", |b| match b {
                Body::Basics(x) => Some(x),
                _ => None,
            }),
            matmul: body(&files.matmul, "matmul", |b| match b {
                Body::Matmul(x) => Some(x),
                _ => None,
            }),
            cpu_vs_gpu: body(&files.cpu_vs_gpu, "cpu_vs_gpu", |b| match b {
                Body::CpuVsGpu(x) => Some(x),
                _ => None,
            }),
        };
        let values = ITEMS.iter().map(|&item| (item, runs.value(item))).collect();
        let files_read: Vec<&ResultFile> = [&files.basics, &files.matmul, &files.cpu_vs_gpu]
            .into_iter()
            .filter_map(|f| f.as_ref().ok())
            .collect();
        // The CUDA facts of the run that used the GPU, if one did.
        let primary = files_read
            .iter()
            .find(|f| f.device.kind == DeviceKind::Cuda)
            .or(files_read.first());
        let (name, driver_cuda, build_cuda) = facts(primary.copied());
        // Why the runs used the device they did, then the files.
        let device = primary.map(|f| format!("on {}: {}", f.device.label, f.device.chosen_because));
        Side {
            name,
            sources: device
                .into_iter()
                .chain(files_read.iter().map(|f| {
                    format!(
                        "{}.json of {}{}",
                        f.experiment,
                        f.created_utc,
                        super::notes::protocol(f)
                    )
                }))
                .collect(),
            values,
            driver_cuda,
            build_cuda,
            notes: super::notes::notes(files),
        }
    }
}

/// A result body of this machine's, or why there is none.
type Got<'a, T> = Result<&'a T, String>;

/// This machine's runs the side's values come from.
struct Runs<'a> {
    basics: Got<'a, BasicsResults>,
    matmul: Got<'a, MatmulResults>,
    cpu_vs_gpu: Got<'a, CpuVsGpuResults>,
}

impl Runs<'_> {
    /// The matmul run, when it ran on a GPU.
    fn gpu_matmul(&self) -> Got<'_, MatmulResults> {
        let m = self.matmul.clone()?;
        if m.device == DeviceKind::Cuda {
            return Ok(m);
        }
        Err("no GPU in this run (matmul ran on the CPU)".into())
    }

    /// The GPU's row of `p`, and the run's size.
    fn gpu_row(&self, p: Precision) -> Result<(&Measured, usize), String> {
        let m = self.gpu_matmul()?;
        Ok((measured(m, p)?, m.size))
    }

    /// After a CPU-only run, the CPU's own row of `p`: what the GPU rows'
    /// reasons can add (the lab's lesson, tried on this CPU).
    fn cpu_row(&self, p: Precision) -> Option<&Measured> {
        let m = self
            .matmul
            .clone()
            .ok()
            .filter(|m| m.device == DeviceKind::Cpu)?;
        measured(m, p).ok()
    }

    /// One item's cell, or why this machine has none.
    fn value(&self, item: Item) -> Result<Cell, String> {
        let cpu_fp32 = || cpu_fp32(self.matmul.clone(), self.cpu_vs_gpu.clone());
        match item {
            Item::ElementBytes(p) => {
                described(self.basics.clone(), p).map(|d| tensor_cell(d.element_bytes))
            }
            Item::Tensor1024Bytes(p) => {
                described(self.basics.clone(), p).map(|d| tensor_cell(d.total_bytes))
            }
            Item::GpuMatmulMs(p) => self.gpu_row(p).map(|(r, n)| at(n, r.median_ms)),
            Item::GpuMatmulGflops(p) => self.gpu_row(p).map(|(r, n)| at(n, r.gflops)),
            Item::CpuFp32Ms => cpu_fp32().map(|(ms, n)| at(n, ms)),
            Item::CpuFp32Gflops => cpu_fp32().map(|(ms, n)| at(n, gflops(n, ms))),
            Item::GpuVsCpuFp32 => speedup(self.gpu_matmul(), self.cpu_vs_gpu.clone()),
            Item::Fp16VsFp32 => self
                .gpu_row(F32)
                .and_then(|(a, n)| Ok(at(n, a.median_ms / self.gpu_row(F16)?.0.median_ms)))
                .map_err(|why| match (self.cpu_row(F32), self.cpu_row(F16)) {
                    (Some(a), Some(b)) => format!(
                        "{why}; on the CPU fp16 ran at {:.2}x fp32's speed",
                        a.median_ms / b.median_ms
                    ),
                    _ => why,
                }),
            Item::GpuPeakMib(p) => self
                .gpu_row(p)
                .and_then(|(r, n)| {
                    r.peak_mib
                        .map(|v| at(n, v))
                        .ok_or_else(|| format!("matmul.json has no {p} peak"))
                })
                .map_err(|why| match self.cpu_row(p).and_then(|m| m.peak_mib) {
                    Some(v) => format!("{why}; host peak on the CPU: {v:.1} MiB"),
                    None => why,
                }),
        }
    }
}

/// The side's name and its driver's and build's CUDA versions, from the run
/// that names this machine (`primary`), or why there are none.
fn facts(primary: Option<&ResultFile>) -> (String, Result<String, String>, Result<String, String>) {
    let Some(f) = primary else {
        return (
            "this machine".into(),
            Err("no result files".into()),
            Err("no result files".into()),
        );
    };
    (
        format!(
            "{}, {} {}",
            f.device.name, f.environment.framework, f.environment.framework_version
        ),
        f.device
            .driver_cuda_version
            .clone()
            .ok_or_else(|| "no CUDA device in this run".to_string()),
        f.environment
            .cuda_build_version
            .clone()
            .ok_or_else(|| "built without CUDA".to_string()),
    )
}

fn tensor_cell(bytes: usize) -> Cell {
    Cell {
        value: bytes as f64,
        size: None,
    }
}

pub(super) fn at(size: usize, value: f64) -> Cell {
    Cell {
        value,
        size: Some(size),
    }
}

/// The body of `file` when it is the experiment `name`.
fn body<'a, T>(
    file: &'a Result<ResultFile, String>,
    name: &str,
    pick: impl Fn(&'a Body) -> Option<&'a T>,
) -> Result<&'a T, String> {
    let f = file.as_ref().map_err(Clone::clone)?;
    pick(&f.body).ok_or_else(|| format!("{name}.json holds \"{}\" results", f.experiment))
}

/// The 1024 x 1024 tensor of `p`'s dtype that `basics` described.
fn described(
    basics: Result<&BasicsResults, String>,
    p: Precision,
) -> Result<&crate::schema::Described, String> {
    let dtype = p.dtype().as_str();
    basics?
        .dtypes
        .iter()
        .find(|d| d.dtype == dtype && d.shape == [1024, 1024])
        .ok_or_else(|| format!("basics.json has no 1024x1024 {dtype} tensor"))
}

/// `p`'s measurements in `m`, or why there are none.
fn measured(m: &MatmulResults, p: Precision) -> Result<&Measured, String> {
    let row = m
        .precisions
        .iter()
        .find(|r| r.precision == p)
        .ok_or_else(|| format!("matmul.json has no {p} row (run matmul with --dtypes {p})"))?;
    let why = row.error.as_deref().unwrap_or("no measurements");
    match (&row.measured, row.status) {
        (Some(m), RowStatus::Ok) => Ok(m),
        (_, RowStatus::Unsupported) => Err(format!("the {p} row is unsupported here: {why}")),
        _ => Err(format!("the {p} row failed: {why}")),
    }
}

/// The CPU's fp32 median and the size it ran at: `matmul`'s (the lab's
/// field), else `cpu_vs_gpu`'s.
fn cpu_fp32(
    matmul: Result<&MatmulResults, String>,
    cpu_vs_gpu: Result<&CpuVsGpuResults, String>,
) -> Result<(f64, usize), String> {
    let from_matmul = matmul.and_then(|m| {
        m.cpu_fp32_ms
            .map(|ms| (ms, m.size))
            .ok_or_else(|| "matmul.json has no CPU fp32 time".to_string())
    });
    let from_cpu_vs_gpu = || {
        cpu_vs_gpu.and_then(|c| {
            c.cpu_fp32_ms
                .map(|ms| (ms, c.size))
                .ok_or_else(|| "cpu_vs_gpu.json has no CPU fp32 time".to_string())
        })
    };
    from_matmul.or_else(|e| from_cpu_vs_gpu().map_err(|e2| format!("{e}; {e2}")))
}

/// GPU-vs-CPU fp32 speedup: `matmul`'s on a GPU run, else `cpu_vs_gpu`'s.
fn speedup(
    gpu_matmul: Result<&MatmulResults, String>,
    cpu_vs_gpu: Result<&CpuVsGpuResults, String>,
) -> Filled {
    let from_matmul = gpu_matmul.and_then(|m| {
        m.gpu_speedup_fp32
            .map(|s| at(m.size, s))
            .ok_or_else(|| "matmul.json has no speedup (run without --no-cpu)".to_string())
    });
    from_matmul.or_else(|e| {
        let c = cpu_vs_gpu.map_err(|e2| format!("{e}; {e2}"))?;
        match (c.gpu_speedup_fp32, &c.gpu_skipped) {
            (Some(s), _) => Ok(at(c.size, s)),
            (None, Some(_)) => Err("no GPU in this run (cpu_vs_gpu ran on the CPU only)".into()),
            (None, None) => Err(format!("{e}; cpu_vs_gpu.json has no speedup")),
        }
    })
}
