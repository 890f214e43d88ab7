//! CEL types as cel-go's checker sees them (`common/types.Type`): kinds, names, and the two
//! spellings cel-go uses in messages (`FormatCELType` for checker errors, `Type.String` for the
//! DRA result-type error).

use std::fmt;

/// A static CEL type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CelType {
    Dyn,
    /// `google.protobuf.Any`: what the DRA environment declares attribute values as. The checker
    /// treats it like `dyn`, but it is a type of its own for the result-type check.
    Any,
    Error,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List(Box<CelType>),
    Map(Box<CelType>, Box<CelType>),
    /// `type`, or `type(T)` for the type of a type value.
    Type(Option<Box<CelType>>),
    /// A type parameter of an overload, or a free type variable of the checker.
    Param(String),
    /// An object type (`kubernetes.DRADevice`, `kubernetes.Quantity`, ...).
    Struct(String),
    /// An abstract type with parameters (`optional_type(T)`, `net.IP`, `function(...)`).
    Opaque(String, Vec<CelType>),
}

/// The coarse category of a type, as `types.Kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dyn,
    Any,
    Error,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List,
    Map,
    Type,
    Param,
    Struct,
    Opaque,
}

impl CelType {
    pub(crate) fn list(elem: CelType) -> CelType {
        CelType::List(Box::new(elem))
    }

    pub(crate) fn map(key: CelType, value: CelType) -> CelType {
        CelType::Map(Box::new(key), Box::new(value))
    }

    pub(crate) fn optional(inner: CelType) -> CelType {
        CelType::Opaque("optional_type".to_owned(), vec![inner])
    }

    pub(crate) fn kind(&self) -> Kind {
        match self {
            CelType::Dyn => Kind::Dyn,
            CelType::Any => Kind::Any,
            CelType::Error => Kind::Error,
            CelType::Null => Kind::Null,
            CelType::Bool => Kind::Bool,
            CelType::Int => Kind::Int,
            CelType::Uint => Kind::Uint,
            CelType::Double => Kind::Double,
            CelType::String => Kind::String,
            CelType::Bytes => Kind::Bytes,
            CelType::Duration => Kind::Duration,
            CelType::Timestamp => Kind::Timestamp,
            CelType::List(_) => Kind::List,
            CelType::Map(..) => Kind::Map,
            CelType::Type(_) => Kind::Type,
            CelType::Param(_) => Kind::Param,
            CelType::Struct(_) => Kind::Struct,
            CelType::Opaque(..) => Kind::Opaque,
        }
    }

    /// The runtime type name (`TypeName()`).
    pub(crate) fn type_name(&self) -> &str {
        match self {
            CelType::Dyn => "dyn",
            CelType::Any => "google.protobuf.Any",
            CelType::Error => "*error*",
            CelType::Null => "null_type",
            CelType::Bool => "bool",
            CelType::Int => "int",
            CelType::Uint => "uint",
            CelType::Double => "double",
            CelType::String => "string",
            CelType::Bytes => "bytes",
            CelType::Duration => "google.protobuf.Duration",
            CelType::Timestamp => "google.protobuf.Timestamp",
            CelType::List(_) => "list",
            CelType::Map(..) => "map",
            CelType::Type(_) => "type",
            CelType::Param(name) | CelType::Struct(name) | CelType::Opaque(name, _) => name,
        }
    }

    pub(crate) fn parameters(&self) -> Vec<&CelType> {
        match self {
            CelType::List(e) => vec![e],
            CelType::Map(k, v) => vec![k, v],
            CelType::Type(Some(t)) => vec![t],
            CelType::Opaque(_, params) => params.iter().collect(),
            _ => Vec::new(),
        }
    }

    /// Rebuilds this type with `params` in place of its parameters (same count).
    pub(crate) fn with_parameters(&self, mut params: Vec<CelType>) -> CelType {
        match self {
            CelType::List(_) => CelType::list(params.remove(0)),
            CelType::Map(..) => {
                let value = params.remove(1);
                CelType::map(params.remove(0), value)
            }
            CelType::Type(Some(_)) => CelType::Type(Some(Box::new(params.remove(0)))),
            CelType::Opaque(name, _) => CelType::Opaque(name.clone(), params),
            other => other.clone(),
        }
    }

    /// `isDyn` of the checker: dyn or the well-known Any.
    pub(crate) fn is_dyn(&self) -> bool {
        matches!(self, CelType::Dyn | CelType::Any)
    }

    pub(crate) fn is_dyn_or_error(&self) -> bool {
        matches!(self, CelType::Dyn | CelType::Any | CelType::Error)
    }

    /// The inner type of `optional_type(T)`.
    pub(crate) fn optional_inner(&self) -> Option<&CelType> {
        match self {
            CelType::Opaque(name, params) if name == "optional_type" => match params.as_slice() {
                [inner] => Some(inner),
                _ => None,
            },
            _ => None,
        }
    }

    /// `IsEquivalentType`: equal, except that type parameters match whatever their names.
    pub(crate) fn is_equivalent(&self, other: &CelType) -> bool {
        if self.kind() != other.kind() {
            return false;
        }
        let (mine, theirs) = (self.parameters(), other.parameters());
        if mine.len() != theirs.len() || (self.kind() != Kind::Param && self.type_name() != other.type_name()) {
            return false;
        }
        mine.iter().zip(theirs).all(|(a, b)| a.is_equivalent(b))
    }

    /// `FormatCELType`: the spelling of checker error messages (`list(int)`, `null`, `any`).
    pub(crate) fn format(&self) -> String {
        match self {
            CelType::Any => "any".to_owned(),
            CelType::Duration => "duration".to_owned(),
            CelType::Error => "!error!".to_owned(),
            CelType::Null => "null".to_owned(),
            CelType::Timestamp => "timestamp".to_owned(),
            CelType::Param(name) => name.clone(),
            _ => self.spell(CelType::format),
        }
    }

    fn spell(&self, each: fn(&CelType) -> String) -> String {
        let params = self.parameters();
        if params.is_empty() {
            return self.type_name().to_owned();
        }
        let inner: Vec<String> = params.into_iter().map(each).collect();
        format!("{}({})", self.type_name(), inner.join(", "))
    }
}

/// `Type.String()`: the spelling of the DRA compiler's "must evaluate to bool" error.
impl fmt::Display for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CelType::Param(name) => write!(f, "<{name}>"),
            _ => f.write_str(&self.spell(|t| t.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_spell_types_as_cel_go_does() {
        let t = CelType::map(CelType::String, CelType::optional(CelType::Timestamp));
        assert_eq!(t.format(), "map(string, optional_type(timestamp))");
        assert_eq!(t.to_string(), "map(string, optional_type(google.protobuf.Timestamp))");
        assert_eq!(CelType::Null.format(), "null");
        assert_eq!(CelType::Param("_var0".into()).to_string(), "<_var0>");
    }
}
