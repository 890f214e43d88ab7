//! Which devices a node can reach: `nodeName`, `allNodes` and `nodeSelector` of a slice or,
//! with `perDeviceNodeSelection`, of a device (with or without the Node object); and the node
//! selector an allocation result gets.

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// Where a device is available.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeBinding {
    Node(String),
    AllNodes,
    Selector(NodeSelector),
}

/// Whether a device bound by `selector` reaches the node: by the Node object when the caller has
/// it; by the name alone otherwise, which proves a match only through terms made of
/// `metadata.name` fields (labels are unknown, so a term with label expressions proves nothing).
/// A Node object without any labels counts as a name only: every real Node carries some
/// (`kubernetes.io/hostname`), so it was built by a caller that knows just the name.
pub(crate) fn selector_reaches(selector: &NodeSelector, node_name: &str, node: Option<&Node>) -> bool {
    match node.filter(|n| n.metadata.labels.is_some()) {
        Some(node) => selector_matches(selector, node),
        None => {
            let mut named = Node::default();
            named.metadata.name = Some(node_name.to_owned());
            selector
                .node_selector_terms
                .iter()
                .filter(|term| term.match_expressions.as_ref().is_none_or(Vec::is_empty))
                .any(|term| term_matches(term, &named))
        }
    }
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if req.operator == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    let name = node.metadata.name.as_deref();
    let expressions = term.match_expressions.iter().flatten();
    let fields = term.match_fields.iter().flatten();
    let has_any = term.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
        || term.match_fields.as_ref().is_some_and(|f| !f.is_empty());
    has_any
        && expressions
            .into_iter()
            .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields
            .into_iter()
            .all(|r| requirement_matches(r, if r.key == "metadata.name" { name } else { None }))
}

/// Terms are ORed; an empty term matches nothing, as in `nodeaffinity`.
pub(crate) fn selector_matches(selector: &NodeSelector, node: &Node) -> bool {
    selector.node_selector_terms.iter().any(|term| term_matches(term, node))
}

/// The allocation's node selector as the scheduler's `createNodeSelector` builds it: any device
/// bound to a node name pins the result to that node; selectors of the others are merged into one
/// term; devices available everywhere add nothing.
pub(crate) fn allocation_node_selector<'a>(
    bindings: impl Iterator<Item = &'a NodeBinding>,
    target_node: &str,
) -> Option<NodeSelector> {
    let mut merged = NodeSelectorTerm::default();
    for binding in bindings {
        match binding {
            NodeBinding::Node(_) => {
                return Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".to_owned(),
                            operator: "In".to_owned(),
                            values: Some(vec![target_node.to_owned()]),
                        }]),
                        ..Default::default()
                    }],
                });
            }
            NodeBinding::AllNodes => {}
            NodeBinding::Selector(selector) => {
                if let Some(term) = selector.node_selector_terms.first() {
                    for (from, to) in [
                        (&term.match_fields, &mut merged.match_fields),
                        (&term.match_expressions, &mut merged.match_expressions),
                    ] {
                        for requirement in from.iter().flatten() {
                            let list = to.get_or_insert_with(Vec::new);
                            if !list.contains(requirement) {
                                list.push(requirement.clone());
                            }
                        }
                    }
                }
            }
        }
    }
    if merged.match_fields.is_some() || merged.match_expressions.is_some() {
        Some(NodeSelector {
            node_selector_terms: vec![merged],
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn selector(fields: Vec<NodeSelectorRequirement>, expressions: Vec<NodeSelectorRequirement>) -> NodeSelector {
        NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_fields: (!fields.is_empty()).then_some(fields),
                match_expressions: (!expressions.is_empty()).then_some(expressions),
            }],
        }
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.metadata.labels = Some(labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
        node
    }

    #[test]
    fn a_name_field_is_proven_by_the_name_alone() {
        let by_name = selector(vec![requirement("metadata.name", "In", &["node-a"])], vec![]);
        assert!(selector_reaches(&by_name, "node-a", None));
        assert!(!selector_reaches(&by_name, "node-b", None));
        let not_b = selector(vec![requirement("metadata.name", "NotIn", &["node-b"])], vec![]);
        assert!(selector_reaches(&not_b, "node-a", None));
    }

    #[test]
    fn label_expressions_are_never_proven_without_the_node_object() {
        // Without labels, NotIn and DoesNotExist would match a node that may well carry the label.
        for operator in ["In", "NotIn", "DoesNotExist"] {
            let by_label = selector(vec![], vec![requirement("rack", operator, &["r1"])]);
            assert!(!selector_reaches(&by_label, "node-a", None), "{operator}");
        }
        let both = selector(
            vec![requirement("metadata.name", "In", &["node-a"])],
            vec![requirement("rack", "In", &["r1"])],
        );
        assert!(!selector_reaches(&both, "node-a", None));
        assert!(selector_reaches(
            &both,
            "node-a",
            Some(&node("node-a", &[("rack", "r1")]))
        ));
        assert!(!selector_reaches(
            &both,
            "node-a",
            Some(&node("node-a", &[("rack", "r2")]))
        ));
        let mut name_only = node("node-a", &[]);
        name_only.metadata.labels = None;
        let not_r1 = selector(vec![], vec![requirement("rack", "NotIn", &["r1"])]);
        assert!(
            !selector_reaches(&not_r1, "node-a", Some(&name_only)),
            "a Node built from a name"
        );
    }

    #[test]
    fn the_result_pins_a_node_local_device_and_merges_selectors() {
        let rack = NodeBinding::Selector(selector(vec![], vec![requirement("rack", "In", &["r1"])]));
        let zone = NodeBinding::Selector(selector(vec![], vec![requirement("zone", "In", &["z1"])]));
        let merged = allocation_node_selector([&rack, &NodeBinding::AllNodes, &zone].into_iter(), "").unwrap();
        assert_eq!(
            merged,
            selector(
                vec![],
                vec![requirement("rack", "In", &["r1"]), requirement("zone", "In", &["z1"])]
            )
        );
        let local = NodeBinding::Node("node-a".to_owned());
        let pinned = allocation_node_selector([&rack, &local].into_iter(), "node-a").unwrap();
        assert_eq!(
            pinned,
            selector(vec![requirement("metadata.name", "In", &["node-a"])], vec![])
        );
        assert_eq!(allocation_node_selector([&NodeBinding::AllNodes].into_iter(), ""), None);
    }
}
