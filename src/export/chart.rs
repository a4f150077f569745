//! The chart a program draws beside its JSON (`sweep.svg`, `kernels.svg`), as a [`Format`]:
//! which experiments have one, and its drawing, are each experiment's view's
//! ([`Kind::writes`], [`views::chart`]); `svg` only draws. (The matmul and
//! memory charts of `results/README.md` are drawn by `report`.)

use anyhow::Result;

use super::{views, Format};
use crate::schema::{Kind, ResultFile};

pub struct Chart;

impl Format for Chart {
    fn extension(&self) -> &'static str {
        "svg"
    }

    fn applies_to(&self, experiment: Kind) -> bool {
        experiment.writes().chart
    }

    /// No chart until there is something to draw (a sweep before its first
    /// measured point).
    fn render(&self, file: &ResultFile) -> Result<Option<Vec<u8>>> {
        Ok(views::chart(file).map(String::into_bytes))
    }
}
