//! Makes the driver's libraries, mounted into a container by its CDI spec, findable by the
//! container's dynamic linker: the work of the `update-ldcache` createContainer hook (the NVIDIA
//! container toolkit's hook of that name does the same).
//!
//! The hook runs in the container's mount namespace before pivot_root, with the OCI state on its
//! standard input; the container's root is `root.path` of `<bundle>/config.json`. Every path inside
//! that root is resolved as if the root were `/` ([`in_root`]), so a symlink in the image cannot make
//! the hook write outside it. It writes `/etc/ld.so.conf.d/00-gpu-deckhouse-driver.conf` naming the
//! folders (so later `ldconfig` runs in the container keep them) and runs the image's own `ldconfig`
//! with `-r <root>` (it chroots itself) and the folders, which rebuilds `/etc/ld.so.cache` and makes
//! the soname links (`libcuda.so.1`). An image without ldconfig is left alone.

mod in_root;
mod oci_state;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use in_root::in_root;
pub use oci_state::container_root;

/// The conf file the hook owns in the container.
pub const CONF_FILE: &str = "/etc/ld.so.conf.d/00-gpu-deckhouse-driver.conf";

/// Where images keep ldconfig; `.real` first (Ubuntu's `ldconfig` is a shell wrapper around it).
const LDCONFIG: [&str; 4] = [
    "/sbin/ldconfig.real",
    "/usr/sbin/ldconfig.real",
    "/sbin/ldconfig",
    "/usr/sbin/ldconfig",
];

#[derive(Debug, thiserror::Error)]
pub enum LdCacheError {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("OCI state: {0}")]
    State(String),
    #[error("{ldconfig} -r {root}: {status}: {stderr}")]
    Ldconfig {
        ldconfig: PathBuf,
        root: PathBuf,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// What happened, for the hook's one line of output.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Updated { ldconfig: PathBuf },
    NoLdconfig,
}

/// Adds `folders` (container paths) to the container's linker configuration and cache.
pub fn update(root: &Path, folders: &[String]) -> Result<Outcome, LdCacheError> {
    let Some(ldconfig) = LDCONFIG
        .iter()
        .map(|candidate| in_root(root, candidate))
        .find(|path| is_elf(path))
    else {
        return Ok(Outcome::NoLdconfig);
    };
    let conf = in_root(root, CONF_FILE);
    if let Some(dir) = conf.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    let text: String = folders.iter().map(|f| format!("{f}\n")).collect();
    std::fs::write(&conf, text).map_err(io("write", &conf))?;
    let out = Command::new(&ldconfig)
        .arg("-r")
        .arg(root)
        .args(folders)
        .output()
        .map_err(io("run", &ldconfig))?;
    if !out.status.success() {
        return Err(LdCacheError::Ldconfig {
            ldconfig,
            root: root.to_path_buf(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(Outcome::Updated { ldconfig })
}

fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> LdCacheError {
    let path = path.to_path_buf();
    move |source| LdCacheError::Io { action, path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_without_ldconfig_is_left_alone() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(
            update(root.path(), &["/usr/lib/x86_64-linux-gnu".into()]).unwrap(),
            Outcome::NoLdconfig
        );
        assert!(!root.path().join("etc").exists());
    }

    /// The machine's own static ldconfig, copied into an image root, as a Debian image has it.
    #[test]
    fn the_images_ldconfig_caches_the_folder_and_makes_the_soname_link() {
        let system = Path::new("/usr/sbin/ldconfig");
        if !is_elf(system) {
            panic!("this test needs the machine's static /usr/sbin/ldconfig (Debian's libc-bin)");
        }
        let root = tempfile::tempdir().unwrap();
        let sbin = root.path().join("sbin");
        std::fs::create_dir_all(&sbin).unwrap();
        std::fs::copy(system, sbin.join("ldconfig")).unwrap();
        let lib = root.path().join("usr/lib/x86_64-linux-gnu");
        std::fs::create_dir_all(&lib).unwrap();
        // Any shared object with a soname will do: the machine's libc carries `libc.so.6`.
        std::fs::copy("/lib/x86_64-linux-gnu/libc.so.6", lib.join("libc-2.36.so")).unwrap();
        let outcome = update(root.path(), &["/usr/lib/x86_64-linux-gnu".into()]).unwrap();
        assert_eq!(
            outcome,
            Outcome::Updated {
                ldconfig: sbin.join("ldconfig")
            }
        );
        assert_eq!(
            std::fs::read_to_string(root.path().join("etc/ld.so.conf.d/00-gpu-deckhouse-driver.conf")).unwrap(),
            "/usr/lib/x86_64-linux-gnu\n"
        );
        assert_eq!(
            std::fs::read_link(lib.join("libc.so.6")).unwrap(),
            Path::new("libc-2.36.so")
        );
        let cache = std::fs::read(root.path().join("etc/ld.so.cache")).unwrap();
        let needle = b"/usr/lib/x86_64-linux-gnu/libc.so.6";
        assert!(
            cache.windows(needle.len()).any(|w| w == needle),
            "the cache names the library"
        );
    }
}
