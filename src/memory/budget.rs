//! A byte budget for third-party code fed what a file says (a GGUF's chat
//! template): [`within`] runs it on a thread of its own whose live heap
//! allocations the counting allocator ([`super::CountingAlloc`]) holds to a
//! limit. Rust cannot hand a refused allocation back to code that did not ask
//! with `try_reserve` (it aborts), so the allocation past the limit is never
//! made: the thread that asked for it stops there for good (parked, its
//! memory, at most the limit, kept until the process ends), and [`within`]
//! answers `None` to its caller, whose run then ends with one error line.
//! Without the counting allocator (the library's own unit tests), nothing is
//! counted and the limit does not apply.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Duration;

/// Tells the caller of [`within`] that its thread went past the limit.
struct Gate {
    over: AtomicBool,
    waiter: Thread,
}

/// The budget of the current thread: bytes it may hold, bytes it holds.
#[derive(Clone, Copy)]
struct Budget {
    limit: usize,
    live: usize,
    /// Valid while the thread runs: its closure holds the `Arc`.
    gate: *const Gate,
}

thread_local! {
    /// Set on a [`within`] thread only; const and without a destructor, so the
    /// allocator can read it at any time without allocating.
    static BUDGET: Cell<Option<Budget>> = const { Cell::new(None) };
}

/// Counts `bytes` more on this thread's budget, if it has one, before they
/// are allocated; past the limit this thread goes no further ([`stop`]).
pub(super) fn grow(bytes: usize) {
    let _ = BUDGET.try_with(|cell| {
        if let Some(mut b) = cell.get() {
            b.live = b.live.saturating_add(bytes);
            if b.live > b.limit {
                stop(b.gate);
            }
            cell.set(Some(b));
        }
    });
}

/// Counts `bytes` freed on this thread's budget, if it has one.
pub(super) fn shrink(bytes: usize) {
    let _ = BUDGET.try_with(|cell| {
        if let Some(mut b) = cell.get() {
            b.live = b.live.saturating_sub(bytes);
            cell.set(Some(b));
        }
    });
}

/// Tells the waiting caller, then parks this thread for good: nothing here
/// allocates (an atomic store, a futex wake, a futex wait).
fn stop(gate: *const Gate) -> ! {
    // SAFETY: `gate` comes from the `Arc` the thread's closure holds, and
    // that closure never returns from here.
    let gate = unsafe { &*gate };
    gate.over.store(true, Ordering::SeqCst);
    gate.waiter.unpark();
    loop {
        std::thread::park();
    }
}

/// Runs `f` on a thread of its own whose live heap allocations may not pass
/// `limit` bytes: `Some` of its answer, or `None` when it asked for more (the
/// thread is then left stopped, holding at most `limit`). A panic in `f` is
/// resumed here.
pub fn within<R: Send + 'static>(
    limit: usize,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let gate = Arc::new(Gate {
        over: AtomicBool::new(false),
        waiter: std::thread::current(),
    });
    let held = Arc::clone(&gate);
    let handle = std::thread::Builder::new()
        .name("budgeted".into())
        .spawn(move || {
            let budget = Budget {
                limit,
                live: 0,
                gate: Arc::as_ptr(&held),
            };
            BUDGET.with(|b| b.set(Some(budget)));
            let answer = f();
            BUDGET.with(|b| b.set(None));
            held.waiter.unpark();
            answer
        })
        .expect("a thread starts");
    loop {
        if gate.over.load(Ordering::SeqCst) {
            return None;
        }
        if handle.is_finished() {
            return Some(
                handle
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
            );
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_counting_allocator_it_runs_and_answers() {
        assert_eq!(within(1, || vec![7u8; 1000].len()), Some(1000));
        let caught = std::panic::catch_unwind(|| within(1 << 20, || panic!("inside")));
        assert!(caught.is_err(), "a panic reaches the caller");
    }
}
