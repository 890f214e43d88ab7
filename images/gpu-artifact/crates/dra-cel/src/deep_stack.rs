//! A thread with a large stack for parsing, checking and evaluating. The `cel` crate's ANTLR
//! parser takes tens of KiB of stack per nesting level (over 100 KiB in debug builds), and its
//! interpreter recurses per node too, so an expression nested as deeply as cel-go allows (250
//! levels) would overflow an ordinary 2 MiB thread and abort the process.
//!
//! A long-lived caller (the allocation engine's thread) starts itself with [`spawn_deep_stack`]:
//! compiling and evaluating then run inline on that one large stack. Anywhere else, a compile
//! gets a scoped thread of its own (once per distinct expression, so cheap).

use std::cell::Cell;

use crate::CelError;

/// Enough for 250 levels of parentheses in a debug build (which needs about 48 MiB); only the
/// pages used are committed.
pub const STACK_BYTES: usize = 96 << 20;

thread_local! {
    static ON_DEEP_STACK: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread was started by [`spawn_deep_stack`] (or is a compile thread).
pub fn on_deep_stack_thread() -> bool {
    ON_DEEP_STACK.with(Cell::get)
}

/// Starts a named thread with a [`STACK_BYTES`] stack on which selectors compile and evaluate
/// inline.
pub fn spawn_deep_stack<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            ON_DEEP_STACK.with(|flag| flag.set(true));
            f()
        })
}

/// Runs `f`, the compilation or evaluation of `expression`, on a large stack: inline when the
/// current thread has one, else on a scoped thread with [`STACK_BYTES`]; a panic in `f` continues
/// in the caller. A thread the system cannot start fails it.
pub(crate) fn on_deep_stack<T: Send>(
    expression: &str,
    f: impl FnOnce() -> Result<T, CelError> + Send,
) -> Result<T, CelError> {
    if on_deep_stack_thread() {
        return f();
    }
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("dra-cel-compile".to_owned())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || {
                ON_DEEP_STACK.with(|flag| flag.set(true));
                f()
            })
            .map_err(|e| CelError::compile(expression, format!("cannot start the compile thread: {e}")))?;
        handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deep_stack_thread_runs_work_inline() {
        let inline = spawn_deep_stack("test-deep", || {
            on_deep_stack("x", || Ok(std::thread::current().name().map(str::to_owned)))
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
        assert_eq!(inline.as_deref(), Some("test-deep"));
        let elsewhere = on_deep_stack("x", || Ok(std::thread::current().name().map(str::to_owned))).unwrap();
        assert_eq!(elsewhere.as_deref(), Some("dra-cel-compile"));
        assert!(!on_deep_stack_thread());
    }
}
