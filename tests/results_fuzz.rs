//! The readers (`compare`, `summary`, `report`) as a hostile result file meets
//! them, as tests/gguf_fuzz.rs holds `generate` to a hostile GGUF: the
//! committed fixtures (tests/fixtures/) broken one field at a time (a value of
//! another type, a number no measurement gives, "NaN" and "inf", a key
//! removed), rows and keys given twice, sizes (a 300,000-sample row, a 20 MB
//! string, nesting past any parser's depth, an empty file, one past 64 MiB),
//! links, FIFOs and folders in the file's place, and seeded byte cases (bits
//! flipped, bytes cut, the text cut short). Each case runs every reader the
//! file concerns under a time limit and must end as documented (docs/cli.md):
//! exit 0, 1 or 2, one line when it fails, no panic, no input changed and
//! nothing written outside the folder it was given. Cases run on every core at
//! once; no time is asserted but the per-case limit. `CANDLE_LAB_FUZZ_SEED`
//! and `CANDLE_LAB_FUZZ_RESULTS` change the seed and the count of byte cases,
//! for a longer hunt than `just test`'s.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};

/// A reader must end well within this (a refusal takes milliseconds, a
/// comparison of a fixture a second in a dev build).
const LIMIT: Duration = Duration::from_secs(30);

/// The fixtures the cases start from: (the name a reader sees, the file).
const SEEDS: [(&str, &str); 7] = [
    ("basics.json", "amd-epyc-2t/basics.json"),
    ("cpu_vs_gpu.json", "amd-epyc-2t/cpu_vs_gpu.json"),
    ("matmul.json", "amd-epyc-2t/matmul.json"),
    ("precision.json", "amd-epyc-2t/precision.json"),
    ("block.json", "intel-xeon-2t/block.json"),
    ("generate.json", "generate-candle-cpu.json"),
    (REFERENCE, "reference-lab-gb10/week05-results-gb10.json"),
];

/// The reference lab's file: `summary` reads it with `--reference`.
const REFERENCE: &str = "week05-results-gb10.json";

fn fixture(rel: &str) -> PathBuf {
    common::repo_file(&format!("tests/fixtures/{rel}"))
}

/// What stands in a case's file's place.
#[derive(Clone)]
enum Content {
    Bytes(Vec<u8>),
    /// A sparse file of this many bytes.
    Sparse(u64),
    /// A symbolic link to this path.
    Link(PathBuf),
    Fifo,
    Folder,
}

/// What must come of a case, beyond the rules every case keeps.
#[derive(Clone, Copy)]
enum Expect {
    /// Anything documented.
    Any,
    /// `compare` refuses it (exit 1), its line holding this.
    Refused(&'static str),
}

struct Case {
    name: String,
    /// The file name the readers see (the seed's).
    file: &'static str,
    content: Content,
    expect: Expect,
}

fn case(name: impl Into<String>, file: &'static str, content: Content, expect: Expect) -> Case {
    Case {
        name: name.into(),
        file,
        content,
        expect,
    }
}

fn json_case(name: String, file: &'static str, value: &Value, expect: Expect) -> Case {
    case(
        name,
        file,
        Content::Bytes(value.to_string().into_bytes()),
        expect,
    )
}

/// Every JSON pointer below `v`, leaves and containers, in document order.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, inner) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(inner, p, out);
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(inner, p, out);
            }
        }
        _ => {}
    }
}

/// Values no field of a result file should take as they are: other types,
/// numbers out of any measurement's range, the non-finite strings.
fn strange() -> Vec<Value> {
    vec![
        Value::Null,
        json!("text"),
        json!(true),
        json!([]),
        json!({}),
        json!(0),
        json!(-1),
        json!(1e308),
        json!(1e-300),
        json!(u64::MAX),
        json!("NaN"),
        json!("inf"),
        json!("-inf"),
        json!([1, "x", null]),
    ]
}

