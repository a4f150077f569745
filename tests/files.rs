//! Never harm a user's files, never lose a finished run (issue 8): every case the
//! issue lists, one test each, named `caseN_...` after it, running the real
//! binaries on small sizes. Tests that need another user (a sticky folder, a
//! read-only file) run the binary as `nobody` when the tests run as root, as CI
//! does; as an ordinary user they use what that user can set up.
//!
//! 1. outputs that are not regular files are refused; links are written
//!    through; permissions are kept; `--output -` is standard output
//! 2. a closed standard output keeps the result and ends quietly
//! 3. paths that are not UTF-8 work
//! 4. unusable outputs are found before computing; an interrupted run removes
//!    the folders it created
//! 5. an interrupt during the write removes the temporary file
//! 6. `--iters` and `--warmup` are bounded
//! 7. the recorded command pastes back into bash
//! 8. the small ones: rows in the stderr line, `--help` default, `/proc`
//!    wording, a newline in a path, no temporary names in error lines

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use candle_lab::export::output::PAUSE_BEFORE_RENAME_ENV;
use serde_json::Value;

const NOBODY: u32 = 65534;

/// How src/export/output.rs names its temporary files.
const TEMP_PREFIX: &str = ".candle-lab-";

fn bin(name: &str) -> &'static str {
    match name {
        "basics" => env!("CARGO_BIN_EXE_basics"),
        "precision" => env!("CARGO_BIN_EXE_precision"),
        "matmul" => env!("CARGO_BIN_EXE_matmul"),
        "cpu_vs_gpu" => env!("CARGO_BIN_EXE_cpu_vs_gpu"),
        other => panic!("no binary {other}"),
    }
}

/// A finished run: exit status, standard output, standard error.
struct Ran {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

impl Ran {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The `error` lines of stderr.
    fn errors(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("error"))
            .collect()
    }

    /// Tables reached stdout: the run computed.
    fn computed(&self) -> bool {
        String::from_utf8_lossy(&self.stdout).contains("===")
    }

    fn no_panic(&self) {
        assert!(
            !self.stderr.contains("panicked") && self.code() != Some(101),
            "{}",
            self.stderr
        );
    }
}

/// `name args...` with stdout and stderr captured to files (no pipe to fill up).
fn command(name: &str, args: &[&OsStr]) -> Command {
    let mut cmd = Command::new(bin(name));
    cmd.args(args).stdin(Stdio::null());
    cmd
}

/// Spawns `cmd` with its output captured in `logs`.
fn spawn(mut cmd: Command, logs: &Path) -> Child {
    cmd.stdout(fs::File::create(logs.join("stdout")).unwrap())
        .stderr(fs::File::create(logs.join("stderr")).unwrap())
        .spawn()
        .expect("the binary starts")
}

/// Waits for `child` (killed after two minutes: a run that hangs fails the test).
fn wait(mut child: Child, logs: &Path) -> Ran {
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run did not end in two minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        status,
        stdout: fs::read(logs.join("stdout")).unwrap(),
        stderr: String::from_utf8_lossy(&fs::read(logs.join("stderr")).unwrap()).into_owned(),
    }
}

fn run_cmd(cmd: Command) -> Ran {
    let logs = tempfile::tempdir().unwrap();
    let child = spawn(cmd, logs.path());
    wait(child, logs.path())
}

