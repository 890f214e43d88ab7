//! The hand-written part of the corpus: the shipped examples, selectors as classes and claims
//! write them, every kind of error, literal and syntax corners, deep nesting, and costs around the
//! limit.

use std::path::Path;

use serde::Deserialize;

pub const D: &str = r#"device.attributes["gpu.deckhouse.io"]"#;
pub const C: &str = r#"device.capacity["gpu.deckhouse.io"]"#;

/// Selectors as classes and claims write them, error kinds, and costs near the limit. `$A` is
/// one domain's attributes, `$C` its capacities.
pub const HAND_WRITTEN: &[&str] = &[
    r#"device.driver == "gpu.deckhouse.io""#,
    r#"$A.deviceType == "MIG" && $C.memory.compareTo(quantity("12Gi")) >= 0"#,
    r#"$A.migProfile.startsWith("2g.")"#,
    r#"$A.ccMajor >= 8 && $A.baremetal"#,
    r#"$C.memory.isGreaterThan(quantity("20Gi"))"#,
    r#"$C.memory == quantity("21474836480")"#,
    r#"$C.memory.asInteger() / 1073741824 == 20"#,
    r#"$A.driverVersion.isGreaterThan(semver("550.0.0"))"#,
    r#"$A.driverVersion.compareTo(semver("580.65.6")) == 0"#,
    r#"$A.driverVersion.major() == 580"#,
    r#"device.attributes["resource.kubernetes.io"].pciBusID.lowerAscii() == "0000:3b:00.0""#,
    r#"has($A.uuid)"#,
    r#""gpu.deckhouse.io" in device.attributes"#,
    r#"device.allowMultipleAllocations"#,
    r#"isQuantity("1Gi") && !isSemver("1.2")"#,
    r#"["a", "b"].join("-") == "a-b""#,
    r#"$A.exists(k, k == "migProfile")"#,
    r#"$A.all(k, k.size() < 10)"#,
    r#"device.attributes.exists(d, device.attributes[d].exists(k, k.startsWith("mig")))"#,
    r#"cel.bind(a, $A, a.deviceType == "MIG" && a.migProfile == "1g.10gb")"#,
    r#"$A.productName.matches("^NVIDIA A[0-9]+")"#,
    r#"$A.productName.contains("H100")"#,
    r#"$A.productName.split(" ").size() > 1"#,
    r#"$A.productName.replace("NVIDIA ", "") == "A30""#,
    r#"$A.productName.substring(0, 6) == "NVIDIA""#,
    r#"$A.productName.indexOf("A") >= 0"#,
    r#"$A.uuid in ["GPU-1", "GPU-2", "GPU-3"]"#,
    r#"$A.ccMajor in [7, 8, 9]"#,
    r#"[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2"#,
    r#"[1, 2, 3].exists_one(x, x == 2)"#,
    r#"{"a": 1}.all(k, k == "a")"#,
    r#"$A.architecture.upperAscii() == "AMPERE""#,
    r#"$C.memory.sub(quantity("1Gi")).isLessThan(quantity("40Gi"))"#,
    r#"$C.memory.add(5).sign() == 1"#,
    r#"$C.memory.isInteger() && $C.memory.asApproximateFloat() > 1.0"#,
    r#"$A.ccMajor > 7 ? $A.ccMinor >= 0 : false"#,
    r#"device.driver.size() <= 63"#,
    r#"device.driver + "x" == "gpu.deckhouse.iox""#,
    r#"string(device.allowMultipleAllocations) == "false""#,
    r#"int($A.ccMajor) == 8"#,
    r#"type(device.driver) == string"#,
    r#"dyn(device.driver) == "x""#,
    r#"[device.driver, "b"].exists(s, s == "b")"#,
    r#"$A.?uuid.hasValue()"#,
    r#"$A.?uuid.orValue("none") != "none""#,
    r#"optional.of(1).value() == 1"#,
    r#"sets.contains([1, 2, 3], [1])"#,
    r#"[3, 1, 2].sort() == [1, 2, 3]"#,
    r#"lists.range(3).size() == 3"#,
    r#"[1, 2, 3].slice(0, 2).size() == 2"#,
    r#"[[1], [2]].flatten().size() == 2"#,
    r#"[1, 1].distinct().size() == 1"#,
    r#"["b", "a"].sortBy(x, x)[0] == "a""#,
    r#"$A.exists(k, v, k == v)"#,
    r#"{"a": "b"}.transformMap(k, v, v + "!")["a"] == "b!""#,
    r#"[1, 2].transformList(i, v, i + v).size() == 2"#,
    r#"duration("1h") > duration("30m")"#,
    r#"timestamp("2024-01-01T00:00:00Z") < timestamp("2025-01-01T00:00:00Z")"#,
    r#""%s-%d".format(["a", 1]) == "a-1""#,
    r#"url("https://example.com").getHost() == "example.com""#,
    r#"ip("10.0.0.1").family() == 4"#,
    r#"cidr("10.0.0.0/8").containsIP("10.1.2.3")"#,
    r#"$A.productName.find("[0-9]+") == "30""#,
    r#"[1, 2, 3].sum() == 6 && [1, 2].isSorted() && [3, 4].max() == 4"#,
    r#"format.dns1123Label().validate("abc").hasValue() == false"#,
    r#"strings.quote(device.driver) != """#,
    r#"$A.size() <= 32"#,
    r#"device.attributes.size() <= 32 && device.capacity.size() <= 32"#,
    // Errors: undeclared, undefined field, no overload, wrong receiver or arity, result type.
    r#"foo.bar"#,
    r#"device.drvier == "x""#,
    r#"device.driver + 1 == "x""#,
    r#"device.driver == 1"#,
    r#"size(device.allowMultipleAllocations) == 1"#,
    r#"device.driver.startsWith()"#,
    r#"device.driver.startsWith("a", "b")"#,
    r#"device.allowMultipleAllocations.startsWith("a")"#,
    r#"startsWith(device.driver, "a")"#,
    r#"device.driver"#,
    r#"$A.deviceType"#,
    r#"$A.deviceType.foo"#,
    r#"dyn(true)"#,
    r#"1 + 1"#,
    r#"[1, "a"].size() == 2"#,
    r#"{"a": 1, "b": "c"}.size() == 2"#,
    r#"device.driver.matches("[")"#,
    r#"duration("1x") > duration("1s")"#,
    r#"timestamp("2024-13-01T00:00:00Z") > timestamp(0)"#,
    r#"$A.deviceType.exists(x, x == "a")"#,
    r#"device.attributes.gpu.exists(k, k == "a")"#,
    r#"$C.memory.foo == 1"#,
    r#"device.driver == "#,
    r#"[1].existsOne(x, x == 1)"#,
    r#"$A.reverse() == $A"#,
    r#"duration(1) > duration("0s")"#,
    r#""%d".format(["a"]) == "a""#,
    r#""%s %s".format(["a"]) == "a""#,
    r#"1 == 1.0"#,
    r#"1 < 1.0"#,
    r#"null == device.driver"#,
    r#"$A.a.b.c"#,
    // Literals and syntax as both parsers read them.
    r#"0x10 == 16 && 1e3 == 1000.0 && .5 < 1.0 && 10u > 9u && 0xFFu == 255u"#,
    r#"r"\d" == "\\d" && '''a''' == "a" && b"\xff" != b"" && "\u00e9" == "é""#,
    r#""\U0001F600".size() == 1 && "\x41\101" == "AA" && '\'' == "'""#,
    r#""\q" == "q""#,
    r#"9223372036854775807 > 0 && -9223372036854775808 < 0 && 18446744073709551615u > 0u"#,
    r#"9223372036854775808 > 0"#,
    r#"18446744073709551616u > 0u"#,
    r#"1. == 1.0"#,
    r#"device.attributes["d"].if == 1"#,
    r#"device.attributes["d"].in == 1"#,
    r#"device.attributes["d"].`model-name` == "x""#,
    "true // a comment\n && false == false",
    r#"device.driver == "a" &&"#,
    r#"[1, 2, 3,].size() == 3 && {"a": 1,}.size() == 1"#,
    r#"device.?driver.hasValue() && [?optional.of(1)].size() == 1 && {?"a": optional.none()}.size() == 0"#,
    r#"device.attributes[?"d"].hasValue()"#,
    r#".device.driver == "x""#,
    // Cost: string work over attributes, nested comprehensions, around the limit.
    r#"$A.all(k, $A.all(j, k != j || k == j))"#,
    r#"device.attributes.all(d, device.attributes[d].all(k, device.attributes.all(e, device.attributes[e].all(j, k != j))))"#,
    r#"device.attributes.all(d, device.attributes[d].all(k, device.attributes.all(e, device.attributes[e].exists(j, device.attributes[d][k] == device.attributes[e][j]))))"#,
    r#"$A.all(k, $A.all(j, $A.all(i, $A.all(h, k + j + i + h != "")))) "#,
    r#"$A.all(k, $A.all(j, $A.all(i, $A.all(h, k != h))))"#,
    r#"$A.all(k, $A.all(j, $A.all(i, string($A[k]).contains(string($A[j])))))"#,
    r#"$A.all(k, $A.all(j, string($A[k]).matches(string($A[j]))))"#,
    r#"lists.range(1000).all(i, lists.range(1000).all(j, i != j || i == j))"#,
    r#"lists.range(300).all(i, lists.range(300).all(j, i <= j || i > j))"#,
    r#"device.driver.split("").all(a, device.driver.split("").all(b, device.driver.split("").all(c, a + b + c != "")))"#,
];