/// One seed broken field by field: `n` fields given a strange value, a few
/// keys removed, rows given twice, and the sizes and non-finite numbers.
fn fields(file: &'static str, seed: &Value, rng: &mut StdRng, n: usize) -> Vec<Case> {
    let mut all = Vec::new();
    pointers(seed, String::new(), &mut all);
    let values = strange();
    let mut out = Vec::new();
    for _ in 0..n {
        let at = &all[rng.random_range(0..all.len())];
        let v = values[rng.random_range(0..values.len())].clone();
        let mut m = seed.clone();
        *m.pointer_mut(at).unwrap() = v.clone();
        out.push(json_case(
            format!("{file}: {at} = {v}"),
            file,
            &m,
            Expect::Any,
        ));
    }
    for _ in 0..n / 3 {
        let at = &all[rng.random_range(0..all.len())];
        let (parent, key) = at.rsplit_once('/').unwrap();
        let mut m = seed.clone();
        match m.pointer_mut(parent) {
            Some(Value::Object(o)) => drop(o.remove(key)),
            Some(Value::Array(a)) => drop(a.remove(key.parse::<usize>().unwrap())),
            _ => {}
        }
        out.push(json_case(
            format!("{file}: {at} removed"),
            file,
            &m,
            Expect::Any,
        ));
    }
    // Every list of rows (objects) with one row given twice.
    for at in all.iter().filter(|p| seed.pointer(p).is_some_and(rows)) {
        let mut m = seed.clone();
        let list = m.pointer_mut(at).unwrap().as_array_mut().unwrap();
        let i = rng.random_range(0..list.len());
        list.push(list[i].clone());
        out.push(json_case(
            format!("{file}: {at}/{i} twice"),
            file,
            &m,
            Expect::Any,
        ));
    }
    out
}

/// A list of objects with a precision or a size: rows.
fn rows(v: &Value) -> bool {
    v.as_array().is_some_and(|a| {
        !a.is_empty()
            && a.iter()
                .all(|r| r.get("precision").is_some() || r.get("size").is_some())
    })
}

/// The cases found by hand (issue 52), each with what `compare` must say.
fn named() -> Vec<Case> {
    let mut out = Vec::new();
    let read = |rel: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(fixture(rel)).unwrap()).unwrap()
    };
    let matmul = read("amd-epyc-2t/matmul.json");
    let file = "matmul.json";
    let mut twice = matmul.clone();
    let rows = twice["matmul"]["precisions"].as_array_mut().unwrap();
    rows.push(rows[0].clone());
    out.push(json_case(
        "a row given twice".into(),
        file,
        &twice,
        Expect::Refused("two rows are matmul"),
    ));
    let mut lab = read("reference-lab-gb10/week05-results-gb10.json");
    let rows = lab["matmul"]["precisions"].as_array_mut().unwrap();
    rows.push(rows[2].clone());
    out.push(json_case(
        "the reference lab's row given twice".into(),
        REFERENCE,
        &lab,
        Expect::Refused("two rows are matmul 4096 bf16 cuda"),
    ));
    for (name, v, says) in [
        ("a NaN median", json!("NaN"), "median_ms is \"NaN\""),
        ("an infinite median", json!("inf"), "median_ms is \"inf\""),
        ("a negative median", json!(-1.0), "median_ms is -1"),
        ("a median of null", Value::Null, "with measurements absent"),
    ] {
        let mut m = matmul.clone();
        m["matmul"]["precisions"][0]["median_ms"] = v;
        out.push(json_case(name.into(), file, &m, Expect::Refused(says)));
    }
    // 300,000 samples in a row, consistent with its median: compared, in bounded time.
    let mut big = matmul.clone();
    let row = &mut big["matmul"]["precisions"][0];
    let median = row["median_ms"].as_f64().unwrap();
    row["samples_wall_ms"] = json!(vec![median; 300_000]);
    out.push(json_case("300,000 samples".into(), file, &big, Expect::Any));
    let mut long = matmul.clone();
    long["device"]["name"] = json!("x".repeat(20 << 20));
    out.push(json_case(
        "a 20 MB device name".into(),
        file,
        &long,
        Expect::Any,
    ));
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    out.push(case(
        "nesting 100,000 deep",
        file,
        Content::Bytes(deep.into()),
        Expect::Refused("not JSON"),
    ));
    let text = std::fs::read_to_string(fixture("amd-epyc-2t/matmul.json")).unwrap();
    let dup_key = text.replacen('{', "{\"experiment\": \"block\",", 1);
    out.push(case(
        "a key given twice",
        file,
        Content::Bytes(dup_key.into()),
        Expect::Any,
    ));
    out.push(case(
        "an empty file",
        file,
        Content::Bytes(Vec::new()),
        Expect::Refused("not JSON"),
    ));
    out.push(case(
        "a number past f64",
        file,
        Content::Bytes(text.replacen("\"size\": 4096", "\"size\": 1e400", 1).into()),
        Expect::Any,
    ));
    out.push(case(
        "one byte past 64 MiB",
        file,
        Content::Sparse((64 << 20) + 1),
        Expect::Refused("more than the 64 MiB a result file may have"),
    ));
    out.push(case(
        "a link to /dev/zero",
        file,
        Content::Link("/dev/zero".into()),
        Expect::Refused("not a regular file"),
    ));
    out.push(case(
        "a link that leads nowhere",
        file,
        Content::Link("/nonexistent/x.json".into()),
        Expect::Refused("cannot read"),
    ));
    out.push(case(
        "a link to the fixture",
        file,
        Content::Link(fixture("amd-epyc-2t/matmul.json")),
        Expect::Any,
    ));
    out.push(case(
        "a FIFO",
        file,
        Content::Fifo,
        Expect::Refused("a FIFO, not a regular file"),
    ));
    out.push(case(
        "a folder",
        file,
        Content::Folder,
        Expect::Refused("a folder, not a regular file"),
    ));
    out
}

