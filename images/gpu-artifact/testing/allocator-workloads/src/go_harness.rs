//! Runs the Go allocator harness (tools/allocator-harness) at one release of
//! k8s.io/dynamic-resource-allocation, building it first when missing: one JSON request per line
//! in, one JSON answer per line out, all requests written before the answers are read.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The harness binary for `version` (0.34.4 or 0.37.2), built by tools/allocator-harness/build.sh.
pub fn harness_binary(version: &str) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../../tools/allocator-harness/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(version)
        .stderr(Stdio::inherit())
        .output()
        .expect("run build.sh");
    assert!(
        out.status.success(),
        "building the Go allocator harness {version} failed"
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8 path");
    PathBuf::from(stdout.lines().last().expect("build.sh prints the binary path").trim())
}

/// One Go allocator release, with the environment its process gets.
pub struct GoHarness {
    pub version: String,
    pub env: Vec<(String, String)>,
}

impl GoHarness {
    pub fn new(version: &str) -> GoHarness {
        GoHarness {
            version: version.to_owned(),
            env: Vec::new(),
        }
    }

    /// Sends every request to one Go process and returns one answer per request, in order.
    pub fn run(&self, requests: &[Value]) -> Vec<Value> {
        let lines: Vec<String> = requests
            .iter()
            .map(|r| serde_json::to_string(r).expect("request serialises"))
            .collect();
        self.run_lines(&lines)
    }

    /// As `run`, for requests already serialised (one JSON object each, no newline): callers with
    /// many large requests keep them as text, which takes a fraction of a `Value`'s memory.
    pub fn run_lines(&self, requests: &[String]) -> Vec<Value> {
        let mut child = Command::new(harness_binary(&self.version))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the Go allocator harness");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut input = Vec::with_capacity(requests.iter().map(|r| r.len() + 1).sum());
        for request in requests {
            input.extend_from_slice(request.as_bytes());
            input.push(b'\n');
        }
        let writer = std::thread::spawn(move || stdin.write_all(&input).expect("write requests"));
        let output = child.wait_with_output().expect("harness output");
        writer.join().expect("writer thread");
        assert!(output.status.success(), "the Go allocator harness failed");
        let answers: Vec<Value> = serde_json::Deserializer::from_slice(&output.stdout)
            .into_iter::<Value>()
            .map(|v| v.expect("answer is JSON"))
            .collect();
        assert_eq!(answers.len(), requests.len(), "one answer per request");
        answers
    }
}
