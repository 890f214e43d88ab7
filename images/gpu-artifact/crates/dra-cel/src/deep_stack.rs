//! A thread with a large stack for parsing and checking. The `cel` crate's ANTLR parser takes
//! tens of KiB of stack per nesting level (over 100 KiB in debug builds), so an expression
//! nested as deeply as cel-go allows (250 levels) would overflow an ordinary 2 MiB thread and
//! abort the process. Compiling happens once per distinct expression, so a thread per compile
//! is cheap.

use crate::CelError;

/// Enough for 250 levels of parentheses in a debug build (which needs about 48 MiB); only the
/// pages used are committed.
const STACK_BYTES: usize = 96 << 20;

/// Runs `f`, the compilation of `expression`, on a thread with a [`STACK_BYTES`] stack and
/// returns its result; a panic in `f` continues in the caller. A thread the system cannot start
/// fails the compilation.
pub(crate) fn on_deep_stack<T: Send>(
    expression: &str,
    f: impl FnOnce() -> Result<T, CelError> + Send,
) -> Result<T, CelError> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("dra-cel-compile".to_owned())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, f)
            .map_err(|e| CelError::compile(expression, format!("cannot start the compile thread: {e}")))?;
        handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
