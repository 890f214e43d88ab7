//! The Kubernetes function costs (`library.CostEstimator.EstimateCallCost` of
//! k8s.io/apiserver/pkg/cel/library/cost.go), chosen by function name.

use cel::common::ast::{Expr, LiteralValue};

use super::Node;
use super::estimate::{Cost, LIST_CREATE, REGEX_LENGTH, STRING_TRAVERSAL, STRUCT_CREATE, Size};
use super::functions::{CallEstimate, estimated_size};
use super::path::GoPath;
use crate::check::{CelType, Kind};

/// `cel.MaxFormatSize` and `cel.MaxNameFormatRegexSize` of k8s.io/apiserver/pkg/cel.
const MAX_FORMAT_SIZE: u64 = 64;
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

fn nominal() -> Option<CallEstimate> {
    Some(CallEstimate::cost(Cost::fixed(1)))
}

fn traversal(size: Size) -> Cost {
    size.by_factor(STRING_TRAVERSAL)
}

/// `listElementNode`: the element of a list-typed node, with the path to its items.
fn list_element(list: &Node) -> Option<Node<'static>> {
    let element = list.ty.parameters().first().map(|t| (*t).clone())?;
    let path = match list.path.is_empty() {
        true => GoPath::default(),
        false => GoPath::from_steps(list.path.steps().into_iter().chain(["@items".to_owned()]).collect()),
    };
    Some(Node {
        expr: None,
        path,
        ty: element,
        computed: None,
    })
}

fn selector_cost(length: Size) -> Cost {
    let parse = length.by_factor(STRING_TRAVERSAL);
    let requirements = length.by_factor(0.5);
    let requirement_cost = requirements.by_factor((LIST_CREATE + STRUCT_CREATE) as f64);
    Cost::fixed(LIST_CREATE).add(parse).add(requirement_cost)
}

/// The Kubernetes estimate for a call of `function`, or `None` to fall back to cel-go's rules.
pub(crate) fn estimate_call(
    function: &str,
    overload: &str,
    target: Option<&Node>,
    args: &[Node],
) -> Option<CallEstimate> {
    let first_arg = || args.first().map(estimated_size);
    match function {
        "check" => Some(CallEstimate::cost(Cost::fixed(350_000))),
        "serviceAccount" | "path" | "group" | "resource" | "subresource" | "namespace" | "name" | "allowed"
        | "reason" | "error" | "errored" => nominal(),
        "fieldSelector" | "labelSelector" if args.len() == 1 => Some(CallEstimate::cost(selector_cost(first_arg()?))),
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" => {
            let target = target?;
            let element_cost = Cost::fixed(1);
            if let Some(element) = list_element(target) {
                let mut element_cost = element_cost;
                if matches!(element.ty.kind(), Kind::String | Kind::Bytes) {
                    element_cost = element_cost.add(traversal(estimated_size(&element)));
                }
                return Some(CallEstimate::cost(estimated_size(target).times_cost(element_cost)));
            }
            if function == "includes" {
                return Some(CallEstimate::cost(estimated_size(target).times_cost(element_cost)));
            }
            Some(CallEstimate::cost(traversal(estimated_size(target))))
        }
        "url" | "jsonpatch.escapeKey" if args.len() == 1 => {
            let size = first_arg()?;
            Some(CallEstimate {
                cost: traversal(size),
                result_size: Some(size),
            })
        }
        "lowerAscii" | "upperAscii" | "substring" | "trim" => {
            let size = estimated_size(target?);
            Some(CallEstimate {
                cost: traversal(size),
                result_size: Some(size),
            })
        }
        "replace" => match args {
            [old, new, ..] => replace(estimated_size(target?), estimated_size(old), estimated_size(new)),
            _ => None,
        },
        "split" => {
            let size = estimated_size(target?);
            let mut max = size.max;
            if let Some(Expr::Literal(LiteralValue::Int(limit))) = args.get(1).and_then(|a| a.expr).map(|e| &e.expr) {
                max = *limit.inner() as u64;
            }
            Some(CallEstimate {
                cost: size.by_factor(2.0 * STRING_TRAVERSAL),
                result_size: Some(Size { min: 0, max }),
            })
        }
        "join" => {
            let target = target?;
            let list = estimated_size(target);
            let mut size = Size::fixed(0);
            if let Some(element) = list_element(target) {
                size = list.multiply(estimated_size(&element));
            }
            if let Some(separator) = args.first() {
                let separators = Size {
                    min: list.min.saturating_sub(1),
                    max: list.max.saturating_sub(1),
                };
                size = size.add(estimated_size(separator).multiply(separators));
            }
            Some(CallEstimate {
                cost: traversal(size),
                result_size: Some(size),
            })
        }
        "find" | "findAll" if !args.is_empty() => {
            let size = estimated_size(target?);
            let string_cost = traversal(size.add(Size::fixed(1)));
            let regex_cost = first_arg()?.by_factor(REGEX_LENGTH);
            Some(CallEstimate {
                cost: string_cost.multiply(regex_cost),
                result_size: Some(Size { min: 0, max: size.max }),
            })
        }
        "cidr" | "isIP" | "isCIDR" => Some(CallEstimate::cost(traversal(first_arg()?))),
        "ip" if overload == "cidr_ip" => nominal(),
        "ip" => Some(CallEstimate::cost(traversal(first_arg()?))),
        "ip.isCanonical" => Some(CallEstimate::cost(first_arg()?.by_factor(2.0 * STRING_TRAVERSAL))),
        "masked"
        | "prefixLength"
        | "family"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast" => nominal(),
        "containsIP" | "containsCIDR" if !args.is_empty() => {
            let ip = Size { min: 4, max: 16 };
            let mut cost = traversal(ip.add(ip));
            if function == "containsCIDR" {
                cost = cost.add(traversal(ip)).add(Cost::fixed(1));
            }
            if overload == "cidr_contains_ip_string" || overload == "cidr_contains_cidr_string" {
                cost = cost.add(first_arg()?.as_cost().by_factor(STRING_TRAVERSAL));
            }
            Some(CallEstimate::cost(cost))
        }
        "quantity" | "isQuantity" | "semver" | "isSemver" => Some(CallEstimate::cost(traversal(first_arg()?))),
        "validate" => {
            let cost = traversal(first_arg()?).by_factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH);
            Some(CallEstimate::cost(cost))
        }
        "format.named" | "sign" | "asInteger" | "isInteger" | "asApproximateFloat" | "isGreaterThan" | "isLessThan"
        | "compareTo" | "add" | "sub" | "major" | "minor" | "patch" | "getScheme" | "getHostname" | "getHost"
        | "getPort" | "getEscapedPath" | "getQuery" => nominal(),
        "_==_" => match args {
            [lhs, rhs] => equality(lhs, rhs),
            _ => None,
        },
        _ => None,
    }
}

