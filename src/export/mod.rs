//! Exporters: result types out to the world. [`output`] is the output-file
//! policy (checked before running, atomic, signal-safe); [`table`] prints
//! terminal tables; [`svg`] draws charts. They never measure.

pub mod output;
pub mod svg;
pub mod table;
