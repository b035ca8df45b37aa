//! The lab's calls to the operating system. Shared-memory objects, mappings, futexes and the
//! monotonic clock are the library's own (`ferry::sys`), so that the raw baselines stand on the
//! same OS layer as ferry; CPU pinning, which the library never does, is the lab's.

use std::io;

pub use ferry::sys::{
    futex_wait, futex_wake, monotonic_ns, page_size, shm_unlink, Mapping, ShmObject,
};

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "CPU {cpu} is past the {} a CPU set can name",
                rustix::thread::CpuSet::MAX_CPU
            ),
        ));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> usize {
    rustix::thread::sched_getcpu()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_a_cpu_runs_there() {
        let cpu = current_cpu();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(current_cpu(), cpu);
        })
        .join()
        .unwrap();
        assert!(monotonic_ns() > 0);
    }

    /// A CPU number past what a CPU set names (one from another machine's request) is an
    /// error, not a panic.
    #[test]
    fn a_cpu_past_the_set_is_an_error() {
        let e = pin_current_thread(rustix::thread::CpuSet::MAX_CPU).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(pin_current_thread(usize::MAX).is_err());
    }
}
