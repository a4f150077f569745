//! The registry of experiments is the result body enum (`schema::Body`, listed
//! by `schema::Kind`); this holds every list that remains outside the compiler
//! to it: for each experiment NAME, its files (`experiments/NAME.rs`,
//! `src/bench/NAME.rs` or `NAME/`, `src/schema/NAME.rs`,
//! `src/export/views/NAME.rs`, a test that runs it), Cargo's `[[bin]]`, its
//! `just` recipe and what it runs, and the presets (`small`, `results`,
//! `gpu-call`) that the program accepts. The files named here are the list in
//! docs/architecture.md's "Adding an experiment".

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use candle_lab::schema::Kind;

fn root() -> PathBuf {
    common::repo_file("")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The file stems of `dir`'s `*.rs` files.
fn stems(dir: &str) -> BTreeSet<String> {
    std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect()
}

fn names() -> BTreeSet<String> {
    Kind::all().map(|k| k.name().to_string()).collect()
}

/// The just recipe of experiment `name` (`cpu_vs_gpu` is `cpu-vs-gpu`).
fn recipe(name: &str) -> String {
    name.replace('_', "-")
}

/// The programs: Cargo.toml's `[[bin]]`s whose source is under experiments/.
fn programs() -> BTreeSet<String> {
    let cargo = read("Cargo.toml");
    cargo
        .split("[[bin]]")
        .skip(1)
        .filter_map(|bin| {
            let field = |key: &str| {
                bin.lines()
                    .find_map(|l| l.strip_prefix(key)?.trim().strip_prefix("= "))
                    .map(|v| v.trim_matches('"').to_string())
            };
            let (name, path) = (field("name")?, field("path")?);
            path.starts_with("experiments/").then_some(name)
        })
        .collect()
}

#[test]
fn every_program_in_experiments_is_a_registered_experiment() {
    assert_eq!(stems("experiments"), names());
    assert_eq!(
        programs(),
        names(),
        "Cargo.toml's [[bin]]s under experiments/"
    );
}

#[test]
fn every_experiment_has_its_files() {
    let exists = |rel: String| root().join(&rel).exists().then_some(()).ok_or(rel);
    let mut missing = Vec::new();
    for kind in Kind::all() {
        let n = kind.name();
        let bench = exists(format!("src/bench/{n}.rs")).or(exists(format!("src/bench/{n}/mod.rs")));
        for found in [
            bench,
            exists(format!("src/schema/{n}.rs")),
            exists(format!("src/export/views/{n}.rs")),
            exists(format!("experiments/{n}.rs")),
        ] {
            missing.extend(found.err());
        }
    }
    assert!(missing.is_empty(), "missing: {missing:?}");
}

#[test]
fn every_experiment_has_a_bin_a_recipe_and_a_test_that_runs_it() {
    let cargo = read("Cargo.toml");
    let justfile = read("justfile");
    let tests: String = stems("tests")
        .iter()
        .filter(|t| *t != "registry")
        .map(|t| read(&format!("tests/{t}.rs")))
        .collect();
    for n in names() {
        let bin = format!("[[bin]]\nname = \"{n}\"\npath = \"experiments/{n}.rs\"");
        assert!(cargo.contains(&bin), "Cargo.toml has no {bin:?}");
        // The recipe runs the program itself, the built one, with the
        // recipe's arguments.
        let r = recipe(&n);
        let body = recipe_body(&justfile, &r);
        assert!(
            body.iter()
                .any(|l| l.starts_with(&format!("{{{{bin}}}}/{n} ")) && l.ends_with("{{args}}")),
            "the recipe `{r}` does not run {{{{bin}}}}/{n} with its arguments: {body:?}"
        );
        // A test names the program it runs as a string: run("NAME", ...).
        assert!(
            tests.contains(&format!("\"{n}\"")),
            "no test under tests/ runs {n}"
        );
    }
}

/// Every program takes `--preset small` (a preset naming a flag the program
/// does not have would be refused here) and plans a run with it.
#[test]
fn every_small_preset_is_accepted_by_its_program() {
    for n in names() {
        let out = common::run(&n, &["--preset", "small", "--device", "cpu", "--dry-run"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{n} --preset small: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.starts_with(&format!("dry run: {n} ")), "{stdout}");
    }
}

/// The lines a recipe runs: the indented lines under `NAME ...:`, trimmed.
fn recipe_body(justfile: &str, name: &str) -> Vec<String> {
    let mut lines = justfile.lines();
    let header = format!("{name} ");
    let colon = format!("{name}:");
    lines
        .find(|l| l.starts_with(&header) || l.starts_with(&colon))
        .unwrap_or_else(|| panic!("the justfile has no recipe `{name}`"));
    lines
        .take_while(|l| l.starts_with(' ') || l.is_empty())
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Every program plans a run at `--preset results` on the CPU (as `just
/// results` runs it here) and at `--preset gpu-call` on a GPU (the one-call
/// GPU run's; a dry run opens no device, so this holds in a CPU build): a
/// preset naming a flag the program does not have, or a value its config
/// refuses, exits non-zero here. `results` asks for the real model where it
/// runs `generate`: without the file (`just model`) that one is skipped with
/// a line, unless CI is set (CI fetches it).
#[test]
fn every_results_and_gpu_call_preset_is_accepted_by_its_program() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().to_str().unwrap();
    for n in programs() {
        for (preset, device) in [("results", "cpu"), ("gpu-call", "cuda")] {
            let args = [
                "--preset",
                preset,
                "--device",
                device,
                "--results-dir",
                results,
                "--dry-run",
            ];
            let out = common::run(&n, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.starts_with("error: no model at ") && std::env::var_os("CI").is_none() {
                eprintln!("skipped: {n} --preset {preset}: {stderr}");
                continue;
            }
            assert!(out.status.success(), "{n} {args:?}: {stderr}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.starts_with(&format!("dry run: {n} ")), "{stdout}");
        }
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a dry run writes nothing"
    );
}

/// Every program runs at its small preset on the CPU and writes a file every
/// reader takes (the envelope, the typed read-back, the JSON Schema).
#[test]
fn every_experiment_runs_at_its_small_preset() {
    for n in names() {
        let (json, _) = common::run_result(&n, &["--preset", "small", "--device", "cpu"]);
        assert!(
            json["command"].as_str().unwrap().contains("--preset small"),
            "{n}: the command line is recorded as given"
        );
    }
}

/// The words of the bash array `name=(...)` in `text`.
fn bash_array(text: &str, name: &str) -> BTreeSet<String> {
    let start = format!("{name}=(");
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(start.as_str()))
        .unwrap_or_else(|| panic!("no {start} in the justfile"));
    let words = line.split(')').next().unwrap_or_default();
    words.split_whitespace().map(String::from).collect()
}

/// `just results` runs every experiment, or names it among those it leaves
/// out (with the reason beside it): a new one cannot be forgotten.
#[test]
fn just_results_runs_or_names_every_experiment() {
    let justfile = read("justfile");
    let (steps, left_out) = (
        bash_array(&justfile, "steps"),
        bash_array(&justfile, "left_out"),
    );
    for name in names() {
        assert!(
            steps.contains(&name) != left_out.contains(&name),
            "{name}: in just results' steps or in its left_out, once"
        );
    }
    let tools = ["report", "summary"];
    for tool in tools {
        assert!(steps.contains(tool), "just results ends with {tool}");
    }
    // And names nothing else (a misspelt name would be a step that fails).
    for name in steps.iter().chain(&left_out) {
        assert!(
            names().contains(name) || tools.contains(&name.as_str()),
            "just results names {name}, which is no experiment"
        );
    }
    assert!(left_out.iter().all(|n| !tools.contains(&n.as_str())));
    // And each step is the built program at the results preset (the quick
    // mode's small one), as the recipe's loop runs it.
    let body = recipe_body(&justfile, "results");
    for line in [
        "preset=results wait=(--wait-for-quiet 60)",
        "if [[ -n $quick ]]; then preset=small wait=(); fi",
        "for name in \"${steps[@]}\"; do",
        "args=(--results-dir results --preset \"$preset\")",
        "\"{{bin}}/$name\" \"${args[@]}\"",
    ] {
        assert!(
            body.iter().any(|l| l == line),
            "just results does not run `{line}`"
        );
    }
}

/// The quick `just results` and the GPU run's CPU rehearsal take each
/// program's small sizes from the program (`--preset small`), not from a
/// list of flags of their own.
#[test]
fn the_small_sizes_live_in_the_programs_only() {
    let justfile = read("justfile");
    assert!(
        justfile.contains("--preset small"),
        "the quick mode uses the preset"
    );
    let gpu_run = read("scripts/gpu-run.sh");
    assert!(
        gpu_run.contains("preset=gpu-call")
            && gpu_run.contains("preset=small")
            && gpu_run.contains(r#"--preset "$preset""#),
        "gpu-run.sh gives every experiment its preset (small under --cpu)"
    );
    for flag in ["--mlp 96", "--hidden 64", "--first-size 128", "--mib 1"] {
        assert!(!justfile.contains(flag), "the justfile sets {flag} itself");
        assert!(!gpu_run.contains(flag), "gpu-run.sh sets {flag} itself");
    }
}
