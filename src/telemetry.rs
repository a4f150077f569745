//! The GPU's state around each timed row, so that a throttled run is visible in
//! its file: SM and memory clocks, power, temperature and NVML's clock throttle
//! reasons, read just before a row's first sample and just after its last.
//! NVML is the driver's management library; the `nvml-wrapper` crate loads
//! `libnvidia-ml.so` at run time, so a machine without the driver still runs
//! and records why there is no state. [`Telemetry::timed`] wraps one call of
//! the clock and turns its samples into a [`Timed`] row.

use anyhow::{Context, Result};
use candle_core::Device;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::Nvml;

use crate::clock::{time_on_device, Plan, Samples};
use crate::schema::{GpuState, TelemetrySource, Timed};
use crate::stats::summarize;

/// An open NVML handle on the run's GPU, or why there is none.
pub struct Telemetry {
    nvml: Option<(Nvml, String)>,
    unavailable: Option<String>,
}

impl Telemetry {
    /// NVML for the GPU `device` is, matched by UUID (NVML and CUDA may number
    /// GPUs differently). Never fails: what goes wrong becomes the reason.
    pub fn open(device: &Device) -> Self {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => {
                match crate::cuda::uuid(dev).and_then(|raw| open_nvml(&nvml_uuid(&raw))) {
                    Ok(nvml) => Self {
                        nvml: Some(nvml),
                        unavailable: None,
                    },
                    Err(e) => Self::unavailable(crate::error::error_line(&e)),
                }
            }
            _ => Self::unavailable("the device is the CPU: there is no GPU state to read".into()),
        }
    }

    fn unavailable(reason: String) -> Self {
        Self {
            nvml: None,
            unavailable: Some(reason),
        }
    }

    /// For the result file: where the states come from, or why there are none.
    pub fn source(&self) -> TelemetrySource {
        TelemetrySource {
            source: self
                .nvml
                .as_ref()
                .map(|(_, uuid)| format!("NVML (libnvidia-ml via nvml-wrapper), {uuid}")),
            unavailable_reason: self.unavailable.clone(),
        }
    }

    /// The GPU's state now; `None` without NVML. A value the GPU does not
    /// report is null on its own.
    pub fn state(&self) -> Option<GpuState> {
        let (nvml, uuid) = self.nvml.as_ref()?;
        let gpu = nvml.device_by_uuid(uuid.as_str()).ok()?;
        Some(GpuState {
            sm_clock_mhz: gpu.clock_info(Clock::SM).ok(),
            memory_clock_mhz: gpu.clock_info(Clock::Memory).ok(),
            power_w: gpu.power_usage().ok().map(|mw| f64::from(mw) / 1e3),
            temperature_c: gpu.temperature(TemperatureSensor::Gpu).ok(),
            throttle_reasons: gpu.current_throttle_reasons().ok().map(|r| {
                r.iter_names()
                    .map(|(name, _)| name.to_string())
                    .filter(|name| name != "NONE")
                    .collect()
            }),
        })
    }

    /// Runs one timed row (`run` calls the clock) with the GPU's state read
    /// before and after it.
    pub fn timed(&self, run: impl FnOnce() -> Result<Samples>) -> Result<Timed> {
        let before = self.state();
        let samples = run()?;
        let after = self.state();
        to_timed(samples, before, after)
    }

    /// The common case of [`Self::timed`]: `work` on the clock with `plan`,
    /// behind a progress bar labelled `label`.
    pub fn time<R>(
        &self,
        device: &Device,
        plan: Plan,
        label: &str,
        work: impl FnMut() -> Result<R>,
    ) -> Result<Timed> {
        let bar = crate::clock::progress_bar(&plan.into(), label);
        let timed = self.timed(|| time_on_device(device, plan, &bar, work));
        bar.finish_and_clear();
        timed
    }
}

