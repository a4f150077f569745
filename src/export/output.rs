//! The output-file policy: where a run's JSON goes and how it gets there, so that
//! a run never harms a user's file and never loses a finished result. The rules,
//! as a careful Unix tool (coreutils, ripgrep) would have them:
//!
//! - `--output -` writes the JSON to standard output; the tables then go to
//!   standard error, so that standard output is JSON only (`| jq`). A file named
//!   `-` is written as `./-`. It is refused when standard output is /dev/null (or
//!   closed), as `--output /dev/null` is, and a write that fails there (a reader
//!   gone, EPIPE, included) fails the run: the report did not arrive.
//! - Everything that can be checked is checked before anything is computed
//!   ([`prepare`]): a target that exists must be a regular file or a symbolic link
//!   to one (a folder, a device such as `/dev/null`, a FIFO or a socket is refused,
//!   and so is a link that leads nowhere); a path ending in `/` names a folder and
//!   is refused; the file name must fit the file system's limit (NAME_MAX); an
//!   existing file must be writable by us (a read-only file is not replaced,
//!   by root either: its mode is checked as well as `access(2)`) and,
//!   in a folder with the sticky bit, ours to replace; a file must be creatable in
//!   the folder (one is created and removed). Missing parent folders are created
//!   then, and removed again if the run fails or is interrupted.
//! - The JSON goes to a temporary file beside the target, is synced, then renamed
//!   over it: the target holds the old or the new result, never half of one.
//! - A symbolic link is written through: the file it points to is replaced and the
//!   link is kept. A link in a sticky, world-writable folder (`/tmp`) is followed
//!   only if we or the folder's owner own it, as the kernel's `protected_symlinks`
//!   does for opens: another user's link there could aim us at any file.
//! - A replaced file keeps its permission bits (and, when run as root, its owner
//!   and group); a new file gets 0666 less the umask (0644 usually), as with `cp`.
//!   A file with other hard links is replaced by a new file: the other names keep
//!   the old result, as with any atomic replace.
//! - On SIGINT or SIGTERM, [`abandon`] removes the temporary file and the folders
//!   this run created; `cli` installs the handler and decides the exit code.
//!   When an allocation fails, the counting allocator does the same through
//!   [`abandon_without_allocating`], from C strings made as each path is
//!   recorded, so that nothing is allocated.
//! - Messages name the path as the user gave it, shell-quoted when it needs it (a
//!   newline stays on the line), never a temporary file's name.
//!
//! Unix only, as the project is (Linux with an NVIDIA GPU, or its CPU).