/// The selectors of the shipped examples: hand-written DeviceClasses (folded `expression: >-`
/// blocks) and what gpu-controller renders from the GPUClasses (docs/examples/*.yaml).
pub fn example_selectors() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../docs/examples");
    let mut found = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("docs/examples")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("example");
        found.extend(rendered_selectors(&text));
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "expression: >-" {
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            let body: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| l.len() - l.trim_start().len() > indent && !l.trim().is_empty())
                .map(|l| l.trim())
                .collect();
            found.push(body.join(" "));
        }
    }
    assert!(found.len() >= 3, "the examples have selectors: {found:?}");
    found
}

/// The selectors of every GPUClass in `text`, as gpu-controller renders them.
fn rendered_selectors(text: &str) -> Vec<String> {
    let cel = dra_cel::SelectorCache::new();
    serde_yaml::Deserializer::from_str(text)
        .filter_map(|document| serde_yaml::Value::deserialize(document).ok())
        .filter(|document| document["kind"] == "GPUClass")
        .flat_map(|document| {
            let class: gpu_api::GPUClass = serde_yaml::from_value(document).expect("a GPUClass");
            let rendered = gpu_class::render(&class, &[], &cel).expect("the example renders");
            rendered.device_class.spec.selectors.unwrap_or_default()
        })
        .filter_map(|selector| selector.cel.map(|c| c.expression))
        .collect()
}

