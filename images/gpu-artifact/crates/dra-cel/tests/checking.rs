//! Compile-time checks as the API server makes them: types, the result type, literal
//! validation and the cost limit, with the estimated cost exposed. Costs asserted here are the
//! `MaxCost` of the real compiler (k8s.io/dynamic-resource-allocation/cel at v0.34.4 and v0.37.2).

use dra_cel::{CelError, KubernetesRelease, MAX_COST, SelectorCache, estimate_max_cost};

fn compile_error(expression: &str) -> String {
    match SelectorCache::new().get_or_compile(expression) {
        Err(CelError::Compile { expression: e, message }) => {
            assert_eq!(e, expression);
            message
        }
        other => panic!("{expression}: expected a compile error, got {other:?}"),
    }
}

#[test]
fn type_errors_are_compile_errors_in_cel_go_words() {
    let cases = [
        ("foo.bar", "undeclared reference to 'foo' (in container '')"),
        (r#"device.drvier == "x""#, "undefined field 'drvier'"),
        (
            r#"device.driver + 1 == "x""#,
            "found no matching overload for '_+_' applied to '(string, int)'",
        ),
        (
            "device.driver == 1",
            "found no matching overload for '_==_' applied to '(string, int)'",
        ),
        (
            "size(device.allowMultipleAllocations) == 1",
            "found no matching overload for 'size' applied to '(bool)'",
        ),
        (
            "device.driver.startsWith()",
            "found no matching overload for 'startsWith' applied to 'string.()'",
        ),
        (
            r#"device.allowMultipleAllocations.startsWith("a")"#,
            "found no matching overload for 'startsWith' applied to 'bool.(string)'",
        ),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        (r#"[1, "a"].size() == 2"#, "expected type 'int' but found 'string'"),
        (r#"device.driver.matches("[")"#, "invalid matches argument"),
        ("uint(-1) == 1u", "unsigned integer overflow"),
    ];
    for (expression, words) in cases {
        let message = compile_error(expression);
        assert!(message.contains(words), "{expression}: {message}");
    }
    // The position is cel-go's, with the source line and a caret.
    assert_eq!(
        compile_error("device.driver == 1"),
        "compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(string, int)'\n | device.driver == 1\n | ..............^"
    );
}

#[test]
fn attribute_values_are_dynamic_as_in_cel_go() {
    let cache = SelectorCache::new();
    for expression in [
        r#"device.attributes["gpu.deckhouse.io"].ccMajor >= 8"#,
        r#"device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#,
        r#"device.attributes["gpu.deckhouse.io"].driverVersion.isGreaterThan(semver("1.0.0"))"#,
        r#"device.attributes["gpu.deckhouse.io"].baremetal"#,
    ] {
        assert!(cache.get_or_compile(expression).is_ok(), "{expression}");
    }
    // An attribute value is `any`, which cel-go will not iterate over.
    let message = compile_error(r#"device.attributes["gpu.deckhouse.io"].uuid.exists(x, x == "a")"#);
    assert!(
        message.contains("expression of type 'any' cannot be range of a comprehension"),
        "{message}"
    );
}

#[test]
fn costs_are_the_api_servers_max_cost() {
    let cases = [
        (
            r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "MIG" && device.attributes["gpu.deckhouse.io"].migProfile == "2g.12gb""#,
            14,
        ),
        (
            r#"device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity("12Gi")) >= 0"#,
            7,
        ),
        (
            r#"device.attributes["gpu.deckhouse.io"].exists(k, k.startsWith("mig"))"#,
            196,
        ),
        (
            r#"device.attributes["gpu.deckhouse.io"].all(k, device.attributes["gpu.deckhouse.io"].all(j, device.attributes["gpu.deckhouse.io"].all(i, k + j + i != "")))"#,
            761_060,
        ),
    ];
    let cache = SelectorCache::new();
    for (expression, cost) in cases {
        assert_eq!(
            cache.get_or_compile(expression).expect(expression).max_cost(),
            cost,
            "{expression}"
        );
        assert_eq!(
            estimate_max_cost(expression, KubernetesRelease::V1_34),
            Ok(cost),
            "{expression}"
        );
    }
}

#[test]
fn selectors_over_the_cost_limit_are_refused_naming_the_estimate() {
    let expression = "device.attributes.all(d, device.attributes[d].all(k, device.attributes.all(e, device.attributes[e].all(j, k != j))))";
    assert_eq!(estimate_max_cost(expression, KubernetesRelease::V1_37), Ok(9_705_731));
    let message = compile_error(expression);
    assert_eq!(
        message,
        format!("too complex, exceeds cost limit: estimated cost 9705731 exceeds {MAX_COST}")
    );
    // Joining a list of strings of unknown length is unbounded for the estimator.
    assert!(compile_error(r#"["a", "b"].join("-") == "a-b""#).starts_with("too complex, exceeds cost limit"));
}

#[test]
fn the_list_extension_is_declared_from_1_35() {
    let expression = "[2, 1].sort() == [1, 2]";
    assert!(
        SelectorCache::for_release(KubernetesRelease::V1_37)
            .get_or_compile(expression)
            .is_ok()
    );
    let refused = SelectorCache::for_release(KubernetesRelease::V1_34).get_or_compile(expression);
    assert!(
        matches!(&refused, Err(CelError::Compile { message, .. }) if message.contains("undeclared reference to 'sort'")),
        "{refused:?}"
    );
}

#[test]
fn deep_expressions_compile_and_evaluate_up_to_cel_gos_recursion_limit() {
    let cache = SelectorCache::new();
    let device = cache
        .device_context("gpu.deckhouse.io", &Default::default())
        .expect("an empty device");
    let deep = format!("{}true", "!!".repeat(100));
    assert_eq!(
        cache.get_or_compile(&deep).expect("200 levels").matches(&device),
        Ok(true)
    );
    let parens = format!("{}true{}", "(".repeat(240), ")".repeat(240));
    assert_eq!(
        cache.get_or_compile(&parens).expect("240 levels").matches(&device),
        Ok(true)
    );
    let too_deep = format!("{}true{}", "(".repeat(260), ")".repeat(260));
    let message = compile_error(&too_deep);
    assert!(message.contains("Recursion limit"), "{message}");
}
