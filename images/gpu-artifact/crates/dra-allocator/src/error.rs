//! What can go wrong when allocating, each with the object and the reason a human needs.

use dra_cel::CelError;

/// Why a claim could not be handled at all. "Nothing fits" is not an error: `allocate` returns
/// `Ok(None)` and `Allocator::explain` says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    #[error("claim {claim}, request {request}: device class {class} does not exist")]
    UnknownClass {
        claim: String,
        request: String,
        class: String,
    },
    #[error("claim {claim}: class {class}: selector #{index}: {source}")]
    ClassSelector {
        claim: String,
        class: String,
        index: usize,
        source: CelError,
    },
    #[error("claim {claim}, request {request}: selector #{index}: {source}")]
    ClaimSelector {
        claim: String,
        request: String,
        index: usize,
        source: CelError,
    },
    #[error("claim {claim}: {reason}")]
    InvalidClaim { claim: String, reason: String },
    #[error("claim {claim} is already allocated")]
    AlreadyAllocated { claim: String },
}

impl AllocationError {
    /// The CEL engine's own text, when the error comes from a selector (for the claim's Event).
    pub fn cel_error(&self) -> Option<&CelError> {
        match self {
            AllocationError::ClassSelector { source, .. } | AllocationError::ClaimSelector { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}
