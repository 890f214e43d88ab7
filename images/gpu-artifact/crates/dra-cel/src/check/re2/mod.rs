//! Whether a pattern is a valid Go regular expression (RE2 syntax as Go's `regexp/syntax` parses
//! it with the Perl flags `regexp.Compile` uses), ported from its parser: the API server rejects
//! a selector whose constant pattern Go cannot compile, and Go's dialect differs from the
//! `regex` crate's both ways (`\Q..\E`, octal escapes and `a{,5}` are Go; `(?x)`, `a{1001}` and
//! `[[:foo:]]` are not).
//!
//! Unicode class names must be spelled as the `unicode` package's tables are (`\p{Greek}`): newer
//! Go releases also accept other spellings, older API servers do not.

/// `maxSize` of `regexp/syntax`: 128 MiB of 40-byte instructions.
const MAX_SIZE: u64 = (128 << 20) / 40;
const MAX_HEIGHT: usize = 1000;
const MAX_REPEAT: i64 = 1000;

mod tokens;

use tokens::{class, counted_repeat, escape_outside_class, perl_flags};

/// The parsed shape, as far as Go's limits need it.
#[derive(Clone, Debug)]
enum Node {
    /// A literal, class or assertion: size 1.
    Leaf,
    Concat(Vec<Node>),
    Alternate(Vec<Node>),
    Capture(Box<Node>),
    /// `*` (size 2 + sub) or `+`/`?` (size 1 + sub).
    Star(Box<Node>),
    PlusOrQuest(Box<Node>),
    Repeat(i64, i64, Box<Node>),
}

impl Node {
    fn size(&self) -> u64 {
        let size = match self {
            Node::Leaf => 1,
            Node::Concat(subs) => subs.iter().map(Node::size).sum(),
            Node::Alternate(subs) => subs.iter().map(Node::size).sum::<u64>() + subs.len().saturating_sub(1) as u64,
            Node::Capture(sub) | Node::Star(sub) => 2 + sub.size(),
            Node::PlusOrQuest(sub) => 1 + sub.size(),
            Node::Repeat(min, -1, sub) if *min == 0 => 2 + sub.size(),
            Node::Repeat(min, -1, sub) => 1 + (*min as u64).saturating_mul(sub.size()),
            Node::Repeat(min, max, sub) => (*max as u64).saturating_mul(sub.size()) + (max - min) as u64,
        };
        size.max(1)
    }

    fn height(&self) -> usize {
        1 + match self {
            Node::Leaf => 0,
            Node::Concat(subs) | Node::Alternate(subs) => subs.iter().map(Node::height).max().unwrap_or(0),
            Node::Capture(sub) | Node::Star(sub) | Node::PlusOrQuest(sub) | Node::Repeat(_, _, sub) => sub.height(),
        }
    }

    /// `repeatIsValid`: nested counted repetitions stay within `n` copies.
    fn repeat_is_valid(&self, mut n: i64) -> bool {
        if let Node::Repeat(min, max, _) = self {
            let m = if *max < 0 { *min } else { *max };
            if *max == 0 {
                return true;
            }
            if m > n {
                return false;
            }
            if m > 0 {
                n /= m;
            }
        }
        match self {
            Node::Leaf => true,
            Node::Concat(subs) | Node::Alternate(subs) => subs.iter().all(|s| s.repeat_is_valid(n)),
            Node::Capture(sub) | Node::Star(sub) | Node::PlusOrQuest(sub) | Node::Repeat(_, _, sub) => {
                sub.repeat_is_valid(n)
            }
        }
    }
}

/// The parse stack: expressions and the pseudo-operators `(` and `|`.
enum Item {
    Node(Node),
    Open { capture: bool },
    Bar,
}

