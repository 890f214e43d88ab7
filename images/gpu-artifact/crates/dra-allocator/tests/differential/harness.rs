//! Runs the Go allocator harness (tools/allocator-harness), building it first when missing.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

fn binary(version: &str) -> PathBuf {
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

/// Sends every case to one Go process and returns one answer per case, in order.
pub fn run(version: &str, cases: &[Value]) -> Vec<Value> {
    let mut child = Command::new(binary(version))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the Go allocator harness");
    let mut stdin = child.stdin.take().expect("stdin");
    let input: Vec<u8> = cases
        .iter()
        .flat_map(|c| {
            let mut line = serde_json::to_vec(c).expect("case serialises");
            line.push(b'\n');
            line
        })
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(&input).expect("write cases"));
    let output = child.wait_with_output().expect("harness output");
    writer.join().expect("writer thread");
    assert!(output.status.success(), "the Go allocator harness failed");
    let answers: Vec<Value> = serde_json::Deserializer::from_slice(&output.stdout)
        .into_iter::<Value>()
        .map(|v| v.expect("answer is JSON"))
        .collect();
    assert_eq!(answers.len(), cases.len(), "one answer per case");
    answers
}
