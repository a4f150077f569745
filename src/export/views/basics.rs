//! The basics experiment shown: its tables.

use super::{Records, Shown};
use crate::export::table::Table;
use crate::schema::{BasicsResults as Basics, Described, ResultFile};

/// The basics tables.
pub fn show(r: &Basics) -> Shown {
    Shown {
        tables: tables(r),
        notes: Vec::new(),
    }
}

fn tables(r: &Basics) -> Vec<Table> {
    vec![
        described("rank, shape, dtype, bytes, device", &r.tensors),
        described("one shape, every dtype", &r.dtypes),
        ops(r),
        views(r),
        transfer(r),
    ]
}

/// Tensors with their rank, shape, dtype, bytes and device.
fn described(title: &str, rows: &[Described]) -> Table {
    let header = [
        "name",
        "rank",
        "shape",
        "dtype",
        "elem bytes",
        "total bytes",
        "device",
    ];
    let mut t = Table::new(title, &header);
    for d in rows {
        t.row([
            d.name.clone(),
            d.rank.to_string(),
            format!("{:?}", d.shape),
            d.dtype.to_string(),
            d.element_bytes.to_string(),
            d.total_bytes.to_string(),
            d.device.clone(),
        ]);
    }
    t
}

/// An element-wise add and a broadcast one.
fn ops(r: &Basics) -> Table {
    let mut ops = Table::new(
        "element-wise add and broadcasting",
        &["operation", "result"],
    );
    let e = &r.elementwise_add;
    ops.row([
        format!("{:?} + {:?}", e.a, e.b),
        format!("{:?}", e.a_plus_b),
    ]);
    let bc = &r.broadcasting;
    ops.row([
        format!("ones{:?} + row{:?}", bc.matrix_shape, bc.row_shape),
        format!("{:?}", bc.result),
    ]);
    ops
}

/// Views and what they (and `.contiguous()`) allocate.
fn views(r: &Basics) -> Table {
    let mut views = Table::new(
        format!("views copy nothing ({})", r.memory_source),
        &[
            "view",
            "shape",
            "stride",
            "contiguous",
            "view adds",
            ".contiguous() adds",
            "data bytes",
        ],
    );
    let opt = |b: Option<u64>| b.map_or("n/a".to_string(), |b| format!("{b} B"));
    for v in &r.views {
        views.row([
            v.name.to_string(),
            format!("{:?}", v.shape),
            format!("{:?}", v.stride),
            v.is_contiguous.to_string(),
            opt(v.view_added_bytes),
            opt(v.contiguous_added_bytes),
            format!("{} B", v.data_bytes),
        ]);
    }
    views
}

/// A host-to-device copy, or why there was none.
fn transfer(r: &Basics) -> Table {
    let mut transfer = Table::new("host-to-device transfer", &["", "value"]);
    let t = &r.transfer;
    transfer.row(["status", t.status.as_str()]);
    if let (Some(before), Some(after)) = (&t.before, &t.after) {
        transfer.row(["before .to_device()", before]);
        transfer.row(["after .to_device()", after]);
    }
    if let Some(reason) = &t.reason {
        transfer.row(["reason", reason]);
    }
    transfer
}

/// The basics' view (no rows for a CSV, nothing to chart).
impl super::View for Basics {
    fn show(&self, _file: &ResultFile) -> Shown {
        show(self)
    }

    fn records(&self, _machine: &str) -> Option<Records> {
        None
    }

    fn chart(&self, _file: &ResultFile) -> Option<String> {
        None
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        // The same on every machine: read under the README's Files.
        super::Section::Across
    }
}
