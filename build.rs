//! Build script: records, for the JSON reports, the git commit the binary was built
//! from, the candle-core version that Cargo.lock resolved, and with the `cuda`
//! feature the CUDA version of the `nvcc` that compiled Candle's kernels. All are
//! optional: a source tarball without `.git` or a lock file still builds. With
//! the `cuda` feature it also compiles the suite's own kernels
//! (`src/kernels/cuda/*.cu`) to PTX with that `nvcc`, which `src/kernels`
//! includes and the driver loads at run time.
use std::path::Path;
use std::process::Command;

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let root = Path::new(&root);
    // Rerun when the sources change, and only then: git's own files (the
    // index, which `git status` rewrites; HEAD, which a commit moves) are not
    // watched, so neither relinks every program. The commit recorded is the
    // one the sources were built from, "-dirty" when they differed from it:
    // after a commit of what was built, programs say "<parent>-dirty" until a
    // source changes (docs/measuring.md, "Which build").
    let sources = ["Cargo.lock", "build.rs", "src", "experiments", "tools"].map(|s| root.join(s));
    for watched in sources {
        // Watching a file that does not exist would rerun this script every build.
        if watched.exists() {
            println!("cargo:rerun-if-changed={}", watched.display());
        }
    }
    let commit = git(root, &["rev-parse", "--short=12", "HEAD"]).map(|sha| {
        // results/ holds outputs, not sources: rewriting it does not make a build dirty.
        // --no-optional-locks: a status that rewrites no index.
        let dirty = git(
            root,
            &[
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!results",
            ],
        )
        .is_some_and(|s| !s.is_empty());
        if dirty {
            format!("{sha}-dirty")
        } else {
            sha
        }
    });
    println!(
        "cargo:rustc-env=CANDLE_LAB_GIT_COMMIT={}",
        commit.unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=CANDLE_LAB_CANDLE_VERSION={}",
        candle_version(root).unwrap_or_default()
    );
    let cuda = if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        println!("cargo:rerun-if-env-changed=PATH");
        compile_kernels(root);
        nvcc_version().unwrap_or_default()
    } else {
        String::new()
    };
    println!("cargo:rustc-env=CANDLE_LAB_CUDA_BUILD_VERSION={cuda}");
}

/// Each `src/kernels/cuda/NAME.cu` to `$OUT_DIR/kernels/NAME.ptx`, for
/// compute capability `CUDA_COMPUTE_CAP` (what Candle's kernels are built for;
/// 75, the oldest CUDA 13 supports, when unset). PTX for an older capability
/// runs on newer GPUs: the driver compiles it for the one in hand. `NVCC`
/// names the compiler, else `nvcc` on PATH. A failure stops the build with
/// nvcc's message: without the kernels the `cuda` feature cannot work.
fn compile_kernels(root: &Path) {
    let dir = root.join("src/kernels/cuda");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("kernels");
    std::fs::create_dir_all(&out).expect("creating OUT_DIR/kernels");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    println!("cargo:rerun-if-env-changed=NVCC");
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "75".into());
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let mut sources: Vec<_> = std::fs::read_dir(&dir)
        .expect("reading src/kernels/cuda")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu" || x == "cuh"))
        .collect();
    sources.sort();
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
    }
    for src in sources
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
    {
        let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("kernel");
        let ptx = out.join(format!("{stem}.ptx"));
        let status = Command::new(&nvcc)
            .args(["--ptx", "-O3", "-std=c++17", "-lineinfo"])
            .arg(format!("-arch=compute_{cap}"))
            .arg("-I")
            .arg(&dir)
            .arg("-o")
            .arg(&ptx)
            .arg(src)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {nvcc} for {}: {e}", src.display()));
        assert!(status.success(), "{nvcc} failed on {}", src.display());
    }
}

/// "13.0" from `nvcc --version`'s "Cuda compilation tools, release 13.0, V13.0.88".
fn nvcc_version() -> Option<String> {
    let out = Command::new("nvcc").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let release = text.split("release ").nth(1)?;
    Some(release.split(',').next()?.trim().to_string())
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The `version = "..."` line that follows `name = "candle-core"` in Cargo.lock.
fn candle_version(root: &Path) -> Option<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).ok()?;
    let mut lines = lock
        .lines()
        .skip_while(|l| l.trim() != r#"name = "candle-core""#);
    lines.next()?;
    let version = lines.next()?.trim().strip_prefix("version = ")?;
    Some(version.trim_matches('"').to_string())
}
