//! The fixture host's own glibc: a loader and a libc that are not the images'. On a real host the
//! driver root's `libc.so.6` comes from the distribution's glibc build, which is not the one of the
//! module's images, and a loader and a libc of two builds refuse each other: libc imports its loader's
//! private interface (`GLIBC_PRIVATE` symbols such as `_rtld_global`), which another build does not
//! define the same way. The test bed's images and the machine share one glibc build, which would let
//! any mix load; so the fixture makes a build of its own from the machine's: the loader and libc with
//! the private symbol `_rtld_global` renamed in both to `_rtld_globbK` (same length, same GNU hash: the
//! last two characters moved by +1 and -33, so each file's hash table still finds it). The pair loads
//! together; the images' loader with this libc fails with `undefined symbol: _rtld_globbK, version
//! GLIBC_PRIVATE`, as a real host's libc under a foreign loader fails. In the `usr` tree laid over the
//! machine's `/usr`, every process of the node (merged /usr: `/lib64/ld-linux-x86-64.so.2` leads there)
//! runs on this pair, and a container that reaches the driver root's libc with its own loader fails.

use std::fs;
use std::path::Path;

use anyhow::{Context, bail};

/// The machine's glibc, as Debian installs it.
const MACHINE_LIBS: &str = "/lib/x86_64-linux-gnu";
/// Where the host keeps them, relative to its root.
const HOST_LIBS: &str = "usr/lib/x86_64-linux-gnu";
const LOADER: &str = "ld-linux-x86-64.so.2";
const LIBC: &str = "libc.so.6";

/// The private symbol and its name in the fixture's build.
const PRIVATE: &[u8] = b"_rtld_global\0";
const RENAMED: &[u8] = b"_rtld_globbK\0";

/// Writes the fixture's glibc build (loader and libc) into `root`'s `usr/lib/x86_64-linux-gnu`.
pub fn install_host_glibc(root: &Path) -> anyhow::Result<()> {
    let dir = root.join(HOST_LIBS);
    fs::create_dir_all(&dir)?;
    for name in [LOADER, LIBC] {
        let from = Path::new(MACHINE_LIBS).join(name);
        let bytes = fs::read(&from).with_context(|| format!("read {}", from.display()))?;
        let patched = renamed(&bytes).with_context(|| format!("{}", from.display()))?;
        let to = dir.join(name);
        fs::write(&to, patched).with_context(|| format!("write {}", to.display()))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&to, fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// `bytes` with the one NUL-terminated `_rtld_global` of its dynamic string table renamed (in libc it
/// is also the tail of `_thread_db___nptl_rtld_global`, which the same hash rule keeps findable).
pub fn renamed(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    let found: Vec<usize> = bytes
        .windows(PRIVATE.len())
        .enumerate()
        .filter(|(_, window)| *window == PRIVATE)
        .map(|(at, _)| at)
        .collect();
    let [at] = found[..] else {
        bail!(
            "expected one _rtld_global in the dynamic strings, found {}",
            found.len()
        );
    };
    let mut out = bytes.to_vec();
    out.splice(at..at + RENAMED.len(), RENAMED.iter().copied());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GNU hash (the ELF `DT_GNU_HASH` function) of a symbol name.
    fn gnu_hash(name: &[u8]) -> u32 {
        name.iter()
            .fold(5381u32, |h, c| h.wrapping_mul(33).wrapping_add(u32::from(*c)))
    }

    #[test]
    fn the_renamed_symbol_keeps_its_gnu_hash() {
        let strip = |s: &[u8]| s[..s.len() - 1].to_vec();
        assert_eq!(gnu_hash(&strip(PRIVATE)), gnu_hash(&strip(RENAMED)));
        let mut tail = b"_thread_db___nptl".to_vec();
        tail.extend(strip(PRIVATE));
        let mut renamed_tail = b"_thread_db___nptl".to_vec();
        renamed_tail.extend(strip(RENAMED));
        assert_eq!(gnu_hash(&tail), gnu_hash(&renamed_tail));
    }

    #[test]
    fn exactly_one_occurrence_is_renamed() {
        let bytes = b"\0_rtld_global_ro\0_rtld_global\0x".to_vec();
        assert_eq!(renamed(&bytes).unwrap(), b"\0_rtld_global_ro\0_rtld_globbK\0x".to_vec());
        assert!(renamed(b"\0_rtld_global\0_rtld_global\0").is_err());
    }
}
