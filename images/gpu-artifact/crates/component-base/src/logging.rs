//! Structured logging configured from the `LOG_LEVEL` environment variable.

use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// The verbosity an admin sets through the module config (`logLevel`), passed as `LOG_LEVEL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("LOG_LEVEL {value:?} is not one of Error, Warn, Info, Debug, Trace (case-insensitive)")]
pub struct LogLevelError {
    pub value: String,
}

impl FromStr for LogLevel {
    type Err = LogLevelError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "error" => Ok(Self::Error),
            "warn" | "warning" => Ok(Self::Warn),
            "info" | "" => Ok(Self::Info),
            "debug" => Ok(Self::Debug),
            "trace" => Ok(Self::Trace),
            _ => Err(LogLevelError {
                value: value.to_owned(),
            }),
        }
    }
}

impl LogLevel {
    /// Reads `LOG_LEVEL`; unset means `Info`.
    pub fn from_env() -> Result<Self, LogLevelError> {
        std::env::var("LOG_LEVEL").unwrap_or_default().parse()
    }

    /// The filter at this level. Transport crates stay at `warn` below Trace, so a Debug log shows
    /// our decisions, not every HTTP frame of the Kubernetes client.
    pub fn filter_directive(self) -> String {
        let ours = match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
            Self::Debug => "debug",
            Self::Trace => return "trace".to_owned(),
        };
        let quiet = if self == Self::Error { "error" } else { "warn" };
        let mut directive = ours.to_owned();
        for noisy in NOISY_DEPENDENCIES {
            directive.push_str(&format!(",{noisy}={quiet}"));
        }
        directive
    }
}

const NOISY_DEPENDENCIES: [&str; 8] = [
    "kube_client",
    "kube_runtime",
    "hyper",
    "hyper_util",
    "h2",
    "tower",
    "rustls",
    "tonic",
];

/// Installs the global JSON subscriber. A bad `LOG_LEVEL` is an error the binary reports and exits
/// on: a typo in the module config must not silently mean "Info".
pub fn init_logging() -> Result<LogLevel, LogLevelError> {
    let level = LogLevel::from_env()?;
    let filter = EnvFilter::new(level.filter_directive());
    // A second call (tests start several components in one process) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .with_env_filter(filter)
        .try_init();
    Ok(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_deckhouse_spellings_case_insensitively() {
        assert_eq!("Info".parse(), Ok(LogLevel::Info));
        assert_eq!("DEBUG".parse(), Ok(LogLevel::Debug));
        assert_eq!("warning".parse(), Ok(LogLevel::Warn));
        assert_eq!("".parse(), Ok(LogLevel::Info));
    }

    #[test]
    fn rejects_unknown_level_naming_the_value() {
        let err = "verbose".parse::<LogLevel>().unwrap_err();
        assert!(err.to_string().contains("\"verbose\""), "{err}");
    }

    #[test]
    fn filter_keeps_dependencies_quiet_below_trace() {
        let directive = LogLevel::Debug.filter_directive();
        assert!(EnvFilter::try_new(&directive).is_ok(), "{directive}");
        assert!(directive.starts_with("debug,"), "{directive}");
        assert!(directive.contains("hyper=warn"), "{directive}");
        assert_eq!(LogLevel::Trace.filter_directive(), "trace");
        assert!(!LogLevel::Error.filter_directive().contains("=warn"));
    }
}