/// Seeded byte cases over every seed: bits flipped, a byte cut, the text cut.
fn bytes_broken(rng: &mut StdRng, n: usize) -> Vec<Case> {
    (0..n)
        .map(|k| {
            let (file, rel) = SEEDS[k % SEEDS.len()];
            let mut b = std::fs::read(fixture(rel)).unwrap();
            let at = rng.random_range(0..b.len());
            let what = match k % 3 {
                0 => {
                    b[at] ^= 1 << rng.random_range(0..8);
                    "a bit flipped"
                }
                1 => {
                    b.remove(at);
                    "a byte cut"
                }
                _ => {
                    b.truncate(at);
                    "cut"
                }
            };
            case(
                format!("{file}: {what} at byte {at}"),
                file,
                Content::Bytes(b),
                Expect::Any,
            )
        })
        .collect()
}

/// How one reader's run ended.
struct Ended {
    code: Option<i32>,
    stderr: String,
    elapsed: Duration,
}

/// Runs `program` with `args`, killed past [`LIMIT`].
fn run(program: &str, args: &[&Path], flags: &[&str]) -> Ended {
    let started = Instant::now();
    let mut child = Command::new(common::bin(program))
        .args(args)
        .args(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > LIMIT {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ended {
        code,
        stderr: reader.join().unwrap(),
        elapsed: started.elapsed(),
    }
}

/// Places `content` at `path`.
fn place(content: &Content, path: &Path) {
    match content {
        Content::Bytes(b) => std::fs::write(path, b).unwrap(),
        Content::Sparse(n) => std::fs::File::create(path).unwrap().set_len(*n).unwrap(),
        Content::Link(to) => std::os::unix::fs::symlink(to, path).unwrap(),
        Content::Fifo => rustix::fs::mkfifoat(
            rustix::fs::CWD,
            path,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap(),
        Content::Folder => std::fs::create_dir(path).unwrap(),
    }
}

/// The rules every reader's run keeps; `Ok(exit code)` or what was wrong.
fn judge(reader: &str, c: &Case, e: &Ended) -> Result<i32, String> {
    let fail = |why: &str| {
        Err(format!(
            "{reader} on {}: {why} (exit {:?}, {:?})\n{}",
            c.name, e.code, e.elapsed, e.stderr
        ))
    };
    let Some(code) = e.code else {
        return fail("killed at the time limit: it hangs");
    };
    if e.stderr.contains("panicked") || e.stderr.contains("RUST_BACKTRACE") {
        return fail("it panicked");
    }
    if !(0..=2).contains(&code) {
        return fail("an undocumented exit code");
    }
    // The line that says why: an error, or compare's gate.
    let lines: Vec<&str> = e.stderr.lines().collect();
    let why = lines
        .iter()
        .filter(|l| l.starts_with("error") || l.starts_with("--fail-if-slower"))
        .count();
    if why != usize::from(code != 0) {
        return fail("not one line saying why");
    }
    // compare says nothing else on stderr; report and summary also say what they
    // skipped and wrote.
    if reader == "compare" && lines.len() != why {
        return fail("more than that line");
    }
    Ok(code)
}

/// Runs one case in `dir` through every reader it concerns: its exit codes,
/// or what was wrong.
fn check(c: &Case, dir: &Path) -> Result<Vec<i32>, String> {
    let results = dir.join("results");
    let machine = results.join("m");
    std::fs::create_dir_all(&machine).unwrap();
    // The summary's machine folder: the fixtures, the case in its file's place.
    for (name, rel) in SEEDS.iter().filter(|(n, _)| *n != REFERENCE) {
        if *name != c.file {
            std::fs::copy(fixture(rel), machine.join(name)).unwrap();
        }
    }
    let path = machine.join(c.file);
    place(&c.content, &path);
    let reference = if c.file == REFERENCE {
        path.clone()
    } else {
        fixture(SEEDS[6].1)
    };
    let seed = fixture(SEEDS.iter().find(|(n, _)| *n == c.file).unwrap().1);
    let before = std::fs::symlink_metadata(&path)
        .ok()
        .map(|m| (m.len(), m.mtime_nsec_pair()));

    let mut codes = Vec::new();
    let compared = run("compare", &[&seed, &path], &["--fail-if-slower", "10"]);
    let code = judge("compare", c, &compared)?;
    if let Expect::Refused(says) = c.expect {
        let line = compared.stderr.lines().next().unwrap_or("");
        if code != 1 || !line.starts_with("error: ") || !line.contains(says) {
            return Err(format!(
                "compare on {}: expected a refusal saying {says:?}\n{}",
                c.name, compared.stderr
            ));
        }
    }
    codes.push(code);
    let summary = run(
        "summary",
        &[],
        &[
            "--machine-dir",
            machine.to_str().unwrap(),
            "--reference",
            reference.to_str().unwrap(),
        ],
    );
    codes.push(judge("summary", c, &summary)?);
    let report = run("report", &[], &["--results-dir", results.to_str().unwrap()]);
    codes.push(judge("report", c, &report)?);
    let after = std::fs::symlink_metadata(&path)
        .ok()
        .map(|m| (m.len(), m.mtime_nsec_pair()));
    if before != after {
        return Err(format!("{}: a reader changed the file it read", c.name));
    }
    let outside: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| *p != results)
        .collect();
    if !outside.is_empty() {
        return Err(format!(
            "{}: written outside the results folder: {outside:?}",
            c.name
        ));
    }
    Ok(codes)
}

trait MtimePair {
    fn mtime_nsec_pair(&self) -> (i64, i64);
}

impl MtimePair for std::fs::Metadata {
    fn mtime_nsec_pair(&self) -> (i64, i64) {
        use std::os::unix::fs::MetadataExt;
        (self.mtime(), self.mtime_nsec())
    }
}

/// Runs every case on every core; returns the failures and the exits seen
/// (of all readers' runs).
fn run_all(cases: &[Case]) -> (Vec<String>, [usize; 3]) {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let codes = Mutex::new([0usize; 3]);
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(c) = cases.get(i) else { break };
                let dir = tempfile::tempdir().unwrap();
                match check(c, dir.path()) {
                    Err(why) => failures.lock().unwrap().push(why),
                    Ok(seen) => {
                        let mut all = codes.lock().unwrap();
                        for code in seen {
                            all[code as usize] += 1;
                        }
                    }
                }
            });
        }
    });
    (failures.into_inner().unwrap(), codes.into_inner().unwrap())
}

