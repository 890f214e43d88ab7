//! Random expressions that are not shaped like selectors: calls of any declared overload with
//! arguments of its types, untyped trees of any operator over any operand, and random regular
//! expressions, to exercise overload resolution, unification, the cost of every function and
//! Go's regular expression syntax.

use allocator_workloads::Rng;
use dra_cel::DeclaredOverload;

/// `[call].size() == 1` or `call == call` for a random overload of the environment, with
/// arguments of its declared types (sometimes nested calls, sometimes of a wrong type).
pub fn library_call(rng: &mut Rng, overloads: &[DeclaredOverload]) -> String {
    let call = call(rng, overloads, None, 2);
    match rng.below(3) {
        0 => format!("{call} == {call}"),
        _ => format!("[{call}].size() == 1"),
    }
}

fn call(rng: &mut Rng, overloads: &[DeclaredOverload], result: Option<&str>, depth: u32) -> String {
    let fitting: Vec<&DeclaredOverload> = overloads
        .iter()
        .filter(|o| !o.function.starts_with('@') && !o.function.contains("_"))
        .filter(|o| result.is_none_or(|r| o.result == r))
        .filter(|o| o.args.iter().all(|a| value(rng, a).is_some()))
        .collect();
    let Some(o) = fitting.get(rng.below(fitting.len().max(1) as u64) as usize) else {
        return value(rng, result.unwrap_or("dyn")).unwrap_or_else(|| "1".to_owned());
    };
    let mut args: Vec<String> = o
        .args
        .iter()
        .map(|a| {
            let wrong = ["1", "\"s\"", "true", "[1]", "2.5"];
            if rng.chance(4) {
                wrong[rng.below(wrong.len() as u64) as usize].to_owned()
            } else if depth > 0 && rng.chance(30) {
                call(rng, overloads, Some(a), depth - 1)
            } else {
                value(rng, a).expect("checked above")
            }
        })
        .collect();
    if o.member {
        let target = args.remove(0);
        format!("({target}).{}({})", o.function, args.join(", "))
    } else {
        format!("{}({})", o.function, args.join(", "))
    }
}

/// A value of the declared type `t` (`None` for types no selector can build).
fn value(rng: &mut Rng, t: &str) -> Option<String> {
    let pick = |rng: &mut Rng, choices: &[&str]| choices[rng.below(choices.len() as u64) as usize].to_owned();
    let element = |t: &str, prefix: &str| {
        t.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(')'))
            .map(str::to_owned)
    };
    Some(match t {
        "bool" => pick(rng, &["true", "device.allowMultipleAllocations"]),
        "int" => pick(rng, &["0", "3", "-1", "device.driver.size()"]),
        "uint" => "2u".to_owned(),
        "double" => "1.5".to_owned(),
        "string" => pick(rng, &["device.driver", "\"a-b\"", "\"\"", "\"10.0.0.1\""]),
        "bytes" => "b\"ab\"".to_owned(),
        "null_type" => "null".to_owned(),
        "google.protobuf.Duration" => "duration(\"1h\")".to_owned(),
        "google.protobuf.Timestamp" => "timestamp(\"2024-01-01T00:00:00Z\")".to_owned(),
        "struct:kubernetes.Quantity" => pick(rng, &["quantity(\"1Gi\")", "device.capacity[\"d\"].memory"]),
        "struct:kubernetes.Semver" => "semver(\"1.2.3\")".to_owned(),
        "struct:kubernetes.URL" => "url(\"https://example.com/a\")".to_owned(),
        "struct:kubernetes.NamedFormat" => "format.dns1123Label()".to_owned(),
        "opaque:net.IP" => "ip(\"10.0.0.1\")".to_owned(),
        "opaque:net.CIDR" => "cidr(\"10.0.0.0/8\")".to_owned(),
        "type" | "type(~A)" => pick(rng, &["int", "string"]),
        "dyn" | "~A" | "~B" | "~T" | "~K" | "~V" => pick(rng, &["device.attributes[\"d\"].x", "1", "\"s\""]),
        _ => {
            if let Some(inner) = element(t, "list(") {
                let items: Vec<String> = (0..rng.below(3)).filter_map(|_| value(rng, &inner)).collect();
                format!("[{}]", items.join(", "))
            } else if let Some(inner) = element(t, "opaque:optional_type(") {
                format!("optional.of({})", value(rng, &inner)?)
            } else if t.starts_with("map(") {
                pick(rng, &["{\"a\": 1}", "device.attributes[\"d\"]", "{}"])
            } else {
                return None;
            }
        }
    })
}

/// An untyped expression tree: any operator over any operands (mixed types, null, dyn,
/// optionals, attribute values), to exercise unification and overload resolution.
pub fn wild(rng: &mut Rng) -> String {
    let mut vars = Vec::new();
    wild_expr(rng, 3, &mut vars)
}

