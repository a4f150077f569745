//! Does it fit: one policy, used by every experiment before it allocates. A
//! failed host allocation aborts the process instead of returning an error, and
//! a failed GPU one is better not tried, so what cannot fit is refused first,
//! in one line naming the flag that asked for it.
//!
//! - Host: the bytes that live on the host (all of them when the device is the
//!   CPU) are refused when a trial reservation of the whole need fails (a
//!   process limit such as `ulimit -v`, or more than the kernel will commit) or
//!   when they exceed the machine's memory and swap. Less `MemAvailable` than
//!   needed is a note, not a refusal: the kernel can free caches, and a VM whose
//!   memory grows on demand (the lent GPU machine) reports far less at start
//!   than it can give. [`HostCheck::Skip`] (`--skip-host-memory-check`) skips
//!   the host check where even `MemTotal` understates that memory.
//! - GPU: more than the device's free memory (`cuMemGetInfo`) is refused.

use anyhow::{bail, Result};
use candle_core::Device;

use crate::env::HostMemory;
use crate::units::bytes;

/// Whether [`check`] checks host memory (`--skip-host-memory-check` turns it off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostCheck {
    Enforce,
    Skip,
}

/// What one part of a run needs, named by the flag that sizes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// The flag and value that ask for it ("--size 4096", "--mib 512").
    pub what: String,
    /// Bytes that live on the host whatever the device (inputs made there).
    pub host_bytes: u64,
    /// Bytes that live on the device: host memory too when it is the CPU.
    pub device_bytes: u64,
}

impl Need {
    /// The same bytes, all on the host: a part of a GPU run that runs on the
    /// CPU (the reference lab's fp32 CPU comparison), checked on any device.
    pub fn on_host(self) -> Need {
        Need {
            host_bytes: self.host_bytes.saturating_add(self.device_bytes),
            device_bytes: 0,
            ..self
        }
    }
}

/// Refuses `need` on `device` when it cannot fit (module docs), before
/// anything is allocated; prints a note when the host has less available now
/// than it needs.
pub fn check(device: &Device, need: &Need, host: HostCheck) -> Result<()> {
    let mut host_needed = need.host_bytes;
    if device.is_cpu() {
        host_needed = host_needed.saturating_add(need.device_bytes);
    }
    if host == HostCheck::Enforce {
        let reserved = try_reserve_host(host_needed);
        let memory = crate::env::host_memory();
        if let Some(note) = host_verdict(&need.what, host_needed, memory, reserved)? {
            crate::note!("note: {note}");
        }
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        let (free, _) = crate::cuda::memory_info(dev)?;
        if need.device_bytes > free {
            bail!(
                "{}: needs {} of GPU memory, {} available",
                need.what,
                bytes(need.device_bytes),
                bytes(free)
            );
        }
    }
    Ok(())
}

/// [`check`] for each need in turn: the first that cannot fit refuses.
pub fn check_all(device: &Device, needs: &[Need], host: HostCheck) -> Result<()> {
    needs.iter().try_for_each(|need| check(device, need, host))
}

/// Asks the allocator for `bytes` at once and gives them back untouched (no
/// page is written, so nothing is used). It fails where the real allocations
/// would: under a process limit (`ulimit -v`) or beyond what the kernel agrees
/// to commit.
pub fn try_reserve_host(bytes: u64) -> bool {
    let Ok(bytes) = usize::try_from(bytes) else {
        return false;
    };
    // The counting allocator ends the run on a refused allocation, unless asked.
    super::fallible(|| Vec::<u8>::new().try_reserve_exact(bytes).is_ok())
}

/// The host-memory decision from what was measured: `needed` bytes for
/// `what`, `/proc/meminfo` (when there is one) and whether a trial reservation
/// of `needed` succeeded. `Err` refuses; `Ok(Some(note))` goes ahead with a
/// note; `Ok(None)` goes ahead.
pub fn host_verdict(
    what: &str,
    needed: u64,
    memory: Option<HostMemory>,
    reserved: bool,
) -> Result<Option<String>> {
    let need = bytes(needed);
    let now = memory.map_or(String::new(), |m| {
        format!(" ({} available now)", bytes(m.available_bytes))
    });
    if !reserved {
        bail!(
            "{what}: needs {need} of host memory{now} and the allocator refused to reserve it \
             (a process limit such as `ulimit -v`, or more than the system will commit); ask for less"
        );
    }
    let Some(mem) = memory else {
        return Ok(None);
    };
    let most = mem.total_bytes.saturating_add(mem.swap_bytes);
    if needed > most {
        bail!(
            "{what}: needs {need} of host memory, more than this machine's {} of memory and \
             swap{now}; ask for less (or, where memory grows on demand, --skip-host-memory-check)",
            bytes(most)
        );
    }
    Ok((needed > mem.available_bytes).then(|| {
        format!(
            "{what} needs {need} of host memory and {} is available now; trying anyway",
            bytes(mem.available_bytes)
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn machine() -> HostMemory {
        HostMemory {
            total_bytes: 16 * GIB,
            swap_bytes: 4 * GIB,
            available_bytes: 2 * GIB,
        }
    }

    #[test]
    fn less_available_than_needed_is_a_note_beyond_memory_and_swap_a_refusal() {
        let mem = Some(machine());
        assert_eq!(host_verdict("--size 8192", GIB, mem, true).unwrap(), None);
        let note = host_verdict("--size 8192", 3 * GIB, mem, true)
            .unwrap()
            .unwrap();
        let want = format!(
            "--size 8192 needs {} of host memory and {} is available now",
            bytes(3 * GIB),
            bytes(2 * GIB)
        );
        assert!(
            note.starts_with(&want) && note.ends_with("trying anyway"),
            "{note}"
        );
        let err = host_verdict("--mib 22528", 21 * GIB, mem, true).unwrap_err();
        let err = err.to_string();
        assert!(
            err.starts_with(&format!("--mib 22528: needs {}", bytes(21 * GIB))),
            "{err}"
        );
        let want = format!(
            "{} of memory and swap ({} available now)",
            bytes(20 * GIB),
            bytes(2 * GIB)
        );
        assert!(err.contains(&want), "{err}");
        // A refused reservation refuses, whatever /proc/meminfo says.
        let err = host_verdict("--size 8192", GIB, mem, false).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("refused to reserve") && err.contains("ulimit -v"),
            "{err}"
        );
        // Without /proc/meminfo, the reservation decides alone.
        assert_eq!(
            host_verdict("--size 8192", 100 * GIB, None, true).unwrap(),
            None
        );
    }

    #[test]
    fn a_trial_reservation_fails_only_beyond_what_can_be_had() {
        assert!(try_reserve_host(1 << 20));
        assert!(!try_reserve_host(u64::MAX));
    }

    #[test]
    fn a_cpu_run_counts_device_bytes_as_host_bytes() {
        // 2^62 device bytes on the CPU are host bytes, and refused; skipped, not.
        let need = Need {
            what: "--size 1".into(),
            host_bytes: 0,
            device_bytes: 1 << 62,
        };
        assert!(check(&Device::Cpu, &need, HostCheck::Enforce).is_err());
        check(&Device::Cpu, &need, HostCheck::Skip).unwrap();
        let small = Need {
            what: "--size 1".into(),
            host_bytes: 1 << 20,
            device_bytes: 1 << 20,
        };
        check_all(&Device::Cpu, &[small.clone(), small], HostCheck::Enforce).unwrap();
    }
}