use std::fs::{self, Metadata, Permissions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::export::table::Screen;
use crate::quote::shown;

mod inputs;
mod pending;
pub use inputs::{refuse_overlap, Input};
pub use pending::{abandon, abandon_without_allocating, Abandoned};
use pending::{pending, Temp, WRITING};

/// Test aid: milliseconds to sleep between syncing the temporary file and
/// renaming it, so that tests/files.rs can interrupt a run mid-write. Unset in use.
pub const PAUSE_BEFORE_RENAME_ENV: &str = "CANDLE_LAB_TEST_PAUSE_BEFORE_RENAME_MS";

/// Where a run's JSON goes, checked by [`prepare`] before the run computes.
#[derive(Debug)]
pub enum Output {
    /// No `--output` or `--results-dir`: tables only.
    None,
    /// `--output -`.
    Stdout,
    File(Target),
}

/// A file to write: the path as given, and the regular file that is replaced.
#[derive(Debug)]
pub struct Target {
    given: PathBuf,
    /// `given`, or the file it links to.
    real: PathBuf,
}

impl Output {
    /// The file this output replaces (after its link), if it is a file.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Output::File(target) => Some(&target.real),
            _ => None,
        }
    }

    /// Writes `value` as pretty JSON where this output goes, and says where on
    /// standard error.
    pub fn save(&self, value: &impl Serialize) -> Result<()> {
        self.save_bytes(&to_json(value)?)
    }

    /// Writes `bytes` as they are (JSON, CSV, SVG) where this output goes, and
    /// says where on standard error.
    pub fn save_bytes(&self, bytes: &[u8]) -> Result<()> {
        self.write(bytes)?;
        self.say_written();
        Ok(())
    }

    /// "wrote FILE" on standard error, for a file (nothing for standard output).
    pub fn say_written(&self) {
        if let Output::File(target) = self {
            // A closed standard error must not fail a run whose file is written.
            let _ = writeln!(io::stderr(), "wrote {}", shown(&target.given));
        }
    }

    /// [`Output::save`] without the message, for a file rewritten as a run goes
    /// (`sweep` after every point): each write replaces the whole file at once.
    pub fn save_quietly(&self, value: &impl Serialize) -> Result<()> {
        self.write(&to_json(value)?)
    }

    /// Writes `bytes` without a message; a file atomically, as every write here.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        match self {
            Output::None => Ok(()),
            Output::Stdout => {
                // Here standard output is the report: a reader gone before the
                // end (EPIPE) got part of it, so the run wrote no report.
                let mut out = io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .context("cannot write the report to standard output")
            }
            Output::File(target) => target.write(bytes),
        }
    }

    /// The file beside this one with `extension` instead of its own
    /// (`sweep.json` -> `sweep.csv`), checked by [`prepare`] now. Standard output
    /// and no output have no folder: their neighbour is [`Output::None`].
    pub fn beside(&self, extension: &str) -> Result<Output> {
        let Output::File(target) = self else {
            return Ok(Output::None);
        };
        let path = target.given.with_extension(extension);
        if path == target.given {
            bail!(
                "cannot write {}: the .{extension} file goes beside it under the same name, so its name must not end in .{extension}",
                shown(&target.given)
            );
        }
        prepare(&path)
    }

    /// Where the tables go (standard error when standard output carries the
    /// JSON), and whether they are the run's only report. Asked after the report
    /// is saved.
    pub fn screen(&self) -> Screen {
        match self {
            Output::None => Screen::Stdout,
            Output::Stdout => Screen::Stderr,
            Output::File(_) => Screen::StdoutBesideFile,
        }
    }
}

/// `value` as pretty JSON with a final newline, as every result file is written.
pub fn to_json(value: &impl Serialize) -> Result<Vec<u8>> {
    let mut json = serde_json::to_vec_pretty(value).context("serializing the report")?;
    json.push(b'\n');
    Ok(json)
}

/// Checks `path` against the policy above and creates its missing folders, so
/// that a run refused for its output is refused before it computes anything.
pub fn prepare(path: &Path) -> Result<Output> {
    if path.as_os_str() == "-" {
        if stdout_is_null() {
            bail!(
                "cannot write the report to standard output: it is /dev/null (or was closed), \
                 where the report would be lost"
            );
        }
        return Ok(Output::Stdout);
    }
    let fail = |why: &dyn std::fmt::Display| anyhow!("cannot write {}: {why}", shown(path));
    let bytes = path.as_os_str().as_bytes();
    if path.file_name().is_none() || bytes.ends_with(b"/") || bytes.ends_with(b"/.") {
        return Err(fail(&"the path names a folder, not a file"));
    }
    let real = follow_link(path).map_err(|e| fail(&e))?;
    match fs::metadata(&real) {
        Ok(meta) => {
            refuse_special(&meta).map_err(|e| fail(&e))?;
            check_replaceable(&real, &meta).map_err(|e| fail(&e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(&e)),
    }
    check_name_length(&real).map_err(|e| fail(&e))?;
    let dir = parent_dir(&real);
    create_folders(&dir).map_err(|e| fail(&e))?;
    // The last check: a file can be created there (and is removed at once).
    drop(Temp::create(&dir).map_err(|e| fail(&e))?);
    Ok(Output::File(Target {
        given: path.to_path_buf(),
        real,
    }))
}

impl Target {
    fn write(&self, bytes: &[u8]) -> Result<()> {
        self.stage(bytes)?.commit()
    }

    /// Writes `bytes` to a synced temporary file beside the target, not yet in
    /// its place ([`StagedFile::commit`] renames it there).
    fn stage(&self, bytes: &[u8]) -> Result<StagedFile<'_>> {
        let fail = || format!("cannot write {}", shown(&self.given));
        // The target may have changed while the run computed.
        let existing = match fs::metadata(&self.real) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(fail),
        };
        if let Some(meta) = &existing {
            refuse_special(meta).with_context(fail)?;
        }
        let temp = Temp::create(&parent_dir(&self.real)).with_context(fail)?;
        let mut file = &temp.file;
        if let Some(meta) = &existing {
            // Only root can give a file away: for anyone else this may fail, and the
            // new file is then theirs, as with `sed -i`. The owner goes first: a
            // change of owner clears set-user-ID bits that the mode then restores.
            let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
            file.set_permissions(Permissions::from_mode(meta.mode() & 0o7777))
                .with_context(fail)?;
        }
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .with_context(fail)?;
        pause_for_tests();
        Ok(StagedFile { target: self, temp })
    }
}

