//! The async runtime of every long-running component. Tokio's default is one worker thread per CPU
//! the process may use, which on a GPU node of 128 or more cores and no CPU limit means as many
//! threads (each with its stack and, under glibc, soon its own malloc arena) in every DaemonSet Pod,
//! for components whose work is waiting on the API server, a socket or a vendor call. The work
//! that needs a CPU of its own has one already: the allocation engine runs on its own thread, CEL
//! on its deep stack, NVML and sysfs calls on bounded threads of their own.

use std::future::Future;

/// Worker threads of every component's runtime, whatever the node's size: two, so one slow poll
/// (a large list being decoded) never stalls probes and watches behind it.
pub const WORKER_THREADS: usize = 2;

/// Runs `future` to completion on a multi-threaded runtime of [`WORKER_THREADS`] workers with I/O
/// and timers enabled, malloc set first for a long life (see [`compact_malloc`](crate::compact_malloc));
/// fails only when the runtime cannot be built.
pub fn block_on<F: Future>(future: F) -> std::io::Result<F::Output> {
    crate::compact_malloc();
    Ok(runtime(WORKER_THREADS)?.block_on(future))
}

fn runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_has_the_workers_asked_for_with_timers_and_io() {
        // Not the machine's CPU count (which on a small test machine may equal WORKER_THREADS).
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = cpus + 1;
        let (seen, slept) = runtime(workers).unwrap().block_on(async {
            let started = tokio::time::Instant::now();
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            assert!(listener.local_addr().unwrap().port() > 0);
            (
                tokio::runtime::Handle::current().metrics().num_workers(),
                started.elapsed(),
            )
        });
        assert_eq!(seen, workers);
        assert!(slept >= std::time::Duration::from_millis(5));
        let default = block_on(async { tokio::runtime::Handle::current().metrics().num_workers() }).unwrap();
        assert_eq!(default, WORKER_THREADS);
    }
}
