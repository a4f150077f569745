//! No output may be an input: a run refuses, before any work, to write a file
//! it reads (`generate --model v.gguf --output v.gguf` would leave a result
//! where the model was), or to write two of its outputs to one file. Files
//! are compared by identity, the device and inode of what a path leads to
//! after its links, so another name, a symbolic link or a hard link to an
//! input is caught as well as the same name; an output that does not exist
//! yet is compared by its folder's real path and its name.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::quote::shown;

/// A file a run reads, and what it is to the run ("the model").
#[derive(Clone, Debug)]
pub struct Input {
    pub role: String,
    pub path: PathBuf,
}

impl Input {
    pub fn new(role: &str, path: &Path) -> Self {
        Self {
            role: role.to_string(),
            path: path.to_path_buf(),
        }
    }
}

/// Device and inode of the file `path` leads to, if there is one.
fn identity(path: &Path) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Where `path` would be written: its folder's real path and its name
/// (links in the folder resolved; the file itself need not exist).
fn place(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .join(name)
}

/// Refuses when one of `outputs` is one of `inputs`, or two outputs are one
/// file: one line naming both, before anything is written.
pub fn refuse_overlap(outputs: &[&Path], inputs: &[Input]) -> Result<()> {
    for out in outputs {
        let Some(id) = identity(out) else { continue };
        if let Some(input) = inputs.iter().find(|i| identity(&i.path) == Some(id)) {
            let same = if input.path == **out {
                String::new()
            } else {
                format!(" ({})", shown(&input.path))
            };
            bail!(
                "cannot write {}: it is {}{same}, which this run reads; no run writes over its \
                 own input",
                shown(out),
                input.role
            );
        }
    }
    for (i, a) in outputs.iter().enumerate() {
        for b in &outputs[i + 1..] {
            let same = match (identity(a), identity(b)) {
                (Some(x), Some(y)) => x == y,
                _ => place(a) == place(b),
            };
            if same {
                bail!(
                    "cannot write {} and {}: they are one file, and each output needs its own",
                    shown(a),
                    shown(b)
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_is_never_an_output_by_any_name() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        fs::write(&model, b"GGUF").unwrap();
        let inputs = [Input::new("the model", &model)];
        let e = refuse_overlap(&[&model], &inputs).unwrap_err().to_string();
        assert!(e.contains("it is the model, which this run reads"), "{e}");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&model, &link).unwrap();
        let hard = dir.path().join("hard.json");
        fs::hard_link(&model, &hard).unwrap();
        for other in [&link, &hard] {
            let e = refuse_overlap(&[other], &inputs).unwrap_err().to_string();
            assert!(e.contains("m.gguf"), "{e}");
        }
        let via = dir.path().join(".").join("m.gguf");
        assert!(refuse_overlap(&[&via], &inputs).is_err());
        let fresh = dir.path().join("new.json");
        refuse_overlap(&[&fresh], &inputs).unwrap();
        let again = dir.path().join("sub/../new.json");
        fs::create_dir(dir.path().join("sub")).unwrap();
        let e = refuse_overlap(&[&fresh, &again], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("they are one file"), "{e}");
    }
}
