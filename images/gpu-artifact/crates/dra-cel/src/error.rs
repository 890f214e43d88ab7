//! Errors of the CEL environment. Each carries the expression and the CEL engine's own text,
//! because that text is what a user needs to fix a class or claim, and the controller copies it
//! into an Event.

/// A selector that could not be compiled or evaluated, or a device that cannot be presented to
/// a selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    #[error("CEL compile error in {expression:?}: {message}")]
    Compile { expression: String, message: String },
    #[error("CEL runtime error in {expression:?}: {message}")]
    Runtime { expression: String, message: String },
    #[error("device cannot be evaluated: {message}")]
    Device { message: String },
}

impl CelError {
    pub(crate) fn compile(expression: &str, message: String) -> CelError {
        CelError::Compile {
            expression: expression.to_owned(),
            message,
        }
    }

    pub(crate) fn runtime(expression: &str, message: String) -> CelError {
        CelError::Runtime {
            expression: expression.to_owned(),
            message,
        }
    }

    pub(crate) fn device(message: String) -> CelError {
        CelError::Device { message }
    }
}