/// A file written and synced beside its target, waiting to replace it.
struct StagedFile<'a> {
    target: &'a Target,
    temp: Temp,
}

impl StagedFile<'_> {
    fn commit(self) -> Result<()> {
        let t = self.target;
        self.temp
            .persist(&t.real)
            .with_context(|| format!("cannot write {}", shown(&t.given)))
    }
}

/// Writes each `(output, bytes)` as one step: every file is written and synced
/// beside its target first, then all are renamed into place while the signal
/// handler ([`abandon`]) waits. An interrupt before the renames leaves every
/// target as it was (the temporary files are removed); one during them waits
/// for the last, so files that belong together (a result's JSON, CSV and
/// chart) always hold the same result. Standard output is written at its turn.
pub fn write_together(files: &[(&Output, &[u8])]) -> Result<()> {
    let mut staged = Vec::new();
    for &(out, bytes) in files {
        staged.push(match out {
            Output::File(target) => Some(target.stage(bytes)?),
            _ => None,
        });
    }
    let _writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
    for (staged, &(out, bytes)) in staged.into_iter().zip(files) {
        match staged {
            Some(file) => file.commit()?,
            None => out.write(bytes)?,
        }
    }
    Ok(())
}

/// The file a symbolic link at `path` leads to, or `path` itself.
fn follow_link(path: &Path) -> Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Ok(link) if link.file_type().is_symlink() => {
            refuse_foreign_link(path, &link)?;
            fs::canonicalize(path).map_err(|e| {
                anyhow!("it is a symbolic link that leads to no file (not written through): {e}")
            })
        }
        _ => Ok(path.to_path_buf()),
    }
}

/// A link in a sticky, world-writable folder must be ours or the folder owner's.
fn refuse_foreign_link(path: &Path, link: &Metadata) -> Result<()> {
    let Ok(dir) = fs::metadata(parent_dir(path)) else {
        return Ok(());
    };
    let me = rustix::process::geteuid().as_raw();
    let sticky_public = dir.mode() & 0o1002 == 0o1002;
    if sticky_public && link.uid() != me && link.uid() != dir.uid() {
        bail!(
            "it is another user's symbolic link in a sticky, world-writable folder (not followed)"
        );
    }
    Ok(())
}

/// Refuses anything but a regular file: replacing `/dev/null` or a FIFO with a
/// JSON file would break whatever uses it.
fn refuse_special(meta: &Metadata) -> Result<()> {
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a folder"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "something else"
    };
    bail!("it is {what}, not a regular file (left as it is)")
}

/// An existing regular file: writable by us, and, in a sticky folder, ours (or
/// the folder's) to replace, as rename(2) will demand. A file whose mode gives
/// no one write permission (0444) is read-only for root too: `access(W_OK)`,
/// which root always passes, is not the only check.
fn check_replaceable(real: &Path, meta: &Metadata) -> Result<()> {
    rustix::fs::access(real, rustix::fs::Access::WRITE_OK)
        .map_err(|e| anyhow!("it is not writable: {}", io::Error::from(e)))?;
    if meta.mode() & 0o222 == 0 {
        bail!(
            "it is not writable: it is read-only (mode {:04o}), and a read-only file is not \
             replaced, not even by root",
            meta.mode() & 0o7777
        );
    }
    let dir = fs::metadata(parent_dir(real))?;
    let me = rustix::process::geteuid().as_raw();
    let sticky = dir.mode() & 0o1000 != 0;
    if sticky && me != 0 && meta.uid() != me && dir.uid() != me {
        bail!("it belongs to another user, in a folder with the sticky bit set: only its owner may replace it");
    }
    Ok(())
}