fn run(name: &str, args: &[&OsStr]) -> Ran {
    run_cmd(command(name, args))
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// `basics --device cpu --output PATH`: the quickest full run.
fn basics_to(path: &Path) -> Command {
    command(
        "basics",
        &[os("--device"), os("cpu"), os("--output"), path.as_os_str()],
    )
}

/// The run failed with one error line holding `expect`, before computing.
fn refused_before_computing(ran: &Ran, expect: &str) {
    ran.no_panic();
    assert_eq!(ran.code(), Some(1), "{}", ran.stderr);
    let errors = ran.errors();
    assert_eq!(errors.len(), 1, "one error line: {}", ran.stderr);
    assert!(
        errors[0].contains(expect),
        "{expect:?} not in {}",
        ran.stderr
    );
    assert!(!ran.computed(), "refused before computing");
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn entries(dir: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    v.sort();
    v
}

fn running_as_root() -> bool {
    let probe = tempfile::NamedTempFile::new().unwrap();
    probe.as_file().metadata().unwrap().uid() == 0
}

/// A temporary folder that `nobody` can enter and write in.
fn open_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn as_nobody(mut cmd: Command) -> Command {
    // std drops root's supplementary groups when it sets the uid.
    cmd.uid(NOBODY).gid(NOBODY);
    cmd
}

fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {name}");
}

/// Polls `ready` every 20 ms for up to a minute.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------- case 1

#[test]
fn case1_device_node_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    // As root, a private copy of /dev/null: a regression must not break the machine's.
    let node = if running_as_root() {
        let node = dir.path().join("null");
        let made = Command::new("mknod")
            .args([node.as_os_str(), os("c"), os("1"), os("3")])
            .status()
            .unwrap();
        assert!(made.success(), "mknod");
        node
    } else {
        PathBuf::from("/dev/null")
    };
    let ran = run_cmd(basics_to(&node));
    refused_before_computing(&ran, "a character device, not a regular file");
    assert!(fs::metadata(&node).unwrap().file_type().is_char_device());
    let left = entries(dir.path());
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().contains(TEMP_PREFIX)),
        "{left:?}"
    );
}

#[test]
fn case1_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // `wait` fails the test if the run blocks opening the FIFO.
    let ran = run_cmd(basics_to(&fifo));
    refused_before_computing(&ran, "a FIFO");
    assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(entries(dir.path()), ["fifo"]);
}

#[test]
fn case1_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_cmd(basics_to(dir.path()));
    refused_before_computing(&ran, "a folder, not a regular file");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn case1_dangling_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(dir.path().join("missing.json"), &link).unwrap();
    let ran = run_cmd(basics_to(&link));
    refused_before_computing(&ran, "symbolic link that leads to no file");
    assert_eq!(entries(dir.path()), ["link.json"]);
}

#[test]
fn case1_link_is_written_through_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    fs::write(&real, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let ran = run_cmd(basics_to(&link));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("real.json"));
    assert_eq!(json(&real)["experiment"], "basics");
    assert_eq!(entries(dir.path()), ["link.json", "real.json"]);
}

#[test]
fn case1_another_users_link_in_a_sticky_folder_is_not_followed() {
    let dir = open_tempdir();
    let sticky = dir.path().join("sticky");
    fs::create_dir(&sticky).unwrap();
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("victim.json");
    fs::write(&victim, "precious").unwrap();
    let link = sticky.join("out.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let ran = if running_as_root() {
        // Another user planted the link; root must not follow it.
        std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
        run_cmd(basics_to(&link))
    } else {
        // We planted it in a folder someone else (root) owns: nobody else may
        // follow it, but we may. Check that we do.
        eprintln!("not root: checking only that our own link is followed");
        let ran = run_cmd(basics_to(&link));
        assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
        return;
    };
    refused_before_computing(&ran, "another user's symbolic link in a sticky");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
}

#[test]
fn case1_replaced_file_keeps_its_permissions_and_new_files_follow_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.json");
    fs::write(&old, "old").unwrap();
    fs::set_permissions(&old, fs::Permissions::from_mode(0o640)).unwrap();
    let new = dir.path().join("new.json");
    for path in [&old, &new] {
        // The umask is the shell's to set: run through one that sets 022.
        let mut cmd = Command::new("sh");
        cmd.args([
            os("-c"),
            os(r#"umask 022 && exec "$@""#),
            os("sh"),
            os(bin("basics")),
            os("--device"),
            os("cpu"),
            os("--output"),
            path.as_os_str(),
        ]);
        let ran = run_cmd(cmd);
        assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
        assert_eq!(json(path)["experiment"], "basics");
    }
    let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&old), 0o640, "kept");
    assert_eq!(mode(&new), 0o644, "0666 less the umask, not 0600");
}

