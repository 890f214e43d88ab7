//! Reading one sysfs attribute of a PCI device, telling apart the three ways
//! it can fail: the device went away, the file is missing or unreadable, or
//! it holds something the kernel never writes there.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A problem with one device that the scan reports and steps over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanWarning {
    /// The file or link that could not be used.
    pub path: PathBuf,
    pub problem: String,
}

impl fmt::Display for ScanWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

/// Why an attribute gave no value.
pub(crate) enum AttributeError {
    /// The whole device directory is gone: hot-removed while we read it.
    Vanished,
    /// Anything else, with the path and what went wrong.
    Bad(ScanWarning),
}

/// The device directory of one listed device: `sys/bus/pci/devices/<address>`.
pub(crate) struct DeviceDir<'a> {
    pub dir: &'a Path,
}

impl DeviceDir<'_> {
    /// The trimmed text of a required attribute.
    pub fn text(&self, name: &str) -> Result<String, AttributeError> {
        let path = self.dir.join(name);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(text.trim().to_string()),
            Err(e) => Err(self.io_error(path, e)),
        }
    }

    /// The text of an optional attribute: `Ok(None)` when the file is absent
    /// on a device that still exists.
    pub fn optional_text(&self, name: &str) -> Result<Option<String>, AttributeError> {
        match self.text(name) {
            Ok(text) => Ok(Some(text)),
            Err(AttributeError::Bad(warning)) if !warning.path.exists() && self.dir.exists() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A hex attribute written as `0x%04x` or `0x%06x`, at most `max` in value.
    pub fn hex(&self, name: &str, max: u32) -> Result<u32, AttributeError> {
        let text = self.text(name)?;
        parse_hex(&text, max).ok_or_else(|| self.garbage(name, &text, "a hex number"))
    }

    /// The last path component of a link such as `driver -> ../../../bus/pci/drivers/nvidia`,
    /// `Ok(None)` when there is no link.
    pub fn link_name(&self, name: &str) -> Result<Option<String>, AttributeError> {
        let path = self.dir.join(name);
        match fs::read_link(&path) {
            Ok(target) => match target.file_name().and_then(|n| n.to_str()) {
                Some(last) => Ok(Some(last.to_string())),
                None => Err(self.garbage(name, &target.display().to_string(), "a link ending in a name")),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.dir.exists() => Ok(None),
            Err(e) => Err(self.io_error(path, e)),
        }
    }

    pub fn garbage(&self, name: &str, value: &str, expected: &str) -> AttributeError {
        AttributeError::Bad(ScanWarning {
            path: self.dir.join(name),
            problem: format!("holds {value:?}, expected {expected}"),
        })
    }

    fn io_error(&self, path: PathBuf, error: io::Error) -> AttributeError {
        if error.kind() == io::ErrorKind::NotFound && !self.dir.exists() {
            return AttributeError::Vanished;
        }
        let problem = if error.kind() == io::ErrorKind::NotFound {
            "missing".to_string()
        } else {
            format!("unreadable: {error}")
        };
        AttributeError::Bad(ScanWarning { path, problem })
    }
}

/// `0x10de` -> 0x10de; the `0x` prefix is what the kernel writes, but plain hex is accepted.
pub(crate) fn parse_hex(text: &str, max: u32) -> Option<u32> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok().filter(|value| *value <= max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_attributes_accept_the_kernel_form_and_reject_junk() {
        assert_eq!(parse_hex("0x10de", 0xffff), Some(0x10de));
        assert_eq!(parse_hex("0x030200", 0xff_ffff), Some(0x030200));
        assert_eq!(parse_hex("10de", 0xffff), Some(0x10de));
        assert_eq!(parse_hex("0x1234567", 0xffff), None, "too large for a vendor id");
        assert_eq!(parse_hex("0x", 0xffff), None);
        assert_eq!(parse_hex("banana", 0xffff), None);
        assert_eq!(parse_hex("-1", 0xffff), None);
    }
}
