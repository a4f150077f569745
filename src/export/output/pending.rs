//! What a run must remove if it fails or is interrupted: the temporary files
//! being written and the folders it created, recorded as they appear, so that
//! [`abandon`] (a failed run, SIGINT, SIGTERM) and [`abandon_without_allocating`]
//! (a failed allocation) leave nothing behind; and [`Temp`], a temporary file
//! that is recorded from the moment it exists.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use anyhow::{anyhow, Context, Result};

use crate::quote::shown;

/// What an interrupted or failed run must remove: the temporary file being
/// written and the folders this run created (deepest last).
#[derive(Default)]
pub(super) struct Pending {
    temps: Vec<Recorded>,
    created_dirs: Vec<Recorded>,
}

impl Pending {
    /// Records a folder this run created (top down): removed if the run fails.
    pub(super) fn created(&mut self, dir: &Path) {
        self.created_dirs.push(Recorded::new(dir));
    }
}

/// A path to remove, and the same path as a C string made when it was recorded:
/// when memory runs out, [`abandon_without_allocating`] removes it without
/// building anything.
struct Recorded {
    path: PathBuf,
    raw: Option<CString>,
}

impl Recorded {
    fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            // A path holds no NUL byte; if one did, only the raw removal is lost.
            raw: CString::new(path.as_os_str().as_bytes()).ok(),
        }
    }
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    temps: Vec::new(),
    created_dirs: Vec::new(),
});

pub(super) fn pending() -> MutexGuard<'static, Pending> {
    // A panic elsewhere leaves the list as valid as it was.
    PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Held while files that belong together are renamed into place
/// ([`write_together`](super::write_together)).
pub(super) static WRITING: Mutex<()> = Mutex::new(());

/// [`abandon`] for the counting allocator, when an allocation has failed and
/// the process is about to exit (`cli` registers it): the same removals through
/// the recorded C strings, so that nothing is allocated. If the list is locked
/// (the failing thread may be the one recording), it is left: waiting could
/// never end.
pub fn abandon_without_allocating() {
    let p = match PENDING.try_lock() {
        Ok(p) => p,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    for raw in p.temps.iter().filter_map(|t| t.raw.as_deref()) {
        let _ = rustix::fs::unlink(raw);
    }
    for raw in p.created_dirs.iter().rev().filter_map(|d| d.raw.as_deref()) {
        let _ = rustix::fs::rmdir(raw);
    }
}

/// Holds the pending list locked after [`abandon`], so that the run cannot start
/// another write while the process exits.
pub struct Abandoned {
    _lock: MutexGuard<'static, Pending>,
    _writing: MutexGuard<'static, ()>,
}

/// Removes the temporary file being written, if any, and the folders this run
/// created that are still empty. For a failed run, and from the signal handler,
/// which so waits for files being renamed [`write_together`](super::write_together) to be all in place.
pub fn abandon() -> Abandoned {
    let writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut p = pending();
    for temp in p.temps.drain(..) {
        let _ = fs::remove_file(temp.path);
    }
    // Deepest first; a folder that holds anything (someone else's file) stays.
    while let Some(dir) = p.created_dirs.pop() {
        let _ = fs::remove_dir(dir.path);
    }
    Abandoned {
        _lock: p,
        _writing: writing,
    }
}

/// A temporary file in the target's folder (so the rename stays on one file
/// system), known to [`abandon`] from the moment it exists.
pub(super) struct Temp {
    pub(super) file: File,
    /// Removes the file when dropped; taken by [`Temp::persist`].
    path: Option<tempfile::TempPath>,
}

impl Temp {
    pub(super) fn create(dir: &Path) -> Result<Self> {
        // Locked across the creation: a signal cannot fall between it and the record.
        let mut p = pending();
        let (file, path) = tempfile::Builder::new()
            .prefix(".candle-lab-")
            .suffix(".tmp")
            .make_in(dir, |path| {
                // 0666 less the umask, as any new file; a replaced file's mode is set later.
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o666)
                    .open(path)
            })
            .map_err(|e| anyhow!("cannot create a file in {}: {e}", shown(dir)))?
            .into_parts();
        p.temps.push(Recorded::new(&path));
        Ok(Self {
            file,
            path: Some(path),
        })
    }

    /// Renames the file over `target`. The folders created for it now hold the
    /// result and are no longer this run's to remove.
    pub(super) fn persist(mut self, target: &Path) -> Result<()> {
        let mut p = pending();
        let path = self.path.take().context("the temporary file is gone")?;
        p.temps.retain(|t| t.path.as_path() != &*path);
        // On failure the returned TempPath is dropped, which removes the file; the
        // error is the OS's reason, without the temporary name.
        path.persist(target).map_err(|e| e.error)?;
        p.created_dirs.clear();
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let mut p = pending();
            p.temps.retain(|t| t.path.as_path() != &*path);
            drop(path);
        }
    }
}
