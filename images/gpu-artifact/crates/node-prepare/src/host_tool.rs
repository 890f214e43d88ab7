//! Running the driver's command-line tools (`nvidia-smi`,
//! `nvidia-cuda-mps-control`): with a time limit, and with an error that
//! names the command line and what the tool said.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::PrepareError;

/// One run of a tool.
pub(crate) struct ToolRun<'a> {
    pub program: &'a Path,
    pub args: Vec<String>,
    pub env: Vec<(&'static str, String)>,
    /// Written to the tool's standard input, which is then closed.
    pub stdin: Option<&'static str>,
    /// The tool leaves a daemon behind: its output is not captured, because
    /// a daemon that keeps the pipe open would make the wait endless.
    pub starts_daemon: bool,
}

impl ToolRun<'_> {
    /// `<program> <args...>`, as the error messages show it.
    pub fn command_line(&self) -> String {
        let mut line = self.program.display().to_string();
        for arg in &self.args {
            line.push(' ');
            line.push_str(arg);
        }
        line
    }

    /// Runs the tool to its end; an error when it cannot start, fails or
    /// outlives `timeout` (it is then killed).
    pub fn run(&self, timeout: Duration) -> Result<(), PrepareError> {
        let failed = |reason: String| PrepareError::Tool {
            command: self.command_line(),
            reason,
        };
        let mut child = Command::new(self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(key, value)| (*key, value.as_str())))
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(if self.starts_daemon {
                Stdio::null()
            } else {
                Stdio::piped()
            })
            .spawn()
            .map_err(|e| failed(format!("cannot start it: {e}")))?;
        if let (Some(input), Some(mut pipe)) = (self.stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes())
                .map_err(|e| failed(format!("cannot write to its input: {e}")))?;
        }
        let status = wait(&mut child, timeout).map_err(failed)?;
        if status.success() {
            return Ok(());
        }
        let mut said = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut said);
        }
        let said = said.trim();
        Err(failed(if said.is_empty() {
            format!("it failed ({status})")
        } else {
            format!("it failed ({status}): {said}")
        }))
    }
}

fn wait(child: &mut Child, timeout: Duration) -> Result<ExitStatus, String> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it did not finish within {timeout:?} and was killed"));
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> ToolRun<'static> {
        ToolRun {
            program: Path::new("/bin/sh"),
            args: vec!["-c".into(), script.into()],
            env: vec![("GREETING", "hello".into())],
            stdin: None,
            starts_daemon: false,
        }
    }

    #[test]
    fn a_failing_tool_is_an_error_with_its_command_line_and_its_words() {
        let error = shell("echo \"$GREETING: no such GPU\" >&2; exit 3").run(Duration::from_secs(5));
        assert_eq!(
            error.unwrap_err().to_string(),
            "/bin/sh -c echo \"$GREETING: no such GPU\" >&2; exit 3: it failed (exit status: 3): hello: no such GPU"
        );
        shell("exit 0").run(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn input_reaches_the_tool_and_a_hung_tool_is_killed() {
        let mut reads = shell("read line; [ \"$line\" = quit ]");
        reads.stdin = Some("quit\n");
        reads.run(Duration::from_secs(5)).unwrap();
        let error = shell("sleep 5").run(Duration::from_millis(50)).unwrap_err().to_string();
        assert!(
            error.ends_with("it did not finish within 50ms and was killed"),
            "{error}"
        );
        let error = ToolRun {
            program: Path::new("/nonexistent/nvidia-smi"),
            ..shell("")
        }
        .run(Duration::from_secs(1))
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("/nonexistent/nvidia-smi -c : cannot start it"),
            "{error}"
        );
    }
}
