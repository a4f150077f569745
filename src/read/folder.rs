//! What `report` and `summary` may touch in a results folder. Git stores
//! symbolic links, so a results folder from someone else can hold
//! `m/matmul.svg -> ../../elsewhere` or a machine folder `up -> ..`: a tool that
//! followed them would overwrite a file of that person's choosing. So inside the
//! folder it was given, a tool reads only real folders and regular files, never
//! through a link, and skips the rest, saying so ([`Listing::skipped`]); it
//! writes only where [`check_inside`] finds real folders and a regular file (or
//! none yet). A FIFO is skipped too: reading one waits for a writer forever.
//! Names become Markdown links and table cells in results/README.md, so a name
//! must be letters, digits and `.`, `_`, `+`, `-` ([`plain_name`]); any other
//! name (a space, a newline, `](javascript:...)`, bytes that are not UTF-8) is
//! skipped, not escaped, and the warning says why.

use std::ffi::OsStr;
use std::fs::{self, FileType};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use crate::quote::shown;

/// The names a tool may use in a folder, in name order, and what it skipped.
#[derive(Debug, Default)]
pub struct Listing {
    pub names: Vec<String>,
    /// One line each: `PATH: why` (the path shell-quoted).
    pub skipped: Vec<String>,
}

/// What a listing keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Real folders (machine folders).
    Folders,
    /// Regular files whose name ends in `.json`.
    JsonFiles,
}

/// The entries of `dir` of `kind`, in name order. An entry that would be one
/// (a link, a FIFO or a folder named `x.json`, a folder or a link to one with a
/// name that is not plain) is skipped with the reason; anything else is not
/// what was asked for and is passed over in silence (README.md, charts).
pub fn list(dir: &Path, kind: Kind) -> Result<Listing> {
    let mut listing = Listing::default();
    let cannot = || format!("cannot list {}", shown(dir));
    for entry in fs::read_dir(dir).with_context(cannot)? {
        let entry = entry.with_context(cannot)?;
        let name = entry.file_name();
        let path = dir.join(&name);
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let candidate = match kind {
            // A link to a folder would be a machine folder elsewhere.
            Kind::Folders => file_type.is_dir() || (file_type.is_symlink() && path.is_dir()),
            Kind::JsonFiles => name.as_bytes().ends_with(b".json"),
        };
        if !candidate {
            continue;
        }
        let why = if file_type.is_symlink() {
            Some("a symbolic link, not followed (a tool reads and writes only inside the results folder)".to_string())
        } else if kind == Kind::JsonFiles && !file_type.is_file() {
            Some(format!("{}, not a regular file", what(file_type)))
        } else {
            plain_name(&name).err()
        };
        match why {
            // A plain name is ASCII: nothing is lost.
            None => listing.names.push(name.to_string_lossy().into_owned()),
            Some(why) => listing
                .skipped
                .push(format!("{}: skipped: {why}", shown(&path))),
        }
    }
    listing.names.sort();
    listing.skipped.sort();
    Ok(listing)
}

/// A name that stays whole as a Markdown link and a table cell.
pub fn plain_name(name: &OsStr) -> Result<(), String> {
    let plain = !name.is_empty()
        && name
            .as_bytes()
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(b));
    if plain {
        Ok(())
    } else {
        Err(
            "its name is not only letters, digits and . _ + - (it would become a Markdown link)"
                .into(),
        )
    }
}

/// Refuses to write `root/rel` unless every folder on the way below `root` is
/// a real folder (not a link) and the file is a regular file or does not exist
/// yet: a link there would aim the write outside the results folder. `root`
/// itself is the user's choice and may be a link.
pub fn check_inside(root: &Path, rel: &Path) -> Result<()> {
    walk_inside(root, rel).map_err(|(path, why)| anyhow!("cannot write {}: {why}", shown(&path)))
}

/// `root/rel`, to be read only where [`check_inside`] would write it: through
/// real folders, to a regular file that is not a link.
pub fn readable_inside(root: &Path, rel: &Path) -> Result<PathBuf> {
    walk_inside(root, rel).map_err(|(path, why)| anyhow!("not reading {}: {why}", shown(&path)))?;
    Ok(root.join(rel))
}

