//! The strings extension's static check of `"<literal>".format([<list literal>])` (cel-go
//! `ext/formatting.go`, `stringFormatValidator`): clauses must parse, name arguments that exist,
//! and fit their arguments' types; no argument may be left over.

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use super::checker::{Checked, Issue};
use super::types::{CelType, Kind};

pub(crate) fn validate_format_call(e: &IdedExpr, call: &CallExpr, checked: &Checked, issues: &mut Vec<Issue>) {
    let resolves_to_format = checked
        .overloads
        .get(&e.id)
        .is_none_or(|ids| ids.iter().any(|id| id == "string_format"));
    let Some(Expr::Literal(LiteralValue::String(format))) = call.target.as_ref().map(|t| &t.expr) else {
        return;
    };
    let [args] = &call.args[..] else { return };
    let (true, Expr::List(list)) = (resolves_to_format, &args.expr) else {
        return;
    };
    let checker = FormatChecker {
        args: &list.elements,
        checked,
    };
    match checker.check(format.inner()) {
        Err((id, message)) => issues.push(Issue {
            id: id.unwrap_or(e.id),
            message,
        }),
        Ok(requested) if list.elements.len() > requested => issues.push(Issue {
            id: e.id,
            message: format!(
                "too many arguments supplied to string.format (expected {requested}, got {})",
                list.elements.len()
            ),
        }),
        Ok(_) => {}
    }
}

struct FormatChecker<'a> {
    args: &'a [IdedExpr],
    checked: &'a Checked,
}

type Failure = (Option<u64>, String);

impl FormatChecker<'_> {
    fn type_of(&self, id: u64) -> CelType {
        self.checked.types.get(&id).cloned().unwrap_or(CelType::Dyn)
    }

    fn one_of(&self, id: u64, kinds: &[Kind]) -> bool {
        let t = self.type_of(id);
        t == CelType::Dyn || kinds.contains(&t.kind())
    }

    /// `parseFormatString` with the checking interpolator: the number of arguments requested.
    fn check(&self, format: &str) -> Result<usize, Failure> {
        let bytes = format.as_bytes();
        let (mut i, mut requested) = (0usize, 0usize);
        while i < bytes.len() {
            if bytes.get(i) != Some(&b'%') {
                i += 1;
                continue;
            }
            if bytes.get(i + 1) == Some(&b'%') {
                i += 2;
                continue;
            }
            let index = requested;
            requested += 1;
            if i + 1 >= bytes.len() {
                return Err((None, "unexpected end of string".to_owned()));
            }
            let Some(arg) = self.args.get(index) else {
                return Err((None, format!("index {index} out of range")));
            };
            let mut j = i + 1;
            if bytes.get(j) == Some(&b'.') {
                j += 1;
                let digits = bytes.iter().skip(j).take_while(|b| b.is_ascii_digit()).count();
                if digits == 0 && j < bytes.len() {
                    let message = "error while converting precision to integer";
                    return Err((None, format!("could not parse formatting clause: {message}")));
                }
                if j + digits >= bytes.len() {
                    let message = "could not find end of precision specifier";
                    return Err((
                        None,
                        format!("could not parse formatting clause: error while parsing precision: {message}"),
                    ));
                }
                j += digits;
            }
            // `j` is before the end: checked above for the verb and for the precision's end.
            let Some(&clause) = bytes.get(j) else {
                return Err((None, "unexpected end of string".to_owned()));
            };
            self.check_clause(clause, arg)?;
            i = j + 1;
        }
        Ok(requested)
    }

    fn check_clause(&self, clause: u8, arg: &IdedExpr) -> Result<(), Failure> {
        let id = arg.id;
        let given = || self.type_of(id).type_name().to_owned();
        let fail = |what: &str| {
            Err((
                Some(id),
                format!("error during formatting: {what}, was given {}", given()),
            ))
        };
        match clause {
            b's' => self.verify_string(arg).map_err(|bad| {
                let message = "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps";
                (Some(bad), format!("error during formatting: {message}, was given {}", self.type_of(bad).type_name()))
            }),
            b'd' if !self.one_of(id, &[Kind::Int, Kind::Uint]) => fail("decimal clause can only be used on integers"),
            b'f' if !self.one_of(id, &[Kind::Double, Kind::String]) => {
                fail("fixed-point clause can only be used on doubles")
            }
            b'e' if !self.one_of(id, &[Kind::Double, Kind::String]) => {
                fail("scientific clause can only be used on doubles")
            }
            b'b' if !self.one_of(id, &[Kind::Int, Kind::Uint, Kind::Bool]) => {
                fail("only integers and bools can be formatted as binary")
            }
            b'x' | b'X' if !self.one_of(id, &[Kind::Int, Kind::Uint, Kind::String, Kind::Bytes]) => {
                fail("only integers, byte buffers, and strings can be formatted as hex")
            }
            b'o' if !self.one_of(id, &[Kind::Int, Kind::Uint]) => fail("octal clause can only be used on integers"),
            b'd' | b'f' | b'e' | b'b' | b'x' | b'X' | b'o' => Ok(()),
            other => Err((
                None,
                format!("could not parse formatting clause: unrecognized formatting clause \"{}\"", other as char),
            )),
        }
    }

    /// `verifyString`: a type `%s` can print, recursively through list and map literals.
    fn verify_string(&self, arg: &IdedExpr) -> Result<(), u64> {
        let printable = [
            Kind::List,
            Kind::Map,
            Kind::Int,
            Kind::Uint,
            Kind::Double,
            Kind::Bool,
            Kind::String,
            Kind::Timestamp,
            Kind::Bytes,
            Kind::Duration,
            Kind::Type,
            Kind::Null,
        ];
        if !self.one_of(arg.id, &printable) {
            return Err(arg.id);
        }
        match &arg.expr {
            Expr::List(list) => list.elements.iter().try_for_each(|e| self.verify_string(e)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(m) => self.verify_string(&m.key).and_then(|()| self.verify_string(&m.value)),
                EntryExpr::StructField(_) => Ok(()),
            }),
            _ => Ok(()),
        }
    }
}