/// The file name must fit the file system's limit: otherwise the rename at the
/// end would fail after all the work.
fn check_name_length(real: &Path) -> Result<()> {
    let Some(name) = real.file_name() else {
        return Ok(());
    };
    // The folder may not exist yet: ask the nearest one that does.
    let dir = parent_dir(real);
    let Some(existing) = dir.ancestors().find(|d| d.is_dir()) else {
        return Ok(());
    };
    let existing = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    if let Ok(fs) = rustix::fs::statvfs(existing) {
        let len = name.as_bytes().len() as u64;
        if len > fs.f_namemax {
            bail!(
                "the file name is {len} bytes, longer than the {} this file system allows",
                fs.f_namemax
            );
        }
    }
    Ok(())
}

/// Creates the missing folders of `dir`, top down, each recorded for [`abandon`].
fn create_folders(dir: &Path) -> Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && fs::symlink_metadata(d).is_err())
        .collect();
    for d in missing.into_iter().rev() {
        let mut p = pending();
        match fs::create_dir(d) {
            Ok(()) => p.created(d),
            // Made meanwhile by someone else: theirs, not ours to remove.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => bail!("cannot create folder {}: {e}", shown(d)),
        }
    }
    Ok(())
}

/// Whether standard output is the null device: a closed one too, since Rust's
/// runtime reopens a closed descriptor 1 as /dev/null before `main`. The policy
/// refuses `--output /dev/null`; `--output -` there would lose the report alike.
fn stdout_is_null() -> bool {
    let (Ok(out), Ok(null)) = (
        rustix::fs::fstat(io::stdout()),
        rustix::fs::stat("/dev/null"),
    ) else {
        return false;
    };
    let char_device =
        rustix::fs::FileType::from_raw_mode(out.st_mode) == rustix::fs::FileType::CharacterDevice;
    char_device && out.st_rdev == null.st_rdev
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn pause_for_tests() {
    let ms = std::env::var(PAUSE_BEFORE_RENAME_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = ms {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Mutex, MutexGuard};

    /// The pending list is one per process: these tests take turns, so that
    /// [`abandon`] in one cannot remove another's temporary file.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn file_target(path: &Path) -> Target {
        match prepare(path).unwrap() {
            Output::File(t) => t,
            other => panic!("{other:?}"),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_json_whole_and_creates_folders() {
        let _turn = serial();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/out.json");
        file_target(&path).write(br#"{"x": 1}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["x"], 1);
        assert_eq!(names(path.parent().unwrap()), ["out.json"], "no temp left");
    }

    #[test]
    fn a_target_turned_folder_fails_the_write_and_leaves_no_temp() {
        let _turn = serial();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("taken");
        let target = file_target(&path);
        // It becomes a folder while the run computes.
        fs::create_dir(&path).unwrap();
        fs::write(path.join("keep"), "x").unwrap();
        let err = target.write(b"{}").unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("taken") && text.contains("a folder"),
            "{text}"
        );
        assert!(!text.contains(".candle-lab-"), "{text}");
        assert_eq!(names(dir.path()), ["taken"]);
        assert_eq!(names(&path), ["keep"]);
    }

    #[test]
    fn unwritable_paths_are_refused_up_front() {
        let _turn = serial();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "x").unwrap();
        // A path below a regular file can never be created.
        let err = prepare(&file.join("out.json")).unwrap_err();
        assert!(format!("{err:#}").contains("out.json"), "{err:#}");
        let err = prepare(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("a folder"), "{err:#}");
        let err = prepare(&dir.path().join("new/")).unwrap_err();
        assert!(format!("{err:#}").contains("names a folder"), "{err:#}");
        assert!(!dir.path().join("new").exists());
        file_target(&dir.path().join("new/out.json"));
    }

    #[test]
    fn dash_is_standard_output_and_moves_the_tables() {
        let _turn = serial();
        // `cargo test >/dev/null` gives this test a null standard output.
        if !stdout_is_null() {
            let out = prepare(Path::new("-")).unwrap();
            assert!(matches!(out, Output::Stdout));
            assert!(matches!(out.screen(), Screen::Stderr));
        }
        assert!(matches!(
            prepare(Path::new("./-")).unwrap().screen(),
            Screen::StdoutBesideFile
        ));
        assert!(matches!(Output::None.screen(), Screen::Stdout));
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_link_stays_a_link() {
        let _turn = serial();
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, "old").unwrap();
        fs::set_permissions(&real, Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        file_target(&link).write(br#"{"new": true}"#).unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(fs::read_to_string(&real).unwrap().contains("\"new\""));
        assert_eq!(fs::metadata(&real).unwrap().mode() & 0o7777, 0o640);
        assert_eq!(names(dir.path()), ["link.json", "real.json"]);
    }

    #[test]
    fn over_long_names_are_refused() {
        let _turn = serial();
        let dir = tempfile::tempdir().unwrap();
        let long = "n".repeat(300) + ".json";
        let err = prepare(&dir.path().join("sub").join(long)).unwrap_err();
        assert!(format!("{err:#}").contains("longer than"), "{err:#}");
        assert!(!dir.path().join("sub").exists(), "checked before creating");
    }

    #[test]
    fn a_failed_run_removes_the_folders_it_created_and_only_those() {
        let _turn = serial();
        let dir = tempfile::tempdir().unwrap();
        file_target(&dir.path().join("a/b/out.json"));
        assert!(dir.path().join("a/b").is_dir());
        drop(abandon());
        assert_eq!(names(dir.path()), Vec::<String>::new());
        // A created folder that someone else put a file in stays.
        file_target(&dir.path().join("c/d/out.json"));
        fs::write(dir.path().join("c/theirs"), "x").unwrap();
        drop(abandon());
        assert_eq!(names(&dir.path().join("c")), ["theirs"]);
        // After a successful write the folders hold the result: not removed.
        file_target(&dir.path().join("e/out.json"))
            .write(b"{}")
            .unwrap();
        drop(abandon());
        assert_eq!(names(&dir.path().join("e")), ["out.json"]);
    }

    #[test]
    fn a_file_beside_the_json_shares_its_name_and_checks() {
        let _turn = serial();
        let dir = tempfile::tempdir().unwrap();
        let json = prepare(&dir.path().join("new/sweep.json")).unwrap();
        let csv = json.beside("csv").unwrap();
        csv.write(b"a,b\n").unwrap();
        json.save_quietly(&serde_json::json!({"x": 1})).unwrap();
        assert_eq!(names(&dir.path().join("new")), ["sweep.csv", "sweep.json"]);
        // Rewritten whole, as often as asked.
        csv.write(b"c\n").unwrap();
        assert_eq!(fs::read(dir.path().join("new/sweep.csv")).unwrap(), b"c\n");
        // Its name must differ from the JSON's, and it obeys the same policy.
        let err = prepare(&dir.path().join("s.csv")).unwrap().beside("csv");
        assert!(format!("{:#}", err.unwrap_err()).contains("must not end in .csv"));
        fs::create_dir(dir.path().join("t.svg")).unwrap();
        let err = prepare(&dir.path().join("t.json")).unwrap().beside("svg");
        assert!(format!("{:#}", err.unwrap_err()).contains("a folder"));
        // Standard output and no output have no neighbour.
        assert!(matches!(
            Output::Stdout.beside("csv").unwrap(),
            Output::None
        ));
        assert!(matches!(Output::None.beside("csv").unwrap(), Output::None));
    }

    #[test]
    fn paths_in_messages_stay_on_one_line() {
        let _turn = serial();
        assert_eq!(shown(Path::new("/tmp/a.json")), "/tmp/a.json");
        assert_eq!(shown(Path::new("a\nb.json")), r"$'a\nb.json'");
    }
}