/// Equality of Kubernetes objects: O(1) for IPs, CIDRs, quantities, semvers and authorization
/// objects, bounded by the format or URL size for those.
fn equality(lhs: &Node, rhs: &Node) -> Option<CallEstimate> {
    if lhs.ty.type_name() != rhs.ty.type_name() {
        return None;
    }
    match &lhs.ty {
        CelType::Opaque(name, _) if name == "net.IP" || name == "net.CIDR" => nominal(),
        CelType::Struct(name) => match name.as_str() {
            "kubernetes.Quantity"
            | "kubernetes.Semver"
            | "kubernetes.authorization.Authorizer"
            | "kubernetes.authorization.PathCheck"
            | "kubernetes.authorization.GroupCheck"
            | "kubernetes.authorization.ResourceCheck"
            | "kubernetes.authorization.Decision" => nominal(),
            "kubernetes.NamedFormat" => Some(CallEstimate::cost(
                Cost {
                    min: 1,
                    max: MAX_FORMAT_SIZE,
                }
                .by_factor(STRING_TRAVERSAL),
            )),
            // cel-go reads the right-hand size twice here (a bug kept for agreement).
            "kubernetes.URL" => {
                let max = rhs.computed.map_or(1, |s| s.max);
                Some(CallEstimate::cost(Cost { min: 1, max }.by_factor(STRING_TRAVERSAL)))
            }
            _ => None,
        },
        _ => None,
    }
}

/// `replace`: the traversal, and the longest and shortest results.
fn replace(size: Size, from: Size, to: Size) -> Option<CallEstimate> {
    let (mut count, mut retained) = (Size::fixed(0), Size::fixed(0));
    if from.min == 0 {
        count.max = if size.max < u64::MAX { size.max + 1 } else { size.max };
        retained.max = size.max;
    } else if to.max <= from.min {
        retained.max = size.max;
    } else {
        count.max = (size.max as f64 / from.min as f64).ceil() as u64;
    }
    if from.max == 0 {
        count.min = if size.min < u64::MAX { size.min + 1 } else { size.min };
        retained.min = size.min;
    } else if from.max <= to.min {
        retained.min = size.min;
    } else {
        count.min = (size.min as f64 / from.max as f64).ceil() as u64;
    }
    Some(CallEstimate {
        cost: size.by_factor(2.0 * STRING_TRAVERSAL),
        result_size: Some(count.multiply(to).add(retained)),
    })
}
