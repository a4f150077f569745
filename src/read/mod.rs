//! Readers: result files read back. [`compare`] pairs rows of two files and
//! gives verdicts, [`summary`] sets this machine's results beside the reference
//! lab's, [`report`] builds `results/README.md` from every machine folder.

pub mod compare;
pub mod entries;
pub mod report;
pub mod summary;
