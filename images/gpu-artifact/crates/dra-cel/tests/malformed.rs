//! Malformed selectors as a user may write them (issue 17, item 7: no panic from outside input):
//! macros called with the wrong number or kind of arguments, unbalanced parentheses, `format`
//! strings with broken clauses, timestamp literals that are not RFC 3339. Each is refused in
//! both releases with cel-go's words, naming the expression; none panics.

use dra_cel::{CelError, KubernetesRelease, estimate_max_cost};
use property_runs::proptest::prelude::*;
use property_runs::proptest::sample::select;
use property_runs::{check, ensure};

const RELEASES: [KubernetesRelease; 2] = [KubernetesRelease::V1_34, KubernetesRelease::V1_37];

/// The refusal of `expression` in `release`, or what came instead.
fn refusal(expression: &str, release: KubernetesRelease) -> Result<String, String> {
    match estimate_max_cost(expression, release) {
        Err(CelError::Compile {
            expression: named,
            message,
        }) if named == expression && !message.is_empty() => Ok(message),
        other => Err(format!(
            "{expression:?} in {release:?}: expected a compile error, got {other:?}"
        )),
    }
}

/// Asserts that each expression is refused in both releases with a message containing `words`.
fn assert_refused(cases: &[(&str, &str)]) {
    for (expression, words) in cases {
        for release in RELEASES {
            let message = refusal(expression, release).unwrap_or_else(|wrong| panic!("{wrong}"));
            assert!(message.contains(words), "{expression} in {release:?}: {message}");
        }
    }
}

#[test]
fn macros_with_the_wrong_arity_or_variables_are_refused() {
    assert_refused(&[
        ("[1].all(x)", "undeclared reference to 'all'"),
        ("[1].exists()", "undeclared reference to 'exists'"),
        ("[1].map(x, x, x, x)", "undeclared reference to 'map'"),
        ("[1].filter(x, true, true)", "undeclared reference to 'filter'"),
        ("cel.bind(x)", "undeclared reference to 'cel'"),
        ("cel.bind(x, 1)", "undeclared reference to 'cel'"),
        ("has()", "undeclared reference to 'has'"),
        ("has(1)", "invalid argument to has() macro"),
        ("[1].exists(1, 2, 3)", "argument must be a simple name"),
        ("[1].exists_one(1, true)", "argument must be a simple name"),
        ("[1].map(1, 2) == []", "argument is not an identifier"),
        (
            "cel.bind(1, 2, 3) == 3",
            "cel.bind() variable names must be simple identifiers",
        ),
        (
            "device.driver.optMap(1, 2)",
            "optMap() variable name must be a simple identifier",
        ),
    ]);
    // cel-go's whole text: the position of the argument that is not a name.
    assert_eq!(
        refusal("[1].exists(1, 2, 3)", KubernetesRelease::V1_37),
        Ok("compilation failed: ERROR: <input>:1:12: argument must be a simple name\n | [1].exists(1, 2, 3)\n | ...........^".to_owned())
    );
}

#[test]
fn malformed_literals_and_format_clauses_are_refused() {
    assert_refused(&[
        ("timestamp('2') == timestamp(0)", "invalid timestamp argument"),
        (
            "timestamp('2024-13-01T00:00:00Z') == timestamp(0)",
            "invalid timestamp argument",
        ),
        (
            "timestamp('2024-02-30T00:00:00Z') == timestamp(0)",
            "invalid timestamp argument",
        ),
        (
            "timestamp('2024-01-01T00:00:00+é:00') == timestamp(0)",
            "invalid timestamp argument",
        ),
        (
            "timestamp('2024-01-01T00:00:00.Z') == timestamp(0)",
            "invalid timestamp argument",
        ),
        ("'%'.format([1]) == ''", "unexpected end of string"),
        ("'%.'.format([1]) == ''", "could not parse formatting clause"),
        ("'%.3'.format([1]) == ''", "could not find end of precision specifier"),
        ("'%.a'.format([1]) == ''", "error while converting precision to integer"),
        ("'%d %d'.format([1]) == ''", "index 1 out of range"),
        ("'%z'.format([1]) == ''", "unrecognized formatting clause \"z\""),
        ("((true)", "Syntax error"),
        ("(true))", "Syntax error"),
    ]);
}

/// Receiver macros of the environment (and names that are macros in one release only).
const MACROS: &[&str] = &[
    "all",
    "exists",
    "exists_one",
    "existsOne",
    "map",
    "filter",
    "transformList",
    "transformMap",
    "transformMapEntry",
    "optMap",
    "optFlatMap",
    "sortBy",
];

/// Expressions that are wrong however the generator fills them in.
fn malformed() -> impl Strategy<Value = String> {
    let literal_args = |n: usize| vec!["1"; n].join(", ");
    prop_oneof![
        // A macro name with 0 to 5 literal arguments: either no macro has that arity (an
        // undeclared function) or the variable is not a name.
        (select(MACROS), 0usize..6).prop_map(move |(name, n)| format!("[1].{name}({})", literal_args(n))),
        (0usize..6).prop_map(move |n| format!("cel.bind({})", literal_args(n))),
        (0usize..6).prop_map(move |n| format!("has({})", literal_args(n))),
        // Unbalanced parentheses.
        (0usize..40, 0usize..40)
            .prop_filter("unbalanced", |(open, close)| open != close)
            .prop_map(|(open, close)| format!("{}true{}", "(".repeat(open), ")".repeat(close))),
        // A clause cut short, a bad precision or more verbs than arguments.
        ("[a-z ]{0,8}", select(&["%", "%.", "%.12", "%.a", "%d%d", "%.3"][..]))
            .prop_map(|(text, tail)| format!("'{text}{tail}'.format([1]) == ''")),
        // Shorter than any RFC 3339 timestamp.
        "[0-9TZ:.+-]{0,19}".prop_map(|text| format!("timestamp('{text}') == timestamp(0)")),
    ]
}

#[test]
fn property_malformed_selectors_are_refused_naming_the_expression() {
    check("malformed CEL selectors", file!(), malformed(), |text| {
        for release in RELEASES {
            let outcome = refusal(&text, release);
            ensure(outcome.is_ok(), || outcome.err().unwrap_or_default())?;
        }
        Ok(())
    });
}
