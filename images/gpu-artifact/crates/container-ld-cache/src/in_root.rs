//! Paths inside a container's root, resolved as the container would resolve them: symlinks are
//! followed, an absolute target starts again at the root, and `..` never climbs above it.

use std::path::{Component, Path, PathBuf};

/// Symlinks followed before giving up (the kernel's limit is 40).
const MAX_LINKS: usize = 40;

/// `path` (absolute or relative to `/` of the container) inside `root`. The last component is not
/// required to exist; a loop of links stops resolving and leaves the rest as written.
pub fn in_root(root: &Path, path: &str) -> PathBuf {
    let mut pending: Vec<String> = components(path);
    pending.reverse();
    let mut resolved: Vec<String> = Vec::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match part.as_str() {
            "." | "" => {}
            ".." => {
                resolved.pop();
            }
            _ => {
                let candidate = join(root, &resolved).join(&part);
                match std::fs::read_link(&candidate) {
                    Ok(target) if links < MAX_LINKS => {
                        links += 1;
                        let target = target.to_string_lossy().into_owned();
                        if target.starts_with('/') {
                            resolved.clear();
                        }
                        let mut rest = components(&target);
                        rest.reverse();
                        pending.extend(rest);
                    }
                    _ => resolved.push(part),
                }
            }
        }
    }
    join(root, &resolved)
}

fn components(path: &str) -> Vec<String> {
    Path::new(path)
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

fn join(root: &Path, parts: &[String]) -> PathBuf {
    parts.iter().fold(root.to_path_buf(), |path, part| path.join(part))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_resolve_inside_the_root_never_above_it() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("usr/sbin")).unwrap();
        symlink("usr/sbin", r.join("sbin")).unwrap();
        symlink("/usr/sbin/real", r.join("usr/sbin/ldconfig")).unwrap();
        symlink("../../../../../etc", r.join("usr/escape")).unwrap();
        assert_eq!(in_root(r, "/sbin/ldconfig"), r.join("usr/sbin/real"));
        assert_eq!(in_root(r, "/usr/escape/passwd"), r.join("etc/passwd"));
        assert_eq!(
            in_root(r, "../../etc/ld.so.conf.d/x.conf"),
            r.join("etc/ld.so.conf.d/x.conf")
        );
        symlink("loop", r.join("loop")).unwrap();
        assert!(in_root(r, "/loop/x").starts_with(r));
    }
}
