//! What the API server's environment for new DRA selectors declares: the `device` variable and
//! its object type (`kubernetes.DRADevice` of k8s.io/dynamic-resource-allocation/cel
//! compile.go, with `allowMultipleAllocations` as the test bed's DRAConsumableCapacity gate
//! adds it), the type identifiers, and every function overload (declarations.tsv, listed from
//! the real environment).

use std::collections::HashMap;
use std::sync::LazyLock;

use super::types::CelType;
use crate::release::KubernetesRelease;

const TABLE: &str = include_str!("declarations.tsv");

/// The object type of the `device` variable.
pub(crate) const DEVICE_TYPE: &str = "kubernetes.DRADevice";
pub(crate) const QUANTITY_TYPE: &str = "kubernetes.Quantity";

/// One overload of a function.
#[derive(Clone, Debug)]
pub(crate) struct Overload {
    pub(crate) id: String,
    pub(crate) member: bool,
    /// Argument types, the receiver first for a member overload.
    pub(crate) args: Vec<CelType>,
    pub(crate) result: CelType,
    pub(crate) params: Vec<String>,
}

/// The functions of one release, by name, overloads in declaration order.
pub(crate) struct Declarations {
    functions: HashMap<String, Vec<Overload>>,
    /// Function names in table order, for listing.
    order: Vec<String>,
}

static DECLARATIONS: LazyLock<[Declarations; 2]> = LazyLock::new(|| {
    [KubernetesRelease::V1_34, KubernetesRelease::V1_37].map(|release| Declarations::parse(release.table_tag()))
});

pub(crate) fn declarations(release: KubernetesRelease) -> &'static Declarations {
    let [v1_34, v1_37] = &*DECLARATIONS;
    match release {
        KubernetesRelease::V1_34 => v1_34,
        KubernetesRelease::V1_37 => v1_37,
    }
}

impl Declarations {
    fn parse(tag: &str) -> Declarations {
        let mut functions: HashMap<String, Vec<Overload>> = HashMap::new();
        let mut order = Vec::new();
        for line in TABLE.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let fields: Vec<&str> = line.split('\t').collect();
            let [release, style, name, id, args, result, params] = fields[..] else {
                panic!("declarations.tsv: malformed line {line:?}");
            };
            if release != "*" && release != tag {
                continue;
            }
            let ty = |text: &str| parse_type(text).unwrap_or_else(|| panic!("declarations.tsv: bad type {text:?}"));
            let overload = Overload {
                id: id.to_owned(),
                member: style == "member",
                args: args.split("; ").filter(|a| !a.is_empty()).map(ty).collect(),
                result: ty(result),
                params: params.split(',').filter(|p| !p.is_empty()).map(str::to_owned).collect(),
            };
            if !functions.contains_key(name) {
                order.push(name.to_owned());
            }
            functions.entry(name.to_owned()).or_default().push(overload);
        }
        Declarations { functions, order }
    }

    pub(crate) fn function(&self, name: &str) -> Option<&[Overload]> {
        self.functions.get(name).map(Vec::as_slice)
    }

    /// Every overload as (function, overload), in table order.
    pub(crate) fn all(&self) -> impl Iterator<Item = (&str, &Overload)> {
        self.order.iter().flat_map(move |name| {
            self.functions
                .get(name)
                .into_iter()
                .flatten()
                .map(move |o| (name.as_str(), o))
        })
    }
}

/// The type of a global identifier: the `device` variable or a type name.
pub(crate) fn identifier(name: &str) -> Option<CelType> {
    let type_of = |t: CelType| Some(CelType::Type(Some(Box::new(t))));
    match name {
        "device" => Some(CelType::Struct(DEVICE_TYPE.to_owned())),
        "bool" => type_of(CelType::Bool),
        "bytes" => type_of(CelType::Bytes),
        "double" => type_of(CelType::Double),
        "int" => type_of(CelType::Int),
        "uint" => type_of(CelType::Uint),
        "string" => type_of(CelType::String),
        "null_type" => type_of(CelType::Null),
        "type" => type_of(CelType::Type(None)),
        "list" => type_of(CelType::list(CelType::Param("A".to_owned()))),
        "map" => type_of(CelType::map(
            CelType::Param("A".to_owned()),
            CelType::Param("B".to_owned()),
        )),
        "google.protobuf.Duration" => type_of(CelType::Duration),
        "google.protobuf.Timestamp" => type_of(CelType::Timestamp),
        _ => None,
    }
}

