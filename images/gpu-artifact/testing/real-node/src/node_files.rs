//! The real node's files, read from the machine exactly as the node sees them.
//!
//! `/proc/<pid>/root/<path>` is not that view: the kernel resolves an absolute symlink met on the
//! walk (Debian's `/var/run -> /run`) from the caller's root, so such a path quietly reads the
//! machine's own `/run`. Every path here is opened with `openat2(RESOLVE_IN_ROOT)` below an fd of the
//! node's root, so symlinks resolve inside the node, `..` stops at its root and no magic link of
//! `/proc` leads out. A file or directory that is missing is an error naming the node's path; no read
//! falls back to empty.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use anyhow::Context;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// The node's filesystem view, rooted at a directory of the machine (`/proc/<pid>/root` for a node,
/// any directory in tests).
#[derive(Clone, Debug)]
pub struct NodeFiles {
    root: PathBuf,
}

impl NodeFiles {
    /// The view of the process `pid` (the node's init): its mount namespace's root.
    pub fn of_process(pid: u32) -> Self {
        Self::rooted_at(PathBuf::from(format!("/proc/{pid}/root")))
    }

    pub fn rooted_at(root: PathBuf) -> Self {
        Self { root }
    }

    /// Opens `path` (absolute, as the node names it) with symlinks resolved inside the node.
    fn open(&self, path: &str, flags: OFlags) -> anyhow::Result<OwnedFd> {
        let root = rustix::fs::open(
            &self.root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("open the node's root {}", self.root.display()))?;
        let resolve = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
        rustix::fs::openat2(&root, path, flags | OFlags::CLOEXEC, Mode::empty(), resolve)
            .with_context(|| format!("the node's {path}"))
    }

    pub fn read(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let mut file = std::fs::File::from(self.open(path, OFlags::RDONLY)?);
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .with_context(|| format!("read the node's {path}"))?;
        Ok(bytes)
    }

    pub fn read_to_string(&self, path: &str) -> anyhow::Result<String> {
        String::from_utf8(self.read(path)?).with_context(|| format!("the node's {path} is not UTF-8"))
    }

    /// The names in directory `path`, sorted; an error when the directory is missing.
    pub fn list(&self, path: &str) -> anyhow::Result<Vec<String>> {
        let dir = self.open(path, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::new(dir).with_context(|| format!("list the node's {path}"))? {
            let entry = entry.with_context(|| format!("list the node's {path}"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// What kind of file `path` is; `None` when it does not exist (any other failure is an error).
    pub fn file_type(&self, path: &str) -> anyhow::Result<Option<FileType>> {
        match self.open(path, OFlags::PATH) {
            Ok(fd) => Ok(Some(FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode))),
            Err(error) if not_found(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Removes the file `path` (what an admin or a fault would do by hand on the node).
    pub fn remove(&self, path: &str) -> anyhow::Result<()> {
        let (parent, name) = path
            .rsplit_once('/')
            .with_context(|| format!("{path} is not an absolute path"))?;
        let parent = self.open(
            if parent.is_empty() { "/" } else { parent },
            OFlags::PATH | OFlags::DIRECTORY,
        )?;
        rustix::fs::unlinkat(&parent, name, AtFlags::empty()).with_context(|| format!("remove the node's {path}"))
    }
}

fn not_found(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<rustix::io::Errno>()
        .is_some_and(|e| *e == rustix::io::Errno::NOENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A node root whose `/var/run` is an absolute symlink, as on Debian, and a decoy at the same
    /// absolute path on the machine: the view reads the node's directory, a plain join the decoy.
    struct Decoyed {
        _machine: tempfile::TempDir,
        _node: tempfile::TempDir,
        files: NodeFiles,
        naive: PathBuf,
    }

    fn decoyed() -> Decoyed {
        let machine = tempfile::tempdir().unwrap();
        let run = machine.path().join("run");
        std::fs::create_dir_all(run.join("cdi")).unwrap();
        std::fs::write(run.join("cdi/decoy.json"), "{}").unwrap();
        let node = tempfile::tempdir().unwrap();
        let inside_run = node.path().join(run.strip_prefix("/").unwrap());
        std::fs::create_dir_all(inside_run.join("cdi")).unwrap();
        std::fs::write(inside_run.join("cdi/claim_a.json"), "{\"node\":true}").unwrap();
        std::fs::create_dir_all(node.path().join("var")).unwrap();
        symlink(&run, node.path().join("var/run")).unwrap();
        let files = NodeFiles::rooted_at(node.path().to_owned());
        let naive = node.path().join("var/run/cdi");
        Decoyed {
            _machine: machine,
            _node: node,
            files,
            naive,
        }
    }

    #[test]
    fn absolute_symlinks_resolve_inside_the_node_not_on_the_machine() {
        let bed = decoyed();
        let plain: Vec<String> = std::fs::read_dir(&bed.naive)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            plain,
            ["decoy.json"],
            "a plain join follows the symlink out to the machine"
        );
        assert_eq!(bed.files.list("/var/run/cdi").unwrap(), ["claim_a.json"]);
        assert_eq!(
            bed.files.read_to_string("/var/run/cdi/claim_a.json").unwrap(),
            "{\"node\":true}"
        );
    }

    #[test]
    fn missing_paths_are_errors_naming_the_node_path() {
        let bed = decoyed();
        let error = bed.files.list("/var/run/missing").unwrap_err();
        assert!(
            format!("{error:#}").contains("the node's /var/run/missing"),
            "{error:#}"
        );
        assert!(bed.files.read("/etc/none").is_err());
        assert_eq!(bed.files.file_type("/var/run/missing").unwrap(), None);
        assert_eq!(bed.files.file_type("/var/run/cdi").unwrap(), Some(FileType::Directory));
    }

    #[test]
    fn dot_dot_and_removal_stay_inside() {
        let bed = decoyed();
        assert_eq!(bed.files.list("/../../var/run/cdi").unwrap(), ["claim_a.json"]);
        bed.files.remove("/var/run/cdi/claim_a.json").unwrap();
        assert!(bed.files.list("/var/run/cdi").unwrap().is_empty());
        assert!(
            bed.naive.join("decoy.json").exists(),
            "the machine's decoy is untouched"
        );
    }
}
