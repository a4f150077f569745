//! Readers: result files read back. [`load`] is the one way a file is read
//! (size, type, JSON, [`check`] of the numbers the schema cannot check, then the
//! typed schema); [`entries`] takes the timed rows out of a file; [`compare`]
//! pairs rows of two files and gives verdicts, [`summary`] sets this machine's
//! results beside the reference lab's, [`report`] builds `results/README.md`
//! from every machine folder; [`folder`] is what report and summary may touch
//! in a results folder.

pub mod bounds;
pub mod check;
pub mod compare;
pub mod entries;
pub mod folder;
pub mod load;
pub mod report;
pub mod summary;
