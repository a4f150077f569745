//! Spans: a pass's time split by op class, measured inside the real pass.
//! While [`record`] runs a pass, every [`span`] the model's code wraps
//! around an op synchronizes the device, reads the clock, runs the op,
//! synchronizes again and adds the time to its class; outside a recording a
//! span is the op alone (one thread-local check), so the clean runs are
//! untouched. A span inside a span counts once, in the outer one. What the
//! spans do not cover (the model's own bookkeeping, the cache's layout, the
//! clock itself) is the pass's time less the spans': the remainder a split
//! must show. Synchronizing around every op on a GPU costs each op its
//! launch latency: the spanned pass is slower than a clean one, and the
//! caller states by how much.

use std::cell::RefCell;
use std::time::Instant;

use anyhow::Result;
use candle_core::Device;

use crate::device::sync;
use crate::schema::TokenOpClass;

/// One recording: the device to synchronize, each class's time and calls,
/// and how deep the current span is.
struct Recorder {
    device: Device,
    ms: Vec<(TokenOpClass, f64, usize)>,
    depth: usize,
}

thread_local! {
    static ACTIVE: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Runs `op`; inside a [`record`] (and not inside another span), timed into
/// `class` between two synchronizations of the device.
pub fn span<T>(class: TokenOpClass, op: impl FnOnce() -> Result<T>) -> Result<T> {
    // None: not recording; Some(None): inside another span; Some(Some(d)): time it.
    let outer = ACTIVE.with(|a| {
        a.borrow_mut().as_mut().map(|r| {
            r.depth += 1;
            (r.depth == 1).then(|| r.device.clone())
        })
    });
    let Some(outer) = outer else {
        return op();
    };
    let timed = |op: Box<dyn FnOnce() -> Result<T> + '_>| -> Result<(T, Option<f64>)> {
        let Some(device) = &outer else {
            return Ok((op()?, None));
        };
        sync(device)?;
        let t0 = Instant::now();
        let out = op()?;
        sync(device)?;
        Ok((out, Some(t0.elapsed().as_secs_f64() * 1e3)))
    };
    let result = timed(Box::new(op));
    ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        let Some(r) = a.as_mut() else { return };
        r.depth -= 1;
        if let Ok((_, Some(ms))) = &result {
            match r.ms.iter_mut().find(|(c, _, _)| *c == class) {
                Some(e) => {
                    e.1 += ms;
                    e.2 += 1;
                }
                None => r.ms.push((class, *ms, 1)),
            }
        }
    });
    result.map(|(out, _)| out)
}

/// What a recorded pass gave: its wall time and each class's time and calls
/// (classes in [`TokenOpClass::ALL`]'s order, those never spanned left out).
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub total_ms: f64,
    pub classes: Vec<(TokenOpClass, f64, usize)>,
}

/// Runs `pass` with every [`span`] in it recorded, on `device` (synchronized
/// before the clock starts and after `pass` returns). The clock covers
/// `pass` whole, spans and their synchronizations included.
pub fn record<T>(device: &Device, pass: impl FnOnce() -> Result<T>) -> Result<(T, Split)> {
    sync(device)?;
    ACTIVE.with(|a| {
        *a.borrow_mut() = Some(Recorder {
            device: device.clone(),
            ms: Vec::new(),
            depth: 0,
        })
    });
    let t0 = Instant::now();
    let out = pass();
    let synced = sync(device);
    let total_ms = t0.elapsed().as_secs_f64() * 1e3;
    let recorder = ACTIVE.with(|a| a.borrow_mut().take());
    let out = out?;
    synced?;
    let mut classes = recorder.map(|r| r.ms).unwrap_or_default();
    classes.sort_by_key(|(c, _, _)| TokenOpClass::ALL.iter().position(|x| x == c));
    Ok((out, Split { total_ms, classes }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_count_their_class_once_and_nothing_outside_a_recording() {
        let dev = Device::Cpu;
        let sleep = |ms: u64| std::thread::sleep(std::time::Duration::from_millis(ms));
        // Outside: the op alone.
        assert_eq!(span(TokenOpClass::Norms, || Ok(3)).unwrap(), 3);
        let ((), split) = record(&dev, || {
            span(TokenOpClass::Matmuls, || {
                sleep(5);
                // Nested: counted in the outer span only.
                span(TokenOpClass::Norms, || {
                    sleep(1);
                    Ok(())
                })
            })?;
            span(TokenOpClass::Norms, || {
                sleep(2);
                Ok(())
            })?;
            span(TokenOpClass::Norms, || Ok(()))?;
            sleep(3);
            Ok(())
        })
        .unwrap();
        let classes: Vec<_> = split.classes.iter().map(|(c, _, n)| (*c, *n)).collect();
        assert_eq!(
            classes,
            [(TokenOpClass::Matmuls, 1), (TokenOpClass::Norms, 2)]
        );
        let spanned: f64 = split.classes.iter().map(|c| c.1).sum();
        assert!(split.classes[0].1 >= 6.0 && split.classes[1].1 >= 2.0);
        assert!(
            split.total_ms >= spanned + 3.0,
            "the remainder is the sleep outside"
        );
        // And after: nothing recorded.
        assert_eq!(span(TokenOpClass::Norms, || Ok(4)).unwrap(), 4);
    }
}