/// Whether Go's `regexp.Compile` accepts `pattern`, with its error text when not.
pub(crate) fn validate(pattern: &str) -> Result<(), String> {
    let mut stack: Vec<Item> = Vec::new();
    let mut rest = pattern;
    let mut last_was_repeat = false;
    while let Some(c) = rest.chars().next() {
        let mut repeated = false;
        match c {
            '(' if rest.starts_with("(?") => {
                let (capture, after) = perl_flags(rest)?;
                rest = after;
                if let Some(capture) = capture {
                    stack.push(Item::Open { capture });
                }
            }
            '(' => {
                stack.push(Item::Open { capture: true });
                rest = &rest[1..];
            }
            '|' => {
                close_alternative(&mut stack);
                stack.push(Item::Bar);
                rest = &rest[1..];
            }
            ')' => {
                let node = close_group(&mut stack)?;
                match stack.pop() {
                    Some(Item::Open { capture }) => {
                        stack.push(Item::Node(if capture { Node::Capture(Box::new(node)) } else { node }))
                    }
                    _ => return Err("unexpected )".to_owned()),
                }
                rest = &rest[1..];
            }
            '*' | '+' | '?' | '{' => {
                let (bounds, after) = match c {
                    '{' => match counted_repeat(rest) {
                        Some((bounds, after)) => (Some(bounds), after),
                        None => {
                            stack.push(Item::Node(Node::Leaf));
                            rest = &rest[1..];
                            last_was_repeat = false;
                            continue;
                        }
                    },
                    _ => (None, &rest[1..]),
                };
                let after = after.strip_prefix('?').unwrap_or(after);
                if last_was_repeat {
                    return Err("invalid nested repetition operator".to_owned());
                }
                let Some(Item::Node(sub)) = stack.pop() else {
                    return Err("missing argument to repetition operator".to_owned());
                };
                let node = match (c, bounds) {
                    ('*', _) => Node::Star(Box::new(sub)),
                    ('+' | '?', _) => Node::PlusOrQuest(Box::new(sub)),
                    (_, Some((min, max))) => {
                        if !(0..=MAX_REPEAT).contains(&min) || max > MAX_REPEAT || (max >= 0 && min > max) {
                            return Err("invalid repeat count".to_owned());
                        }
                        let node = Node::Repeat(min, max, Box::new(sub));
                        if (min >= 2 || max >= 2) && !node.repeat_is_valid(MAX_REPEAT) {
                            return Err("invalid repeat count".to_owned());
                        }
                        node
                    }
                    _ => unreachable!("a counted repeat has bounds"),
                };
                check_limits(&node)?;
                stack.push(Item::Node(node));
                rest = after;
                repeated = true;
            }
            '[' => {
                rest = class(rest)?;
                stack.push(Item::Node(Node::Leaf));
            }
            '\\' => {
                let (after, literal) = escape_outside_class(rest)?;
                rest = after;
                if literal {
                    stack.push(Item::Node(Node::Leaf));
                }
            }
            _ => {
                rest = &rest[c.len_utf8()..];
                stack.push(Item::Node(Node::Leaf));
            }
        }
        last_was_repeat = repeated;
    }
    let node = close_group(&mut stack)?;
    if !stack.is_empty() {
        return Err("missing closing )".to_owned());
    }
    check_limits(&node)
}

fn check_limits(node: &Node) -> Result<(), String> {
    if node.size() > MAX_SIZE {
        return Err("expression too large".to_owned());
    }
    if node.height() > MAX_HEIGHT {
        return Err("expression nests too deeply".to_owned());
    }
    Ok(())
}

/// Collapses the nodes above the topmost `(` or `|` into one concatenation.
fn close_alternative(stack: &mut Vec<Item>) {
    let start = stack
        .iter()
        .rposition(|i| !matches!(i, Item::Node(_)))
        .map_or(0, |p| p + 1);
    let mut parts: Vec<Node> = stack
        .drain(start..)
        .map(|i| match i {
            Item::Node(n) => n,
            _ => unreachable!("only nodes above the pseudo-operator"),
        })
        .collect();
    stack.push(Item::Node(match parts.len() {
        0 => Node::Leaf,
        1 => parts.remove(0),
        _ => Node::Concat(parts),
    }));
}

/// Collapses everything above the topmost `(` into one alternation.
fn close_group(stack: &mut Vec<Item>) -> Result<Node, String> {
    close_alternative(stack);
    let mut alternatives = Vec::new();
    loop {
        match stack.pop() {
            Some(Item::Node(n)) => alternatives.push(n),
            Some(Item::Bar) => {}
            Some(open @ Item::Open { .. }) => {
                stack.push(open);
                break;
            }
            None => break,
        }
    }
    alternatives.reverse();
    Ok(match alternatives.len() {
        1 => alternatives.remove(0),
        _ => Node::Alternate(alternatives),
    })
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn go_syntax_is_accepted_where_the_regex_crate_differs() {
        for pattern in [
            r"\Qa.b\E",
            r"a{,5}",
            r"\07",
            r"(?)",
            r"[\d-z]",
            r"\p{^Greek}",
            r"(?P<n>a)",
            r"a*?",
            r"x{1000}",
        ] {
            assert_eq!(validate(pattern), Ok(()), "{pattern}");
        }
    }

    #[test]
    fn what_go_refuses_is_refused() {
        for pattern in [
            r"(?x)a",
            r"a{1001}",
            r"a**",
            r"[[:foo:]]",
            r"a{1000}{2}",
            r"(a{1000}){1000}",
            r"\C",
            r"[z-a]",
            r"\8",
            "(",
            ")",
            r"\p{Foo}",
            r"\Q\E{2}",
        ] {
            assert!(validate(pattern).is_err(), "{pattern}");
        }
        // Conservative: spellings only newer Go releases take.
        assert!(validate(r"\p{greek}").is_err());
    }
}
