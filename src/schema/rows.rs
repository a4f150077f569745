//! A body's timed rows, said once: each experiment's file names its rows, says
//! which clocks they hold and what each is for, how they ended and what they
//! pair with in another file; the readers walk [`Body::timed_rows`] instead of
//! rebuilding row names of their own. The availability judgement (a clock's
//! [`Availability`]), the exit code's "rows failed" (`outcome`) and the
//! entries that `compare` and `report` pair (`read::entries`) all read this
//! list, so the three cannot drift apart. Plain data: nothing here measures or
//! shows.

use super::{Availability, Body, DeviceKind, RowStatus, Timed};

/// One row of a result as the readers see it.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedRow<'a> {
    /// The row as the exit line names a failure of it ("prefill fp32",
    /// "fp16 at 4096").
    pub name: String,
    /// How the row ended, for a row that can fail on its own; `None` for one
    /// that cannot (a ceiling, a launch row: its section is measured or the
    /// run ends with an error), which the exit code does not count.
    pub status: Option<RowStatus>,
    /// Whether it holds a measurement.
    pub measured: bool,
    /// Its clocks that a machine's availability judges, in the order a
    /// message lists them, each named as the message names it ("pp fp32",
    /// "cpu fp32"). Empty when the row did not run.
    pub timings: Vec<Timing<'a>>,
    /// What it pairs with in another file (`compare`, `report`), in the order
    /// they are listed.
    pub pairs: Vec<Pairing<'a>>,
    /// The share of a ceiling it reached, for a row held against one
    /// (`read::bounds` lists those over [`super::BEATEN_PCT`]).
    pub bounded: Option<Bounded>,
}

/// A row held against a ceiling: what it is, in a message ("kernels add
/// large fp32 lab", "generate fp32 tg"), and the share it reached.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounded {
    pub what: String,
    pub pct: f64,
}

impl<'a> TimedRow<'a> {
    /// A row that can fail on its own: its status, and whether it holds a
    /// measurement (a row without one failed, unless it was unsupported).
    pub(crate) fn ran(
        name: String,
        status: RowStatus,
        timings: Vec<Timing<'a>>,
        pairs: Vec<Pairing<'a>>,
        measured: bool,
    ) -> Self {
        Self {
            name,
            status: Some(status),
            measured,
            timings,
            pairs,
            bounded: None,
        }
    }

    /// The same row, held against a ceiling: `pct` of it, when measured.
    pub(crate) fn bounded(mut self, what: String, pct: Option<f64>) -> Self {
        self.bounded = pct.map(|pct| Bounded { what, pct });
        self
    }

    /// A row that cannot fail on its own (a ceiling, a launch row): one
    /// clock, named as the row is, pairing with nothing.
    pub(crate) fn section(name: String, timed: &'a Timed) -> Self {
        Self {
            timings: vec![Timing::new(name.clone(), Clock::of(timed))],
            name,
            status: None,
            measured: true,
            pairs: Vec::new(),
            bounded: None,
        }
    }
}

/// The parts of a timing the readers use: its median, its samples and the
/// machine's availability while it ran (from a [`Timed`], or a matmul row's
/// `Measured`, which holds the same fields).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clock<'a> {
    pub median_ms: f64,
    pub samples_wall_ms: &'a [f64],
    pub availability: Option<&'a Availability>,
}

impl<'a> Clock<'a> {
    pub(crate) fn of(t: &'a Timed) -> Self {
        Self {
            median_ms: t.median_ms,
            samples_wall_ms: &t.samples_wall_ms,
            availability: t.availability.as_ref(),
        }
    }
}

/// One clock of a row, named for the availability message.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing<'a> {
    pub name: String,
    pub clock: Clock<'a>,
}

impl<'a> Timing<'a> {
    pub(crate) fn new(name: String, clock: Clock<'a>) -> Self {
        Self { name, clock }
    }
}

/// A time that pairs with the same key in another file: experiment, size,
/// precision and device.
#[derive(Clone, Debug, PartialEq)]
pub struct Pairing<'a> {
    /// "matmul", "block prefill", "generate tg <model>", "kernels add <case>":
    /// what keeps rows that must not pair apart.
    pub experiment: String,
    pub size: u64,
    pub precision: String,
    /// The plain row this one stands for where the other file has no row like
    /// it: "fp32" for "fp32 (lab kernels)", so that the suite's kernels pair
    /// with a PyTorch twin's fp32. `None`: a plain row.
    pub stands_for: Option<String>,
    /// The device it ran on; `None`: the file's.
    pub device: Option<DeviceKind>,
    pub clock: Clock<'a>,
    /// Calls in one sample: the median and samples over it are per call, so
    /// that files sampled with different counts pair call with call.
    pub calls_per_sample: u64,
}

/// What a body's own file says of it beyond its types: its rows, as the
/// readers walk them, and the checks its types cannot make. Every method is
/// required, so that a new body says both.
pub(crate) trait Rows {
    /// Every row a reader walks, in the order the body holds them.
    fn timed_rows(&self) -> Vec<TimedRow<'_>>;
    /// What the types cannot say themselves (row status against
    /// measurements, a skipped section's reason).
    fn validate(&self) -> anyhow::Result<()>;
}

impl Body {
    /// The body as its own file describes it: the one match over bodies in
    /// the schema.
    fn rows(&self) -> &dyn Rows {
        match self {
            Self::Basics(r) => r,
            Self::Precision(r) => r,
            Self::Matmul(r) => r,
            Self::CpuVsGpu(r) => r,
            Self::Memory(r) => r,
            Self::Overhead(r) => r,
            Self::Sweep(r) => r,
            Self::Block(r) => r,
            Self::Generate(r) => r,
            Self::Kernels(r) => r,
            Self::Scaling(r) => r,
        }
    }

    /// Every row of the body that a reader walks, in the order the body holds
    /// them; none for the bodies without timed rows (basics, precision).
    pub fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        self.rows().timed_rows()
    }

    /// Each body's own checks ([`Rows::validate`]).
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        self.rows().validate()
    }
}
