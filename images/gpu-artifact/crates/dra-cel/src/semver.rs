//! Semantic versions as the Kubernetes CEL `semver` library and `version` device attributes use
//! them: strict `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`, ordered by semver 2.0 precedence
//! (build metadata ignored).

use std::cmp::Ordering;

/// A parsed semantic version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<PreIdentifier>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum PreIdentifier {
    // Numeric identifiers sort before alphanumeric ones; the derive keeps that order.
    Numeric(u64),
    Alpha(String),
}

/// Why a version string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid semantic version {input:?}")]
pub struct SemverError {
    input: String,
}

fn parse_number(part: &str) -> Option<u64> {
    if part.is_empty() || (part.len() > 1 && part.starts_with('0')) || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

impl Semver {
    /// Strict parsing, as `semver.Parse` of blang/semver (used by the API server and the scheduler).
    pub fn parse(input: &str) -> Result<Semver, SemverError> {
        Self::parse_inner(input).ok_or_else(|| SemverError {
            input: input.to_owned(),
        })
    }

    /// The lenient form of `semver(s, true)`: a leading `v` is dropped and missing minor or
    /// patch numbers count as zero.
    pub fn parse_normalized(input: &str) -> Result<Semver, SemverError> {
        let trimmed = input.strip_prefix('v').unwrap_or(input);
        let core_end = trimmed.find(['-', '+']).unwrap_or(trimmed.len());
        let (core, rest) = trimmed.split_at(core_end);
        let mut parts: Vec<String> = core
            .split('.')
            .map(|p| {
                let stripped = p.trim_start_matches('0');
                if stripped.is_empty() {
                    "0".to_owned()
                } else {
                    stripped.to_owned()
                }
            })
            .collect();
        while parts.len() < 3 {
            parts.push("0".to_owned());
        }
        Self::parse(&format!("{}{rest}", parts.join("."))).map_err(|_| SemverError {
            input: input.to_owned(),
        })
    }

    fn parse_inner(input: &str) -> Option<Semver> {
        let without_build = match input.split_once('+') {
            Some((head, build)) => {
                if build.is_empty()
                    || build
                        .split('.')
                        .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
                {
                    return None;
                }
                head
            }
            None => input,
        };
        let (core, pre) = match without_build.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (without_build, None),
        };
        let mut numbers = core.split('.');
        let major = parse_number(numbers.next()?)?;
        let minor = parse_number(numbers.next()?)?;
        let patch = parse_number(numbers.next()?)?;
        if numbers.next().is_some() {
            return None;
        }
        let mut identifiers = Vec::new();
        if let Some(pre) = pre {
            for part in pre.split('.') {
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    return None;
                }
                if part.bytes().all(|b| b.is_ascii_digit()) {
                    identifiers.push(PreIdentifier::Numeric(parse_number(part)?));
                } else {
                    identifiers.push(PreIdentifier::Alpha(part.to_owned()));
                }
            }
        }
        Some(Semver {
            major,
            minor,
            patch,
            pre: identifiers,
        })
    }

    pub fn major(&self) -> u64 {
        self.major
    }

    pub fn minor(&self) -> u64 {
        self.minor
    }

    pub fn patch(&self) -> u64 {
        self.patch
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                // A release sorts after its pre-releases.
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).unwrap()
    }

    #[test]
    fn precedence_follows_semver_2() {
        assert!(v("1.0.0-alpha") < v("1.0.0-alpha.1"));
        assert!(v("1.0.0-alpha.1") < v("1.0.0-beta"));
        assert!(v("1.0.0-rc.1") < v("1.0.0"));
        assert!(v("580.65.6") > v("550.0.0"));
        assert_eq!(v("1.2.3+build.5").cmp(&v("1.2.3")), Ordering::Equal);
    }

    #[test]
    fn strict_parsing_rejects_what_blang_semver_rejects() {
        for bad in ["1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3.4", ""] {
            assert!(Semver::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(Semver::parse_normalized("v1.2").unwrap(), v("1.2.0"));
    }
}