/// The type of `field` of the object type `type_name`: `Err` when the type has no fields the
/// checker knows of, `Ok(None)` when it has no such field.
pub(crate) fn struct_field(type_name: &str, field: &str) -> Result<Option<CelType>, ()> {
    if type_name != DEVICE_TYPE {
        return Err(());
    }
    let attributes = CelType::map(CelType::String, CelType::map(CelType::String, CelType::Any));
    let quantity = CelType::Struct(QUANTITY_TYPE.to_owned());
    let capacity = CelType::map(CelType::String, CelType::map(CelType::String, quantity));
    Ok(match field {
        "driver" => Some(CelType::String),
        "allowMultipleAllocations" => Some(CelType::Bool),
        "attributes" => Some(attributes),
        "capacity" => Some(capacity),
        _ => None,
    })
}

/// One overload the checker declares, spelled as the Go harness lists the real environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredOverload {
    pub function: String,
    pub overload_id: String,
    pub member: bool,
    /// Argument types, the receiver first for a member overload (`list(~A)`, `struct:N`, ...).
    pub args: Vec<String>,
    pub result: String,
    pub type_params: Vec<String>,
}

/// Every function overload the checker declares for `release`, in declaration order.
pub fn declared_overloads(release: KubernetesRelease) -> Vec<DeclaredOverload> {
    declarations(release)
        .all()
        .map(|(name, o)| DeclaredOverload {
            function: name.to_owned(),
            overload_id: o.id.clone(),
            member: o.member,
            args: o.args.iter().map(declaration_spelling).collect(),
            result: declaration_spelling(&o.result),
            type_params: o.params.clone(),
        })
        .collect()
}

/// Parses the declaration table's spelling of a type: the names above, `~A` for a type parameter,
/// `struct:N`, `opaque:N` or `opaque:N(P, ...)`, `list(T)`, `map(K, V)`, `type` and `type(T)`.
pub(crate) fn parse_type(text: &str) -> Option<CelType> {
    let text = text.trim();
    let parameterized = text
        .split_once('(')
        .and_then(|(head, rest)| Some((head, rest.strip_suffix(')')?)));
    let (head, params) = match parameterized {
        Some((head, inner)) => (head, split_params(inner)?),
        None => (text, Vec::new()),
    };
    let one = |params: &[CelType]| match params {
        [only] => Some(Box::new(only.clone())),
        _ => None,
    };
    Some(match head {
        "list" => CelType::List(one(&params)?),
        "map" => match params.as_slice() {
            [key, value] => CelType::map(key.clone(), value.clone()),
            _ => return None,
        },
        "type" if params.is_empty() => CelType::Type(None),
        "type" => CelType::Type(Some(one(&params)?)),
        _ if !params.is_empty() && !head.starts_with("opaque:") => return None,
        "dyn" => CelType::Dyn,
        "any" => CelType::Any,
        "error" => CelType::Error,
        "null_type" => CelType::Null,
        "bool" => CelType::Bool,
        "int" => CelType::Int,
        "uint" => CelType::Uint,
        "double" => CelType::Double,
        "string" => CelType::String,
        "bytes" => CelType::Bytes,
        "google.protobuf.Duration" => CelType::Duration,
        "google.protobuf.Timestamp" => CelType::Timestamp,
        _ => {
            if let Some(name) = head.strip_prefix('~') {
                CelType::Param(name.to_owned())
            } else if let Some(name) = head.strip_prefix("struct:") {
                CelType::Struct(name.to_owned())
            } else {
                CelType::Opaque(head.strip_prefix("opaque:")?.to_owned(), params)
            }
        }
    })
}

fn split_params(text: &str) -> Option<Vec<CelType>> {
    let mut params = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                params.push(parse_type(&text[start..i])?);
                start = i + 1;
            }
            _ => {}
        }
    }
    params.push(parse_type(&text[start..])?);
    Some(params)
}

/// The declaration table's spelling of a type (inverse of [`parse_type`]).
pub(crate) fn declaration_spelling(t: &CelType) -> String {
    let params: Vec<String> = t.parameters().into_iter().map(declaration_spelling).collect();
    let head = match t {
        CelType::Any => "any".to_owned(),
        CelType::Error => "error".to_owned(),
        CelType::Param(name) => format!("~{name}"),
        CelType::Struct(name) => format!("struct:{name}"),
        CelType::Opaque(name, _) => format!("opaque:{name}"),
        other => other.type_name().to_owned(),
    };
    if params.is_empty() {
        head
    } else {
        format!("{head}({})", params.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declaration_spellings_round_trip() {
        for text in [
            "map(~K, list(opaque:optional_type(~V)))",
            "type(list(~A))",
            "struct:kubernetes.Quantity",
            "opaque:net.IP",
            "google.protobuf.Duration",
        ] {
            let parsed = parse_type(text).unwrap_or_else(|| panic!("{text} parses"));
            assert_eq!(declaration_spelling(&parsed), text);
        }
        assert_eq!(parse_type("list(int, int)"), None);
    }
}
