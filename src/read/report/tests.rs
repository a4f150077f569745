//! The README builder on fixture folders: the committed CPU files, the
//! reference lab's file, a made-up GPU machine with a matmul and a sweep, and a
//! file that is not a result. Built twice, byte for byte the same; then what it
//! must say.

use std::fs;
use std::path::Path;

use super::*;
use crate::bench::sweep::tests::{failed, point, results};
use crate::precision::Precision;
use crate::schema::{self, Body, DeviceKind};

const AMD_MATMUL: &str = include_str!("../../../tests/fixtures/amd-epyc-2t/matmul.json");
const AMD_CPU_VS_GPU: &str = include_str!("../../../tests/fixtures/amd-epyc-2t/cpu_vs_gpu.json");
const AMD_BASICS: &str = include_str!("../../../tests/fixtures/amd-epyc-2t/basics.json");
const REFERENCE: &str =
    include_str!("../../../tests/fixtures/reference-lab-gb10/week05-results-gb10.json");

fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A GPU run, made from the CPU file: a matmul with its CPU comparison, and a
/// sweep with a failed point.
fn gpu_files() -> (String, String) {
    let mut file = schema::from_json(AMD_MATMUL).unwrap();
    file.device.kind = DeviceKind::Cuda;
    file.device.name = "NVIDIA H200".into();
    file.device.label = "cuda:0".into();
    file.environment.git_commit = Some("0123456789ab".into());
    file.created_utc = "2026-12-01T10:00:00Z".into();
    let Body::Matmul(m) = &mut file.body else {
        panic!("not matmul")
    };
    m.device = DeviceKind::Cuda;
    let mut cpu = m.precisions[0].clone();
    // Medians and the samples they come from, changed together.
    for row in &mut m.precisions {
        let measured = row.measured.as_mut().unwrap();
        measured.median_ms = 4.0;
        measured.samples_wall_ms = vec![4.0; 3];
    }
    let measured = cpu.measured.as_mut().unwrap();
    measured.median_ms = 400.0;
    measured.samples_wall_ms = vec![400.0; 3];
    m.cpu_fp32 = Some(cpu);
    let matmul = serde_json::to_string_pretty(&file).unwrap();

    let mut sweep = results(vec![
        point(64, Precision::F32, 0.5, Some(67.0)),
        point(64, Precision::Bf16, 0.25, Some(989.5)),
        point(1024, Precision::F32, 1.0, Some(67.0)),
        failed(1024, Precision::Bf16),
    ]);
    sweep.device = DeviceKind::Cuda;
    sweep.complete = true;
    file.experiment = "sweep".into();
    file.body = Body::Sweep(sweep);
    (matmul, serde_json::to_string_pretty(&file).unwrap())
}

fn fixture(dir: &Path) {
    write(dir, "amd-epyc-2t/matmul.json", AMD_MATMUL);
    write(dir, "amd-epyc-2t/cpu_vs_gpu.json", AMD_CPU_VS_GPU);
    write(dir, "amd-epyc-2t/basics.json", AMD_BASICS);
    write(
        dir,
        "reference-lab-gb10/week05-results-gb10.json",
        REFERENCE,
    );
    write(dir, "reference-lab-gb10/README.md", "not JSON: not read");
    let (matmul, sweep) = gpu_files();
    write(dir, "nvidia-h200/matmul.json", &matmul);
    write(dir, "nvidia-h200/sweep.json", &sweep);
    write(
        dir,
        "nvidia-h200/notes.json",
        "{\"schema_version\": \"9.0\"}",
    );
    // Not a machine folder: ignored.
    write(dir, "README.md", "old README");
}

fn built(dir: &Path) -> Built {
    build(&load(dir).unwrap().sources).unwrap()
}

#[test]
fn same_files_in_same_readme_out() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let first = built(dir.path());
    assert_eq!(first, built(dir.path()));
    // A second copy elsewhere, written in another order, builds the same bytes.
    let other = tempfile::tempdir().unwrap();
    let (matmul, sweep) = gpu_files();
    write(other.path(), "nvidia-h200/sweep.json", &sweep);
    write(
        other.path(),
        "nvidia-h200/notes.json",
        "{\"schema_version\": \"9.0\"}",
    );
    write(other.path(), "nvidia-h200/matmul.json", &matmul);
    write(
        other.path(),
        "reference-lab-gb10/week05-results-gb10.json",
        REFERENCE,
    );
    write(other.path(), "amd-epyc-2t/basics.json", AMD_BASICS);
    write(other.path(), "amd-epyc-2t/cpu_vs_gpu.json", AMD_CPU_VS_GPU);
    write(other.path(), "amd-epyc-2t/matmul.json", AMD_MATMUL);
    assert_eq!(first, built(other.path()));
}