#[test]
fn no_result_file_makes_a_reader_panic_hang_or_write_where_it_should_not() {
    let seed = std::env::var("CANDLE_LAB_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0052);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cases: Vec<Case> = SEEDS
        .iter()
        .map(|(file, rel)| {
            case(
                format!("{file} as committed"),
                file,
                Content::Bytes(std::fs::read(fixture(rel)).unwrap()),
                Expect::Any,
            )
        })
        .collect();
    cases.extend(named());
    let n_named = cases.len();
    for (file, rel) in SEEDS {
        let value: Value =
            serde_json::from_str(&std::fs::read_to_string(fixture(rel)).unwrap()).unwrap();
        cases.extend(fields(file, &value, &mut rng, 20));
    }
    // CANDLE_LAB_FUZZ_RESULTS: more byte cases for a longer hunt (42 in `just test`).
    let n_bytes = std::env::var("CANDLE_LAB_FUZZ_RESULTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(42);
    cases.extend(bytes_broken(&mut rng, n_bytes));
    let started = Instant::now();
    let (failures, codes) = run_all(&cases);
    eprintln!(
        "{} cases ({n_named} named, seed {seed:#x}), {} reader runs in {:.1} s; exits 0/1/2: {codes:?}",
        cases.len(),
        codes.iter().sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    // The cases reach both sides of every check: some files are read, some refused.
    assert!(codes[0] > 0 && codes[1] > 0, "exits 0/1/2: {codes:?}");
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}
