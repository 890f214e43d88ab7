//! Why an opaque config was refused. Every variant names the field by its path in the config
//! (`sharing.timeSlicing.interval`), so the message on the claim tells the user what to change.

/// A config of ours that cannot be used, with the field at fault and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: unknown field; allowed fields: {allowed}")]
    UnknownField { field: String, allowed: String },
    #[error("{field} is required; allowed: {allowed}")]
    Missing { field: String, allowed: String },
    #[error("{field}: must be {expected}, got {got}")]
    WrongType {
        field: String,
        expected: &'static str,
        got: String,
    },
    #[error("{field}: {value} is not allowed; allowed: {allowed}")]
    InvalidValue {
        field: String,
        value: String,
        allowed: String,
    },
    #[error("{field} is allowed only with sharing.strategy {needs}, but the strategy is {strategy}")]
    NotWithStrategy {
        field: String,
        needs: &'static str,
        strategy: &'static str,
    },
}
