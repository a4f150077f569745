//! Freed memory kept by the process, for a program whose rows must time the
//! op and not the kernel's page zeroing. glibc's malloc maps any block over
//! 32 MiB (its largest mmap threshold) afresh and unmaps it when freed, so
//! an op whose output is that large faults every page of it in on every call
//! (the kernel zeroes each page first): at a footprint past the caches that
//! costs more than the op's own traffic, and varies with how fast the kernel
//! finds free (huge) pages. The bandwidth ladder's arrays are allocated once,
//! so a row held against it would be held against a bound that pays none of
//! it. [`keep_freed_memory`] has malloc serve every block from its heap and
//! never return the heap's top: an output of any size is memory the process
//! already holds after the first call, as a block under 32 MiB always was.

/// Serves every allocation from malloc's heap and keeps what is freed
/// (`mallopt(M_MMAP_MAX, 0)`, `mallopt(M_TRIM_THRESHOLD, -1)`, glibc's
/// mallopt(3)); returns whether both took. Elsewhere (another libc) a no-op
/// that returns false. Call it before the work it is for allocates. It holds
/// for the main thread's arena, where the programs allocate their tensors; a
/// block over 64 MiB asked for on another thread still maps afresh.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets malloc's parameters; it is called
        // before the program allocates what it measures.
        unsafe {
            libc::mallopt(libc::M_MMAP_MAX, 0) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, -1) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_both_settings() {
        assert!(super::keep_freed_memory());
    }
}
