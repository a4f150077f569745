//! The lines around the summary's table: how each file's rows were sampled
//! (the lab's fixed plan or an adaptive one), and the notes under it (the
//! lab's caveat answered by the block and by the whole model, the suite's own
//! kernels end to end, the rows measured on a contended machine).

use crate::schema::{Body, DeviceKind, ResultFile};

/// This machine's result files, each parsed or with the reason it is not
/// there (missing, unreadable) in one line.
pub struct MachineFiles {
    pub basics: Result<ResultFile, String>,
    pub matmul: Result<ResultFile, String>,
    pub cpu_vs_gpu: Result<ResultFile, String>,
    pub block: Result<ResultFile, String>,
    pub generate: Result<ResultFile, String>,
}

/// How a file's timed rows were sampled, said beside its name, so that each
/// figure's protocol is known: the lab's fixed plan, or an adaptive one.
pub(super) fn protocol(file: &ResultFile) -> String {
    match &file.body {
        Body::Matmul(m) => {
            let plan = m.sampling.map_or_else(
                || format!("warmup {}, iters {}", m.warmup, m.iters),
                |s| s.to_string(),
            );
            format!(", rows sampled {plan}")
        }
        Body::CpuVsGpu(c) => format!(
            ", the CPU row sampled warmup {}, iters {}",
            c.cpu_warmup, c.cpu_iters
        ),
        _ => String::new(),
    }
}

/// The block's answer to the lab's caveat (one line per narrow precision),
/// the whole model's (one line per precision against fp32), and the rows measured on a contended machine, from this machine's files.
pub(super) fn notes(files: &MachineFiles) -> Vec<String> {
    use crate::export::views;
    let mut notes = Vec::new();
    if let Ok(file) = &files.block {
        if let Body::Block(b) = &file.body {
            notes.extend(
                views::block::caveat(b)
                    .into_iter()
                    .map(|line| format!("The lab's caveat, measured here (block.json): {line}.")),
            );
            notes.extend(
                views::block::kernels_line(b)
                    .map(|line| format!("Our own kernels, measured here (block.json): {line}.")),
            );
        }
    }
    if let Ok(file) = &files.generate {
        let models = match &file.body {
            Body::Generate(g) => g.models(),
            _ => Vec::new(),
        };
        for g in models {
            // Each line says how few runs it rests on (just results: 3), and
            // its model.
            let of = format!(
                "generate.json, {}, median of {} runs after {} warm-up",
                g.model.key(),
                g.iters,
                g.warmup
            );
            notes.extend(
                views::generate::caveat(g)
                    .into_iter()
                    .map(|line| format!("The lab's caveat, for a whole model ({of}): {line}.")),
            );
            notes.extend(
                views::generate::kernels_line(g, file.device.kind == DeviceKind::Cuda)
                    .map(|line| format!("Our own kernels, measured here ({of}): {line}.")),
            );
        }
    }
    let contended: Vec<String> = [
        &files.matmul,
        &files.cpu_vs_gpu,
        &files.block,
        &files.generate,
    ]
    .into_iter()
    .filter_map(|f| f.as_ref().ok())
    .flat_map(|f| {
        views::availabilities(f)
            .into_iter()
            .filter(|(_, a)| a.contended)
            .map(|(name, _)| format!("{} {name}", f.experiment))
            .collect::<Vec<_>>()
    })
    .collect();
    if !contended.is_empty() {
        notes.push(format!(
            "Measured on a contended machine, so these understate it: {} (docs/measuring.md).",
            contended.join(", ")
        ));
    }
    notes
}
