//! What a process of the node maps, as that process sees its own files: its `/proc/<pid>/maps` read
//! by a reader in the process's own mount namespace and root, because the kernel shows each mapped
//! file's path relative to the reader's root. gpu-handler's `/driver-root/...` shows as such only to a
//! reader in its container, and a tool gpu-handler runs in a chroot shows its files as its chroot has
//! them. Also the mapped files' contents (`/proc/<pid>/map_files`), to tell which glibc build a
//! process runs on whatever its paths say.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;

use anyhow::Context;

/// `real-node-host maps <pid>`: prints the process's maps as the process sees them. The caller must be
/// single-threaded (a mount namespace cannot be entered by one thread of many).
pub fn print_maps(pid: u32) -> anyhow::Result<()> {
    let mut maps = File::open(format!("/proc/{pid}/maps")).context("open the process's maps")?;
    let namespace = File::open(format!("/proc/{pid}/ns/mnt")).context("open the process's mount namespace")?;
    let root = File::open(format!("/proc/{pid}/root")).context("open the process's root")?;
    rustix::thread::move_into_link_name_space(namespace.as_fd(), Some(rustix::thread::LinkNameSpaceType::Mount))
        .context("enter the process's mount namespace")?;
    rustix::process::fchdir(&root).context("enter the process's root")?;
    std::os::unix::fs::chroot(".").context("take the process's root as this one's")?;
    let mut text = String::new();
    maps.read_to_string(&mut text).context("read the maps")?;
    print!("{text}");
    Ok(())
}

/// One mapped file of a maps text: the address range (`/proc/<pid>/map_files/<range>`) and the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    pub range: String,
    pub path: String,
}

/// The file mappings of a maps text, one per line that names an absolute path.
pub fn mapped_files(maps: &str) -> Vec<MappedFile> {
    maps.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.splitn(6, ' ').collect();
            let path = fields.get(5)?.trim();
            path.starts_with('/').then(|| MappedFile {
                range: fields.first().copied().unwrap_or_default().to_owned(),
                path: path.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_mappings_are_read_with_their_ranges() {
        let maps = "5600-5601 r--p 00000000 00:2f 123  /app/gpu-handler\n\
                    7f00-7f10 r-xp 00001000 00:30 456                        /driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.76.05\n\
                    7ffd-7ffe rw-p 00000000 00:00 0                          [stack]\n";
        assert_eq!(
            mapped_files(maps),
            [
                MappedFile {
                    range: "5600-5601".into(),
                    path: "/app/gpu-handler".into()
                },
                MappedFile {
                    range: "7f00-7f10".into(),
                    path: "/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.76.05".into()
                },
            ]
        );
    }
}