#[test]
fn case1_dash_writes_json_to_stdout_and_tables_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command(
        "basics",
        &[os("--device"), os("cpu"), os("--output"), os("-")],
    );
    cmd.current_dir(dir.path());
    let ran = run_cmd(cmd);
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let v: Value = serde_json::from_slice(&ran.stdout).expect("stdout is JSON only");
    assert_eq!(v["experiment"], "basics");
    assert!(ran.stderr.contains("==="), "tables on stderr");
    assert!(entries(dir.path()).is_empty(), "no file named -");
}

// ---------------------------------------------------------------- case 2

#[test]
fn case2_closed_stdout_keeps_the_result_and_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    let args = [
        os("--device"),
        os("cpu"),
        os("--size"),
        os("64"),
        os("--iters"),
        os("2"),
        os("--output"),
        out.as_os_str(),
    ];
    // `| true`: the reader is gone before anything is printed.
    let mut cmd = command("matmul", &args);
    cmd.stdout(Stdio::piped())
        .stderr(fs::File::create(logs.path().join("stderr")).unwrap());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let stderr = fs::read_to_string(logs.path().join("stderr")).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{stderr}"
    );
    assert_eq!(json(&out)["experiment"], "matmul");

    // `| head -c 10`, through a shell, as the issue ran it.
    fs::remove_file(&out).unwrap();
    let mut cmd = Command::new("bash");
    cmd.args([
        os("-c"),
        os(r#""$@" | head -c 10 >/dev/null; exit "${PIPESTATUS[0]}""#),
    ])
    .arg("bash")
    .arg(bin("matmul"))
    .args(args);
    let ran = run_cmd(cmd);
    ran.no_panic();
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert_eq!(json(&out)["experiment"], "matmul");

    // `--output -` into a closed pipe: there the JSON is the report, and it
    // did not arrive (issue 19): one error line, exit 1.
    let mut cmd = command(
        "basics",
        &[os("--device"), os("cpu"), os("--output"), os("-")],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(
        errors,
        ["error: cannot write the report to standard output: Broken pipe (os error 32)"],
        "{stderr}"
    );
}

// ---------------------------------------------------------------- case 3

#[test]
fn case3_paths_that_are_not_utf8_are_written_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(OsStr::from_bytes(b"\xff.json"));
    let ran = run_cmd(basics_to(&file));
    ran.no_panic();
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let command = json(&file)["command"].as_str().unwrap().to_string();
    assert!(command.ends_with(r"\xFF.json'"), "{command}");

    let results = dir.path().join(OsStr::from_bytes(b"r\xfe"));
    let ran = run(
        "precision",
        &[
            os("--device"),
            os("cpu"),
            os("--results-dir"),
            results.as_os_str(),
        ],
    );
    ran.no_panic();
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    // One folder inside, named after this machine.
    let machine = fs::read_dir(&results)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        json(&machine.join("precision.json"))["experiment"],
        "precision"
    );
}

// ---------------------------------------------------------------- case 4

#[test]
fn case4_over_long_file_name_is_refused_before_computing() {
    let dir = tempfile::tempdir().unwrap();
    let name = "n".repeat(300) + ".json";
    // In a folder that does not exist yet: it is not left behind either.
    let ran = run_cmd(basics_to(&dir.path().join("new").join(&name)));
    refused_before_computing(&ran, "this file system allows");
    let ran = run_cmd(basics_to(&dir.path().join(&name)));
    refused_before_computing(&ran, "too long");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn case4_directory_looking_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for path in ["newdir/", "newdir/."] {
        let mut cmd = command(
            "basics",
            &[os("--device"), os("cpu"), os("--output"), os(path)],
        );
        cmd.current_dir(dir.path());
        let ran = run_cmd(cmd);
        refused_before_computing(&ran, "names a folder, not a file");
        assert!(entries(dir.path()).is_empty(), "{path}: nothing created");
    }
}