impl Telemetry {
    /// Works compared with each other timed in turn (A B A B: the clock's
    /// [`crate::clock::time_interleaved`]) under `plan`, behind one progress
    /// bar labelled `label`, the GPU's state read before and after all of
    /// them; one row per work, in order.
    pub fn time_interleaved(
        &self,
        device: &Device,
        plan: Plan,
        label: &str,
        works: &mut [crate::clock::Work<'_>],
    ) -> Result<Vec<Timed>> {
        let rounds = Plan {
            warmup: plan.warmup * works.len(),
            iters: plan.iters * works.len(),
        };
        let bar = crate::clock::progress_bar(&rounds.into(), label);
        let before = self.state();
        let samples = crate::clock::time_interleaved(device, plan, &bar, works);
        let after = self.state();
        bar.finish_and_clear();
        samples?
            .into_iter()
            .map(|s| to_timed(s, before.clone(), after.clone()))
            .collect()
    }
}

/// One line for the terminal: where GPU state comes from, or why there is none.
pub fn line(t: &TelemetrySource) -> String {
    match (&t.source, &t.unavailable_reason) {
        (Some(source), _) => format!("GPU state before/after each row: {source}"),
        (None, Some(why)) => format!("GPU state not recorded: {why}"),
        (None, None) => "GPU state not recorded".into(),
    }
}

/// The clock's samples as a result row: medians and summaries beside them.
pub fn to_timed(
    samples: Samples,
    gpu_before: Option<GpuState>,
    gpu_after: Option<GpuState>,
) -> Result<Timed> {
    let wall_ms = summarize(&samples.wall_ms).context("no timed samples")?;
    let gpu_ms = summarize(&samples.gpu_ms);
    // On the CPU a row is judged against Candle's whole pool: its GEMMs,
    // softmax and norms split across it, its element-wise kernels do not. A row
    // that leaves threads idle on a quiet machine is not flagged (the idle rule
    // in `verdict`); one whose threads others took is. A GPU row: its one
    // launching thread.
    let threads = if samples.on_gpu {
        1
    } else {
        candle_core::utils::get_num_threads()
    };
    let availability = samples.availability(threads);
    Ok(Timed {
        median_ms: wall_ms.median,
        gpu_median_ms: gpu_ms.as_ref().map(|s| s.median),
        wall_ms,
        gpu_ms,
        samples_wall_ms: samples.wall_ms,
        samples_gpu_ms: samples.gpu_ms,
        gpu_before,
        gpu_after,
        availability,
    })
}

/// A row timed at these wall and GPU samples (ms), for the row builders' tests.
#[cfg(test)]
pub(crate) fn timed_at(wall: &[f64], gpu: &[f64]) -> Timed {
    to_timed(Samples::from_ms(wall.to_vec(), gpu.to_vec()), None, None).unwrap()
}

/// Loads NVML and finds the GPU with `uuid` (NVML's spelling, "GPU-...").
pub fn open_nvml(uuid: &str) -> Result<(Nvml, String)> {
    let nvml =
        Nvml::init().context("NVML could not be loaded (is the NVIDIA driver installed?)")?;
    nvml.device_by_uuid(uuid)
        .with_context(|| format!("NVML does not know the GPU {uuid}"))?;
    Ok((nvml, uuid.to_string()))
}

/// NVML's name for a GPU from the 16 bytes of its UUID (`cuDeviceGetUuid`):
/// "GPU-" and the bytes in hex, grouped 8-4-4-4-12 as `nvidia-smi -L` prints them.
pub fn nvml_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_spelled_as_nvml_spells_them() {
        let bytes = [
            0x5a, 0x1b, 0x00, 0xff, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23,
            0x45, 0x67,
        ];
        assert_eq!(
            nvml_uuid(&bytes),
            "GPU-5a1b00ff-1234-5678-9abc-def001234567"
        );
    }

    #[test]
    fn the_cpu_has_no_gpu_state_and_says_why() {
        let t = Telemetry::open(&Device::Cpu);
        assert!(t.state().is_none());
        let source = t.source();
        assert!(source.source.is_none());
        assert!(source.unavailable_reason.unwrap().contains("CPU"));
    }

    #[test]
    fn nvml_that_cannot_load_is_a_one_line_reason() {
        // Without an NVIDIA driver (this suite's CI) loading fails; with one,
        // no GPU has this UUID. Either way the answer is one line, no panic.
        let err = open_nvml("GPU-00000000-0000-0000-0000-000000000000").unwrap_err();
        let line = crate::error::error_line(&err);
        assert!(line.contains("NVML"), "{line}");
        assert_eq!(format!("{err:#}").lines().count(), 1, "{err:#}");
    }

    #[test]
    fn samples_become_a_row_with_their_medians() {
        let samples = Samples::from_ms(vec![3.0, 1.0, 2.0], vec![]);
        let t = to_timed(samples, None, None).unwrap();
        assert_eq!(t.median_ms, 2.0);
        assert_eq!(t.gpu_median_ms, None);
        assert_eq!(t.wall_ms.n, 3);
        assert_eq!(t.samples_wall_ms, [3.0, 1.0, 2.0]);
        assert!(to_timed(Samples::from_ms(vec![], vec![]), None, None).is_err());
    }
}