fn wild_expr(rng: &mut Rng, depth: u32, vars: &mut Vec<String>) -> String {
    const ATOMS: [&str; 26] = [
        "1",
        "2u",
        "1.5",
        "\"s\"",
        "b\"b\"",
        "true",
        "null",
        "[]",
        "{}",
        "[1]",
        "[\"a\", \"b\"]",
        "{\"a\": 1}",
        "device",
        "device.driver",
        "device.attributes",
        "device.attributes[\"d\"]",
        "device.attributes[\"d\"].x",
        "device.capacity[\"d\"].memory",
        "dyn(1)",
        "type(1)",
        "int",
        "optional.none()",
        "optional.of(1)",
        "duration(\"1s\")",
        "timestamp(0)",
        "device.allowMultipleAllocations",
    ];
    let pick = |rng: &mut Rng, c: &[&str]| c[rng.below(c.len() as u64) as usize].to_owned();
    if depth == 0 || rng.chance(20) {
        if !vars.is_empty() && rng.chance(40) {
            return vars[rng.below(vars.len() as u64) as usize].clone();
        }
        return pick(rng, &ATOMS);
    }
    let d = depth - 1;
    let sub = |rng: &mut Rng, vars: &mut Vec<String>| wild_expr(rng, d, vars);
    match rng.below(14) {
        0 => format!("{}{}", pick(rng, &["!", "-"]), sub(rng, vars)),
        1..=3 => {
            let ops = [
                "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in",
            ];
            format!("({} {} {})", sub(rng, vars), pick(rng, &ops), sub(rng, vars))
        }
        4 => format!("({} ? {} : {})", sub(rng, vars), sub(rng, vars), sub(rng, vars)),
        5 => format!("{}[{}]", sub(rng, vars), sub(rng, vars)),
        6 => format!(
            "{}{}",
            sub(rng, vars),
            pick(rng, &[".x", ".?x", ".driver", ".attributes", ".size()", "[?\"x\"]"])
        ),
        7 => format!("has({}.x)", sub(rng, vars)),
        8 => format!("[{}, {}]", sub(rng, vars), sub(rng, vars)),
        9 => format!("{{{}: {}}}", sub(rng, vars), sub(rng, vars)),
        10 if rng.chance(30) => format!("[?{}, {}]", sub(rng, vars), sub(rng, vars)),
        10 => {
            let call = pick(
                rng,
                &[
                    "contains",
                    "startsWith",
                    "orValue",
                    "hasValue",
                    "value",
                    "lowerAscii",
                    "join",
                    "sum",
                ],
            );
            format!(
                "{}.{call}({})",
                sub(rng, vars),
                if call.ends_with('e') && call != "value" {
                    String::new()
                } else {
                    sub(rng, vars)
                }
            )
        }
        11 => format!(
            "{}({})",
            pick(rng, &["size", "string", "int", "dyn", "type", "bool", "double", "uint"]),
            sub(rng, vars)
        ),
        12 => {
            let range = sub(rng, vars);
            let var = format!("w{}", vars.len());
            vars.push(var.clone());
            let body = sub(rng, vars);
            vars.pop();
            if rng.chance(25) {
                let m = pick(rng, &["all", "exists", "existsOne", "transformList", "transformMap"]);
                return format!("{range}.{m}(k, {var}, {body})");
            }
            let m = pick(
                rng,
                &["all", "exists", "exists_one", "map", "filter", "sortBy", "optMap"],
            );
            format!("{range}.{m}({var}, {body})")
        }
        _ => {
            let init = sub(rng, vars);
            let var = format!("w{}", vars.len());
            vars.push(var.clone());
            let body = sub(rng, vars);
            vars.pop();
            format!("cel.bind({var}, {init}, {body})")
        }
    }
}

/// `device.driver.matches(<random pattern>)`: a literal pattern, checked as Go's regexp parses it.
pub fn pattern(rng: &mut Rng) -> String {
    const TOKENS: [&str; 44] = [
        "a",
        "b",
        ".",
        "^",
        "$",
        "|",
        "(",
        ")",
        "(?:",
        "(?i)",
        "(?P<n>",
        "(?<m>",
        "(?x)",
        "[",
        "]",
        "[^",
        "-",
        "\\d",
        "\\w",
        "\\pL",
        "\\p{Greek}",
        "\\x41",
        "\\Q",
        "\\E",
        "*",
        "+",
        "?",
        "{2}",
        "{1,3}",
        "{,2}",
        "{1001}",
        "{2,}",
        "{0}",
        "\\",
        "\\b",
        "\\1",
        "\\0",
        "[:alpha:]",
        ":]",
        "\\z",
        "\\.",
        "é",
        "{",
        "}",
    ];
    let n = 1 + rng.below(8);
    let pattern: String = (0..n)
        .map(|_| TOKENS[rng.below(TOKENS.len() as u64) as usize])
        .collect();
    format!("device.driver.matches({pattern:?})")
}
