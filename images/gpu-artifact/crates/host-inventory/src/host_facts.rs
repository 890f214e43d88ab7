//! The node facts `status.nodeInfo` and the node labels carry: OS from
//! os-release, kernel release, bare metal. A fact whose source is missing is
//! `None`, never a guess.

use std::fs;
use std::io;

use crate::bare_metal::detect_bare_metal;
use crate::host_root::HostRoot;

/// os-release(5): `/etc/os-release`, falling back to `/usr/lib/os-release`.
pub const OS_RELEASE_PATHS: [&str; 2] = ["etc/os-release", "usr/lib/os-release"];
/// What `uname -r` prints, readable without calling uname on the host.
pub const KERNEL_RELEASE: &str = "proc/sys/kernel/osrelease";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// os-release `ID`, e.g. `ubuntu`.
    pub os_id: Option<String>,
    /// os-release `VERSION_ID`, e.g. `22.04`.
    pub os_version: Option<String>,
    /// os-release `NAME`, e.g. `Ubuntu`.
    pub os_name: Option<String>,
    /// e.g. `5.15.0-105-generic`.
    pub kernel_release: Option<String>,
    pub bare_metal: bool,
    pub bare_metal_reason: String,
}

/// Reads the facts under `root`.
pub fn read_host_facts(root: &HostRoot) -> HostFacts {
    let os = read_os_release(root);
    let field = |key: &str| os.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let verdict = detect_bare_metal(root);
    HostFacts {
        os_id: field("ID"),
        os_version: field("VERSION_ID"),
        os_name: field("NAME"),
        kernel_release: read_trimmed(root, KERNEL_RELEASE),
        bare_metal: verdict.bare_metal,
        bare_metal_reason: verdict.reason,
    }
}

fn read_os_release(root: &HostRoot) -> Vec<(String, String)> {
    for rel in OS_RELEASE_PATHS {
        match fs::read_to_string(root.path(rel)) {
            Ok(text) => return parse_os_release(&text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(_) => return Vec::new(),
        }
    }
    Vec::new()
}

fn read_trimmed(root: &HostRoot, rel: &str) -> Option<String> {
    let text = fs::read_to_string(root.path(rel)).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Parses os-release's shell-like assignments: `KEY=value`, `KEY="value"` or
/// `KEY='value'`, with `\"`, `\\`, `\$` and `` \` `` escapes in double
/// quotes. Comments, blank lines and malformed lines are skipped; empty
/// values are dropped.
pub fn parse_os_release(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let (key, raw) = line.split_once('=')?;
            let valid_key = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            let value = unquote(raw)?;
            (valid_key && !value.is_empty()).then(|| (key.to_string(), value))
        })
        .collect()
}

fn unquote(raw: &str) -> Option<String> {
    if let Some(inner) = raw.strip_prefix('\'') {
        return inner.strip_suffix('\'').map(str::to_string);
    }
    let Some(inner) = raw.strip_prefix('"') else {
        return Some(raw.to_string());
    };
    let inner = inner.strip_suffix('"')?;
    let mut value = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('"' | '\\' | '$' | '`'))) => {
                value.push(next);
                chars.next();
            }
            _ => value.push(c),
        }
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_unquoted_and_escaped_values() {
        let text = "# comment\nNAME=\"Red Hat Enterprise Linux\"\nID=rhel\nVERSION_ID='9.4'\n\
                    PRETTY_NAME=\"say \\\"hi\\\" \\$HOME\"\nEMPTY=\"\"\nbroken line\nBAD-KEY=x\nOPEN=\"unterminated\n";
        let parsed = parse_os_release(text);
        let get = |key: &str| parsed.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        assert_eq!(get("NAME"), Some("Red Hat Enterprise Linux"));
        assert_eq!(get("ID"), Some("rhel"));
        assert_eq!(get("VERSION_ID"), Some("9.4"));
        assert_eq!(get("PRETTY_NAME"), Some("say \"hi\" $HOME"));
        assert_eq!(get("EMPTY"), None);
        assert_eq!(get("BAD-KEY"), None);
        assert_eq!(get("OPEN"), None);
        assert_eq!(parsed.len(), 4);
    }
}