#[test]
fn case4_another_users_file_in_a_sticky_folder_is_refused() {
    if !running_as_root() {
        eprintln!("skipped: needs root to make a file another user owns");
        return;
    }
    let dir = open_tempdir();
    let sticky = dir.path().join("sticky");
    fs::create_dir(&sticky).unwrap();
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
    let theirs = sticky.join("theirs.json");
    fs::write(&theirs, "theirs").unwrap();
    // Writable by all, so only the sticky rule stops a rename over it.
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o666)).unwrap();
    let ran = run_cmd(as_nobody(basics_to(&theirs)));
    refused_before_computing(&ran, "sticky bit");
    assert_eq!(fs::read_to_string(&theirs).unwrap(), "theirs");
    assert_eq!(entries(&sticky), ["theirs.json"]);
}

#[test]
fn case4_read_only_file_is_refused() {
    let dir = open_tempdir();
    let file = dir.path().join("ro.json");
    fs::write(&file, "keep").unwrap();
    let ran = if running_as_root() {
        // Root writes anything: a root-owned 0644 file is read-only to nobody.
        run_cmd(as_nobody(basics_to(&file)))
    } else {
        fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
        run_cmd(basics_to(&file))
    };
    refused_before_computing(&ran, "not writable");
    assert_eq!(fs::read_to_string(&file).unwrap(), "keep");
    assert_eq!(entries(dir.path()), ["ro.json"]);
}

#[test]
fn case4_a_file_of_mode_0444_is_read_only_to_root_too() {
    // Issue 52: the check was access(W_OK), which root always passes, so root
    // replaced a 0444 file. Run as whoever runs the tests (root in CI).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ro.json");
    fs::write(&file, "keep").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
    let ran = run_cmd(basics_to(&file));
    refused_before_computing(&ran, "not writable");
    if running_as_root() {
        assert!(
            ran.stderr.contains("read-only (mode 0444)"),
            "{}",
            ran.stderr
        );
    }
    assert_eq!(fs::read_to_string(&file).unwrap(), "keep");
    assert_eq!(entries(dir.path()), ["ro.json"]);
}

#[test]
fn case4_interrupted_run_removes_the_folders_it_created() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let out = dir.path().join("new/sub/o.json");
    let cmd = command(
        "matmul",
        &[
            os("--device"),
            os("cpu"),
            os("--size"),
            os("256"),
            os("--iters"),
            os("100000"),
            os("--dtypes"),
            os("fp32"),
            os("--output"),
            out.as_os_str(),
        ],
    );
    let child = spawn(cmd, logs.path());
    // The folders are made before the work starts; interrupt the work.
    wait_until("the output folder", || out.parent().unwrap().is_dir());
    signal(&child, "-INT");
    let ran = wait(child, logs.path());
    ran.no_panic();
    assert_eq!(ran.code(), Some(130), "{}", ran.stderr);
    assert!(entries(dir.path()).is_empty(), "new/ is removed");
}

// ---------------------------------------------------------------- case 5