/// The first path on the way from `root` to `root/rel` that is not a real
/// folder (or, last, a regular file), and why; missing parts are fine.
fn walk_inside(root: &Path, rel: &Path) -> Result<(), (PathBuf, String)> {
    let mut path = root.to_path_buf();
    let parts: Vec<Component> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        let Component::Normal(part) = part else {
            return Err((
                root.join(rel),
                "not a plain path below the results folder".into(),
            ));
        };
        path.push(part);
        let last = i + 1 == parts.len();
        let t = match fs::symlink_metadata(&path) {
            Ok(meta) => meta.file_type(),
            // Created later, as a real folder or file.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err((path, e.to_string())),
        };
        let why = if t.is_symlink() {
            "it is a symbolic link: a tool reads and writes only regular files inside the \
             results folder, never through a link (remove the link)"
                .to_string()
        } else if !last && !t.is_dir() {
            format!("it is {}, not a folder", what(t))
        } else if last && !t.is_file() {
            format!("it is {}, not a regular file", what(t))
        } else {
            continue;
        };
        return Err((path, why));
    }
    Ok(())
}

/// "a folder", "a FIFO": what a file type is, for a message.
pub fn what(t: FileType) -> &'static str {
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "something else"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_fifos_and_odd_names_are_skipped_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for folder in ["amd-epyc-2t", "a b", "x](javascript:alert(1))", "new\nline"] {
            fs::create_dir(d.join(folder)).unwrap();
        }
        fs::create_dir(d.join(OsStr::from_bytes(b"\xff"))).unwrap();
        symlink("..", d.join("up")).unwrap();
        fs::write(d.join("README.md"), "x").unwrap();
        let listing = list(d, Kind::Folders).unwrap();
        assert_eq!(listing.names, ["amd-epyc-2t"]);
        assert_eq!(listing.skipped.len(), 5, "{:?}", listing.skipped);
        let all = listing.skipped.join("\n");
        assert!(all.contains("/up: skipped: a symbolic link"), "{all}");
        assert!(all.contains(r"new\nline"), "quoted, one line each: {all}");
        assert!(all.contains(r"\xFF"), "{all}");

        let m = d.join("amd-epyc-2t");
        fs::write(m.join("matmul.json"), "{}").unwrap();
        fs::write(m.join("matmul.svg"), "x").unwrap();
        fs::create_dir(m.join("dir.json")).unwrap();
        symlink("/etc/passwd", m.join("link.json")).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            m.join("x.json"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let listing = list(&m, Kind::JsonFiles).unwrap();
        assert_eq!(listing.names, ["matmul.json"]);
        let all = listing.skipped.join("\n");
        assert!(
            all.contains("dir.json: skipped: a folder, not a regular file"),
            "{all}"
        );
        assert!(
            all.contains("x.json: skipped: a FIFO, not a regular file"),
            "{all}"
        );
        assert!(all.contains("link.json: skipped: a symbolic link"), "{all}");
    }

    #[test]
    fn writes_go_only_through_real_folders_to_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("m")).unwrap();
        check_inside(d, Path::new("m/matmul.svg")).unwrap();
        check_inside(d, Path::new("new/matmul.svg")).unwrap();
        fs::write(d.join("m/matmul.svg"), "old").unwrap();
        check_inside(d, Path::new("m/matmul.svg")).unwrap();

        symlink("../../elsewhere.txt", d.join("m/cpu.svg")).unwrap();
        let err = check_inside(d, Path::new("m/cpu.svg"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("m/cpu.svg: it is a symbolic link"), "{err}");
        symlink("..", d.join("up")).unwrap();
        let err = check_inside(d, Path::new("up/matmul.svg"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/up: it is a symbolic link"), "{err}");
        symlink("nowhere", d.join("m/dangling.svg")).unwrap();
        assert!(check_inside(d, Path::new("m/dangling.svg")).is_err());
        fs::create_dir(d.join("m/x.svg")).unwrap();
        let err = check_inside(d, Path::new("m/x.svg"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("a folder, not a regular file"), "{err}");
        assert!(check_inside(d, Path::new("../x")).is_err());
        let err = readable_inside(d, Path::new("m/cpu.svg"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("not reading "), "{err}");
    }
}