#[test]
fn every_file_is_listed_with_its_commit_and_date() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let md = built(dir.path()).readme;
    for want in [
        "| amd-epyc-2t | [matmul.json](amd-epyc-2t/matmul.json) | matmul | AMD EPYC (cpu) | candle 0.11.1 | d9c5875220a3 | 2026-11-29T17:44:51Z |",
        "| amd-epyc-2t | [basics.json](amd-epyc-2t/basics.json) | basics |",
        "[week05-results-gb10.json](reference-lab-gb10/week05-results-gb10.json) | matmul | NVIDIA GB10 (cuda) | pytorch 2.13.0+cu130 | - (not a candle-lab run) | 2026-07-16 |",
        "[notes.json](nvidia-h200/notes.json) | not read: schema_version \"9.0\": this build reads 2.x (and 1) |",
    ] {
        assert!(md.contains(want), "missing {want:?} in\n{md}");
    }
    assert!(!md.contains("old README") && !md.contains("not JSON"));
    assert!(
        !md.contains(dir.path().to_str().unwrap()),
        "no absolute paths"
    );
}

#[test]
fn matmul_puts_machines_side_by_side_with_a_chart_each() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let b = built(dir.path());
    let md = &b.readme;
    for want in [
        "| precision (device) | [amd-epyc-2t](amd-epyc-2t/matmul.json) | [nvidia-h200](nvidia-h200/matmul.json) | [reference-lab-gb10](reference-lab-gb10/week05-results-gb10.json) |",
        "| *commit* | d9c5875220a3 | 0123456789ab | - (not a candle-lab run) |",
        "| *size n* | 4096 | 4096 | 4096 |",
        // GPU rows first, then the CPU ones; GFLOP/s from the medians shown.
        "| fp32 (cuda) | - | 4.000 ms, 34360 GFLOP/s | 7.440 ms, 18473 GFLOP/s |",
        "| fp32 (cpu) | 342.755 ms, 401.0 GFLOP/s | 400.000 ms, 343.6 GFLOP/s | 168.281 ms, 816.7 GFLOP/s |",
        "[![matmul on amd-epyc-2t](amd-epyc-2t/matmul.svg)](amd-epyc-2t/matmul.svg)",
        "[![matmul on reference-lab-gb10](reference-lab-gb10/week05-results-gb10.svg)](reference-lab-gb10/week05-results-gb10.svg)",
    ] {
        assert!(md.contains(want), "missing {want:?} in\n{md}");
    }
    let cuda_row = md.find("| fp32 (cuda)").unwrap();
    assert!(cuda_row < md.find("| fp32 (cpu)").unwrap());
    let paths: Vec<&str> = b.files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "amd-epyc-2t/matmul.svg",
            "nvidia-h200/matmul.svg",
            "reference-lab-gb10/week05-results-gb10.svg",
            "nvidia-h200/sweep.svg",
        ]
    );
    let bars = &b.files[0].1;
    assert!(bars.starts_with("<svg") && bars.contains("fp16 (cpu)") && bars.contains("AMD EPYC"));
}

#[test]
fn speedups_come_from_cpu_vs_gpu_and_from_matmuls_cpu_comparisons() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let md = built(dir.path()).readme;
    let section = &md[md.find("## cpu_vs_gpu").unwrap()..md.find("## sweep").unwrap()];
    for want in [
        "| amd-epyc-2t | [cpu_vs_gpu.json](amd-epyc-2t/cpu_vs_gpu.json) | 4096 |",
        "| n/a: no CUDA device in use",
        "| nvidia-h200 | [matmul.json](nvidia-h200/matmul.json) (its CPU comparison) | 4096 | 400.000 | 4.000 | 100.0x | 0123456789ab |",
        "| 168.281 | 7.440 | 22.6x | - (not a candle-lab run) | 2026-07-16 |",
    ] {
        assert!(section.contains(want), "missing {want:?} in\n{section}");
    }
}

/// The sweep's section is its view's: the terminal's tables, how it was
/// sampled, and its chart drawn again from the JSON.
#[test]
fn a_sweep_has_its_tables_sampling_and_chart() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    let b = built(dir.path());
    let section = &b.readme[b.readme.find("## sweep").unwrap()..];
    for want in [
        "### candle 0.11.1 on nvidia-h200",
        "(NVIDIA H200 (cuda:0), commit 0123456789ab, 2026-12-01T10:00:00Z)",
        "- 4 points (complete); per point: warmup 2, adaptive: 10..10000 samples",
        "clock overhead (an empty sample through the same path, 200 samples): median 0.000050 ms wall",
        "[![sweep on nvidia-h200](nvidia-h200/sweep.svg)](nvidia-h200/sweep.svg)",
        "| n    | fp32 GFLOP/s | bf16 GFLOP/s |",
        "| 1024 |       2147.5 |        error |",
        "| 1024 |      bf16 | error: CUDA_ERROR_OUT_OF_MEMORY |",
    ] {
        assert!(section.contains(want), "missing {want:?} in\n{section}");
    }
    let svg = &b
        .files
        .iter()
        .find(|(p, _)| p == "nvidia-h200/sweep.svg")
        .unwrap()
        .1;
    assert!(
        svg.contains("datasheet peak"),
        "a GPU sweep draws its peaks"
    );
}