#[test]
fn case5_signal_during_the_write_removes_the_temp_file() {
    for (sig, code) in [("-INT", 130), ("-TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let logs = tempfile::tempdir().unwrap();
        let target = dir.path().join("result.json");
        fs::write(&target, "previous result").unwrap();
        let mut cmd = basics_to(&target);
        cmd.env(PAUSE_BEFORE_RENAME_ENV, "60000");
        let child = spawn(cmd, logs.path());
        // The written, synced temporary file (the probe before computing is empty).
        wait_until("the temporary file", || {
            fs::read_dir(dir.path()).unwrap().any(|e| {
                let e = e.unwrap();
                e.file_name() != "result.json" && e.metadata().unwrap().len() > 0
            })
        });
        signal(&child, sig);
        let ran = wait(child, logs.path());
        ran.no_panic();
        assert_eq!(ran.code(), Some(code), "{sig}: {}", ran.stderr);
        assert_eq!(entries(dir.path()), ["result.json"], "{sig}: no temp file");
        assert_eq!(fs::read_to_string(&target).unwrap(), "previous result");
    }
}

// ---------------------------------------------------------------- case 6

#[test]
fn case6_iters_and_warmup_are_bounded() {
    for (flag, value, range) in [
        ("--iters", "1000000000000", "1..=100000"),
        ("--iters", "100001", "1..=100000"),
        ("--warmup", "10001", "0..=10000"),
    ] {
        for name in ["matmul", "cpu_vs_gpu"] {
            let ran = run(name, &[os(flag), os(value)]);
            ran.no_panic();
            assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
            let errors = ran.errors();
            assert_eq!(errors.len(), 1, "{}", ran.stderr);
            assert!(
                errors[0].contains(flag) && errors[0].contains(range),
                "{}",
                ran.stderr
            );
        }
    }
}

// ---------------------------------------------------------------- case 7

#[test]
fn case7_recorded_command_pastes_back_into_bash() {
    let dir = tempfile::tempdir().unwrap();
    let mut name = b"a;b $HOME `id` *'\"\x01\xff".to_vec();
    name.extend(b".json");
    let file = dir.path().join(OsString::from_vec(name));
    let ran = run_cmd(basics_to(&file));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let recorded = json(&file)["command"].as_str().unwrap().to_string();
    assert!(
        recorded.contains(" --device cpu --output "),
        "plain words stay plain: {recorded}"
    );
    fs::remove_file(&file).unwrap();

    // Pasted into bash, it runs the same program with the same arguments:
    // the file comes back, recording the very same command line.
    let ran = run_cmd({
        let mut cmd = Command::new("bash");
        cmd.args(["-c", &recorded]);
        cmd
    });
    assert_eq!(ran.code(), Some(0), "{recorded}: {}", ran.stderr);
    assert_eq!(json(&file)["command"], recorded.as_str());
    assert_eq!(entries(dir.path()).len(), 1, "nothing else was made");
}

// ---------------------------------------------------------------- case 8

#[test]
fn case8_stderr_counts_the_rows_actually_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    let ran = run(
        "matmul",
        &[
            os("--device"),
            os("cpu"),
            os("--size"),
            os("8"),
            os("--iters"),
            os("1"),
            os("--warmup"),
            os("0"),
            os("--accuracy-rows"),
            os("100"),
            os("--output"),
            out.as_os_str(),
        ],
    );
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("f64 reference for 8 rows"),
        "{}",
        ran.stderr
    );
}

#[test]
fn case8_help_spells_the_default_dtypes_as_the_flag_accepts_them() {
    let ran = run("matmul", &[os("--help")]);
    let help = String::from_utf8_lossy(&ran.stdout);
    assert!(help.contains("[default: fp32,fp16,bf16]"), "{help}");
    // The spelling is accepted, and it is what runs by default.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.json");
    let ran = run(
        "matmul",
        &[
            os("--device"),
            os("cpu"),
            os("--size"),
            os("8"),
            os("--iters"),
            os("1"),
            os("--dtypes"),
            os("fp32,fp16,bf16"),
            os("--output"),
            out.as_os_str(),
        ],
    );
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let ran = run(
        "matmul",
        &[
            os("--device"),
            os("cpu"),
            os("--size"),
            os("8"),
            os("--iters"),
            os("1"),
            os("--output"),
            out.as_os_str(),
        ],
    );
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let names: Vec<Value> = json(&out)["matmul"]["precisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["precision"].clone())
        .collect();
    assert_eq!(names, ["fp32", "fp16", "bf16"]);
}

#[test]
fn case8_missing_folder_under_proc_says_it_cannot_be_created() {
    let ran = run_cmd(basics_to(Path::new("/proc/candle-lab-missing/out.json")));
    refused_before_computing(&ran, "cannot create folder /proc/candle-lab-missing");
    assert!(!ran.stderr.contains("not writable"), "{}", ran.stderr);
}

#[test]
fn case8_newline_in_a_path_stays_on_the_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocker");
    fs::write(&blocker, "").unwrap();
    let ran = run_cmd(basics_to(&blocker.join("a\nb.json")));
    refused_before_computing(&ran, r"blocker/a\nb.json'");
    assert!(
        ran.errors()[0].contains("Not a directory"),
        "{}",
        ran.stderr
    );
}

