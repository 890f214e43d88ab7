//! dra-cel's compile-time check and cost estimate against the real DRA CEL compiler of each test
//! bed release (the Go harness's CEL mode, tools/allocator-harness/cel.go): an expression must be
//! rejected by both or by neither, and where both compile it, the estimated cost must be Go's
//! `MaxCost` (over the limit too). The corpus: the shipped examples, typical class selectors,
//! every kind of error, literal and syntax corners, deep nesting, expensive comprehensions around
//! the cost limit, and random expressions (typed selectors, calls of every declared function,
//! untyped trees). Also compares the declared functions with the real environment's.
//!
//! `CEL_DIFFERENTIAL_RANDOM=<n>` generates n expressions of each random kind instead of the
//! default, and `CEL_DIFFERENTIAL_SEED` changes the seed, for longer runs by hand.

#[path = "cel_differential/corpus.rs"]
mod corpus;
#[path = "cel_differential/typed.rs"]
mod typed;
#[path = "cel_differential/untyped.rs"]
mod untyped;

use std::collections::BTreeMap;

use allocator_workloads::{GoHarness, Rng};
use dra_cel::{CelError, KubernetesRelease, SelectorCache, declared_overloads, estimate_max_cost};
use serde_json::{Value, json};

const RELEASES: [(&str, KubernetesRelease); 2] = [
    ("0.34.4", KubernetesRelease::V1_34),
    ("0.37.2", KubernetesRelease::V1_37),
];

/// Random expressions of each kind by default: typed selectors, library calls, untyped trees,
/// regular expressions.
const RANDOM: [usize; 4] = [2000, 1000, 1000, 500];

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} is a number")))
}

fn corpus() -> Vec<String> {
    let mut corpus = corpus::hand_written();
    let mut rng = Rng::new(env_number("CEL_DIFFERENTIAL_SEED").unwrap_or(20_260_101));
    let [typed, calls, trees, patterns] = match env_number("CEL_DIFFERENTIAL_RANDOM") {
        Some(n) => [n as usize; 4],
        None => RANDOM,
    };
    corpus.extend((0..typed).map(|_| typed::selector(&mut rng)));
    let overloads = declared_overloads(KubernetesRelease::V1_37);
    corpus.extend((0..calls).map(|_| untyped::library_call(&mut rng, &overloads)));
    corpus.extend((0..trees).map(|_| untyped::wild(&mut rng)));
    corpus.extend((0..patterns).map(|_| untyped::pattern(&mut rng)));
    corpus
}

/// What one side made of an expression.
struct Verdict {
    rejected: bool,
    /// The estimated cost where the expression type-checked.
    cost: Option<u64>,
    message: String,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rejected={} cost={:?} {}", self.rejected, self.cost, self.message)
    }
}

fn go_verdict(answer: &Value) -> Verdict {
    let message = answer["error"].as_str().unwrap_or_default().to_owned();
    Verdict {
        rejected: !message.is_empty(),
        cost: answer["maxCost"].as_u64(),
        message,
    }
}

fn our_verdict(cache: &SelectorCache, expression: &str) -> Verdict {
    match cache.get_or_compile(expression) {
        Ok(compiled) => Verdict {
            rejected: false,
            cost: Some(compiled.max_cost()),
            message: String::new(),
        },
        Err(CelError::Compile { message, .. }) => Verdict {
            rejected: true,
            cost: estimate_max_cost(expression, cache.release()).ok(),
            message,
        },
        Err(other) => panic!("{expression}: not a compile error: {other}"),
    }
}

/// Every overload the checker declares, in order, as the harness lists the real environment.
fn assert_same_declarations(harness: &GoHarness, release: KubernetesRelease) {
    let answer = &harness.run(&[json!({"celDeclarations": true})])[0];
    let go = answer["functions"]
        .as_array()
        .unwrap_or_else(|| panic!("{release:?}: no declarations: {answer}"));
    let ours: Vec<Value> = declared_overloads(release)
        .into_iter()
        .map(|o| {
            json!({"name": o.function, "overload": o.overload_id, "member": o.member, "args": o.args,
                   "result": o.result, "params": o.type_params})
        })
        .collect();
    assert_eq!(ours.len(), go.len(), "{release:?}: overload count");
    for (ours, go) in ours.iter().zip(go) {
        assert_eq!(ours, go, "{release:?}: a declared overload differs");
    }
}

#[test]
fn selectors_are_checked_and_costed_like_the_api_server() {
    let corpus = corpus();
    for (version, release) in RELEASES {
        let harness = GoHarness::new(version);
        assert_same_declarations(&harness, release);
        let requests: Vec<Value> = corpus.iter().map(|e| json!({"celCompile": e})).collect();
        let answers = harness.run(&requests);
        let cache = SelectorCache::for_release(release);
        let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
        let mut disagreements = Vec::new();
        for (expression, answer) in corpus.iter().zip(&answers) {
            let (go, ours) = (go_verdict(answer), our_verdict(&cache, expression));
            let outcome = match (go.rejected, go.cost) {
                (false, _) => "accepted",
                (true, Some(_)) => "over the cost limit",
                (true, None) => "invalid",
            };
            *outcomes.entry(outcome).or_default() += 1;
            // Go gives a cost wherever the expression compiled, over the limit too.
            if go.rejected != ours.rejected || (go.cost.is_some() && go.cost != ours.cost) {
                disagreements.push(format!("{expression}\n    go: {go}\n    us: {ours}"));
            }
        }
        println!(
            "{version}: {} expressions compared ({outcomes:?}), {} disagreements",
            corpus.len(),
            disagreements.len()
        );
        assert!(disagreements.is_empty(), "{version}:\n{}", disagreements.join("\n"));
        assert!(
            outcomes.len() == 3 && outcomes.values().all(|n| *n >= 50),
            "{version}: every outcome is exercised: {outcomes:?}"
        );
    }
}