/// Expressions nested around cel-go's parser recursion limit of 250.
pub fn deep_expressions() -> Vec<String> {
    let mut found = Vec::new();
    for depth in [50, 95, 100, 130, 200, 240, 260] {
        found.push(format!("{}true{}", "(".repeat(depth), ")".repeat(depth)));
        found.push(format!("{}1 == 1", "-".repeat(depth)));
        found.push(format!("{}true", "true && ".repeat(depth)));
        found.push(format!("[{}1{}].size() == 1", "[".repeat(depth), "]".repeat(depth)));
    }
    found
}

/// Regular expressions where RE2 (Go) and the `regex` crate may disagree, as literal patterns
/// and as constants the planner folds.
const PATTERNS: &[&str] = &[
    r"(?x)a",
    r"a{1001}",
    r"a**",
    r"a++",
    r"a*?",
    r"\Qa.b\E",
    r"(?u)a",
    r"(?<n>a)",
    r"(?P<n>a)",
    r"[[:alpha:]]",
    r"\pL",
    r"\p{Greek}",
    r"a{2,1}",
    r"(?i:a)",
    r"\C",
    r"[a-\d]",
    r"x{1000}",
    r"(a{1000}){1000}",
    r"\z",
    r"\Z",
    r"\e",
    r"\<",
    r"[a&&b]",
    r"[[a]]",
    r"(?R)a",
    r"(?s-i:a)",
    r"a{,5}",
    r"\b",
    r"^$",
    r"(?m)^a$",
    r"\x{10FFFF}",
    r"\x{110000}",
    r"\k<n>",
    r"(?=a)",
    r"\1",
    r"[z-a]",
    r"(",
    r"a{1000,}",
    r"(?U)a+",
    r"\8",
    r"\0",
    r"\07",
    r"[\b]",
    r"\v",
    r"\h",
    r"\N{LATIN SMALL LETTER A}",
    r"\pN",
    r"\p{Foo}",
    r"[[:word:]]",
    r"[[:foo:]]",
    r"a{0}",
    r"a{1000}{2}",
    r"(?:)",
    r"()",
    r"a|",
    r"|",
    r"\Q",
    r"[\Q]\E]",
    r"[a-b-c]",
    r"a{1,1001}",
    r"(?i)(?-i)a",
    r"(?)",
    r"(?:a",
    r"\pZ",
    r"\p{^Greek}",
    r"\P{L}",
    r"[\p{L}--a]",
    r"[a~~b]",
    r"\d\D\s\S\w\W",
    r"[\d-z]",
    r"\A",
    r"(?s).",
    r"\x41",
    r"\x4",
    r"\101",
    r"\u0041",
];

/// The whole hand-written corpus, `$A` and `$C` spelled out.
pub fn hand_written() -> Vec<String> {
    let mut found = example_selectors();
    found.extend(deep_expressions());
    found.extend(HAND_WRITTEN.iter().map(|e| e.replace("$A", D).replace("$C", C)));
    for pattern in PATTERNS {
        found.push(format!("device.driver.matches({pattern:?})"));
        found.push(format!("device.driver.matches(string({pattern:?}))"));
    }
    found
}
