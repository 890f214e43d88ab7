//! Which devices a node can reach: `nodeName`, `allNodes` and `nodeSelector` of a slice or,
//! with `perDeviceNodeSelection`, of a device; and the node selector an allocation result gets.

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// Where a device is available.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeBinding {
    Node(String),
    AllNodes,
    Selector(NodeSelector),
}

impl NodeBinding {
    pub(crate) fn node_name(&self) -> Option<&str> {
        match self {
            NodeBinding::Node(name) => Some(name),
            _ => None,
        }
    }

    /// Whether a device bound this way is usable from `node`. Without a node object only the node
    /// name is known, so label selectors cannot match.
    pub(crate) fn reachable_from(&self, node_name: &str, node: Option<&Node>) -> bool {
        match self {
            NodeBinding::Node(name) => name == node_name,
            NodeBinding::AllNodes => true,
            NodeBinding::Selector(selector) => node.is_some_and(|n| selector_matches(selector, n)),
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
