//! The chart written beside a program's JSON, as one more [`Format`]: the
//! sweep's GFLOP/s against n, and the kernels' % of the copy ceiling (the
//! matmul, memory and block charts are drawn by `report` from every folder).
//! The drawing is [`super::svg`]'s; what to draw, each experiment's view's.

use anyhow::Result;

use super::Format;
use crate::export::views::{kernels, sweep};
use crate::schema::{Body, ResultFile};

pub struct Chart;

impl Format for Chart {
    fn extension(&self) -> &'static str {
        "svg"
    }

    fn applies_to(&self, experiment: &str) -> bool {
        matches!(experiment, "sweep" | "kernels")
    }

    fn render(&self, file: &ResultFile) -> Result<Option<Vec<u8>>> {
        match &file.body {
            // No chart until a point has a measurement.
            Body::Sweep(r) => {
                let title = sweep::title(&file.device, &file.environment, r);
                Ok(sweep::chart(&title, r).ok().map(String::into_bytes))
            }
            // None when no variant ran.
            Body::Kernels(r) => Ok(kernels::chart(file, r).ok().map(String::into_bytes)),
            _ => Ok(None),
        }
    }
}