#[test]
fn case8_error_lines_show_the_users_path_not_a_temp_name() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let target = dir.path().join("out.json");
    let mut cmd = basics_to(&target);
    cmd.env(PAUSE_BEFORE_RENAME_ENV, "2000");
    let child = spawn(cmd, logs.path());
    wait_until("the temporary file", || {
        fs::read_dir(dir.path())
            .unwrap()
            .any(|e| e.unwrap().metadata().unwrap().len() > 0)
    });
    // The rename at the end now fails: a folder took the target's name.
    fs::create_dir(&target).unwrap();
    let ran = wait(child, logs.path());
    ran.no_panic();
    assert_eq!(ran.code(), Some(1), "{}", ran.stderr);
    let errors = ran.errors();
    assert_eq!(errors.len(), 1, "{}", ran.stderr);
    let expected = format!("cannot write {}: ", target.display());
    assert!(
        errors[0].starts_with(&format!("error: {expected}")),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains(TEMP_PREFIX), "{}", ran.stderr);
    assert_eq!(
        entries(dir.path()),
        ["out.json"],
        "the temp file is removed"
    );

    // Nor when the folder refuses files before computing.
    let ran = run_cmd(basics_to(Path::new("/proc/out.json")));
    refused_before_computing(
        &ran,
        "cannot write /proc/out.json: cannot create a file in /proc",
    );
    assert!(!ran.stderr.contains(TEMP_PREFIX), "{}", ran.stderr);
}

// ------------------------------------------- case 9 (issue 19): exit codes mean
// what the README says: 0 everything ran, 1 no report.

/// `matmul` at the smallest size, through bash so that a descriptor can be
/// closed or redirected as a user would (`>&-`, `>/dev/full`).
fn matmul_via_bash(redirect: &str, args: &[&OsStr]) -> Ran {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!(r#""$@" {redirect}"#))
        .arg("bash")
        .arg(bin("matmul"))
        .args([
            os("--device"),
            os("cpu"),
            os("--size"),
            os("64"),
            os("--iters"),
            os("2"),
        ])
        .args(args)
        .stdin(Stdio::null());
    run_cmd(cmd)
}

#[test]
fn case9_dash_with_a_closed_or_null_stdout_is_refused_before_computing() {
    let expect = "cannot write the report to standard output: it is /dev/null (or was closed)";
    for redirect in [">&-", ">/dev/null"] {
        let ran = matmul_via_bash(redirect, &[os("--output"), os("-")]);
        refused_before_computing(&ran, expect);
        assert!(!ran.stderr.contains("==="), "no tables: {}", ran.stderr);
    }
}

#[test]
fn case9_a_table_that_cannot_be_printed_beside_a_saved_report_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.json");
    let ran = matmul_via_bash(">/dev/full", &[os("--output"), out.as_os_str()]);
    ran.no_panic();
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert!(ran.errors().is_empty(), "{}", ran.stderr);
    let warnings: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning"))
        .collect();
    assert_eq!(
        warnings,
        ["warning: the tables could not be printed (No space left on device (os error 28)); the report was saved"],
        "{}",
        ran.stderr
    );
    assert_eq!(json(&out)["experiment"], "matmul");

    // With no report file the tables are the report: a failure is exit 1.
    let ran = matmul_via_bash(">/dev/full", &[]);
    ran.no_panic();
    assert_eq!(ran.code(), Some(1), "{}", ran.stderr);
    assert_eq!(
        ran.errors(),
        ["error: printing to standard output: No space left on device (os error 28)"],
        "{}",
        ran.stderr
    );
}

// ---------------------------------------------------------------- stderr full

/// A standard error that cannot be written (`2>/dev/full`) costs the lines on
/// it, never the run: no panic, the report written, exit 0.
#[test]
fn a_full_standard_error_is_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let full = fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let ran = Command::new(bin("matmul"))
        .args([
            "--device", "cpu", "--size", "64", "--iters", "2", "--output",
        ])
        .arg(&out)
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(0));
    assert!(out.exists());
}
