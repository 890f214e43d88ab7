//! The controller's heap: jemalloc, one arena, no thread caches, and every page freed given back
//! to the kernel at once (`dirty_decay_ms:0`, `muzzy_decay_ms:0`).
//!
//! The controller keeps a large heap for its whole life (the engine's inventory and one record per
//! claim) and frees much more than it keeps on the way: each claim arrives as a whole decoded
//! object, waits as a lean one, and is replaced by a small record once allocated. glibc's malloc
//! keeps what is freed between blocks that stay (and `malloc_trim` cannot return it: it lies in
//! holes smaller than a page); jemalloc keeps blocks of one size class together, so what a burst
//! frees comes back in whole pages, and purges them at once.
//!
//! Measured by `make bench` (controller_memory, 1.34) at 1,000 nodes x 8 H100 and 10,000 claims on
//! one machine, before rounds let their claims go: when every claim is allocated, 61.1 MiB resident
//! (46.7 MiB anonymous; peak 73.2 MiB) with jemalloc so set, against 74.6 MiB (60.4 anonymous; peak
//! 77.1 MiB) with glibc's malloc as `component_base::compact_malloc` sets it. The idle process:
//! 16.1 MiB against 15.3.

/// Every Rust allocation of the process.
#[global_allocator]
static HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once when it starts (its `malloc_conf`, under the crate's symbol prefix).
#[allow(unsafe_code)]
// SAFETY: a NUL-terminated string that jemalloc only reads, under the name it looks up.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static HEAP_OPTIONS: &[u8; 57] = b"narenas:1,tcache:false,dirty_decay_ms:0,muzzy_decay_ms:0\0";

#[cfg(test)]
mod tests {
    use tikv_jemalloc_ctl::{opt, raw};

    /// The process's resident memory, in bytes (`VmRSS` of `/proc/self/status`).
    fn resident() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        let kib: usize = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kib * 1024
    }

    #[test]
    #[allow(unsafe_code)]
    fn jemalloc_runs_with_the_controller_options() {
        assert_eq!(opt::narenas::read().unwrap(), 1);
        assert!(!opt::tcache::read().unwrap());
        // SAFETY: both options are ssize_t in jemalloc.
        let dirty: isize = unsafe { raw::read(b"opt.dirty_decay_ms\0") }.unwrap();
        let muzzy: isize = unsafe { raw::read(b"opt.muzzy_decay_ms\0") }.unwrap();
        assert_eq!((dirty, muzzy), (0, 0));
    }

    /// A burst freed between blocks that stay comes back to the kernel at once.
    #[test]
    fn space_freed_between_kept_blocks_is_returned() {
        let before = resident();
        let mut kept = Vec::new();
        let mut burst = Vec::new();
        for i in 0..2_048usize {
            burst.push(vec![i as u8 | 1; 32 * 1024]);
            kept.push(Box::new(i));
        }
        let grown = resident();
        assert!(
            grown >= before + (48 << 20),
            "the burst is resident: {before} -> {grown}"
        );
        drop(burst);
        let after = resident();
        assert!(
            after < before + (8 << 20),
            "freed pages stay resident: {before} before, {grown} with the burst, {after} after"
        );
        assert_eq!(kept.iter().map(|k| **k).sum::<usize>(), 2_047 * 2_048 / 2);
    }
}
