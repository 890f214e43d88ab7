//! Random selectors over the grammar DRA selectors use: typed productions over `device`, its
//! attributes and capacities, strings, lists, quantities, semvers and comprehensions (nested ones
//! cross the cost limit), with a few type errors, typos and arity mistakes mixed in.

use allocator_workloads::Rng;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Ty {
    Bool,
    Int,
    Str,
    ListInt,
    ListStr,
    Attrs,
    Any,
    Quantity,
    Semver,
}

const ALL: [Ty; 9] = [
    Ty::Bool,
    Ty::Int,
    Ty::Str,
    Ty::ListInt,
    Ty::ListStr,
    Ty::Attrs,
    Ty::Any,
    Ty::Quantity,
    Ty::Semver,
];
const NAMES: [&str; 5] = ["deviceType", "migProfile", "ccMajor", "productName", "driverVersion"];
const STRINGS: [&str; 7] = ["", "a", "MIG", "gpu.deckhouse.io", "2g.12gb", "é-x", "NVIDIA A100"];

struct Gen<'r> {
    rng: &'r mut Rng,
    vars: Vec<(String, Ty)>,
    next_var: usize,
}

pub fn selector(rng: &mut Rng) -> String {
    let mut g = Gen {
        rng,
        vars: Vec::new(),
        next_var: 0,
    };
    g.expr(Ty::Bool, 4)
}

impl Gen<'_> {
    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[self.rng.below(choices.len() as u64) as usize]
    }

    fn string(&mut self) -> String {
        format!("{:?}", self.pick(&STRINGS))
    }

    fn expr(&mut self, ty: Ty, depth: u32) -> String {
        if self.rng.chance(2) {
            return self.mistake(depth);
        }
        if self.rng.chance(3) {
            let other = ALL[self.rng.below(ALL.len() as u64) as usize];
            return self.expr(other, depth.saturating_sub(1));
        }
        let vars: Vec<String> = self
            .vars
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n.clone())
            .collect();
        if !vars.is_empty() && self.rng.chance(35) {
            return vars[self.rng.below(vars.len() as u64) as usize].clone();
        }
        if depth == 0 || self.rng.chance(25) {
            return self.leaf(ty);
        }
        self.compound(ty, depth - 1)
    }

    fn leaf(&mut self, ty: Ty) -> String {
        let name = self.pick(&NAMES);
        match ty {
            Ty::Bool => self
                .pick(&["true", "false", "device.allowMultipleAllocations"])
                .to_owned(),
            Ty::Int => self.pick(&["0", "1", "8", "-3", "1000", "64"]).to_owned(),
            Ty::Str => match self.rng.below(3) {
                0 => "device.driver".to_owned(),
                _ => self.string(),
            },
            Ty::ListInt => self.pick(&["[1, 2, 3]", "[]", "[8, 9]", "lists.range(40)"]).to_owned(),
            Ty::ListStr => self.pick(&[r#"["a", "b"]"#, r#"["MIG"]"#, "[]"]).to_owned(),
            Ty::Attrs => self
                .pick(&[
                    r#"device.attributes["gpu.deckhouse.io"]"#,
                    r#"device.attributes[device.driver]"#,
                    r#"device.attributes["resource.kubernetes.io"]"#,
                ])
                .to_owned(),
            Ty::Any => match self.rng.below(3) {
                0 => format!(r#"device.attributes["gpu.deckhouse.io"]["{name}"]"#),
                _ => format!(r#"device.attributes["gpu.deckhouse.io"].{name}"#),
            },
            Ty::Quantity => self
                .pick(&[
                    r#"device.capacity["gpu.deckhouse.io"].memory"#,
                    r#"quantity("1Gi")"#,
                    r#"quantity("20G")"#,
                ])
                .to_owned(),
            Ty::Semver => self.pick(&[r#"semver("1.2.3")"#, r#"semver("550.0.0")"#]).to_owned(),
        }
    }

    /// A comprehension over a fresh variable: `range.macro(v, body)`.
    fn comprehension(&mut self, range_ty: Ty, var_ty: Ty, depth: u32, macros: &[&str], body_ty: Ty) -> String {
        let range = self.expr(range_ty, depth);
        let var = format!("v{}", self.next_var);
        self.next_var += 1;
        self.vars.push((var.clone(), var_ty));
        let body = self.expr(body_ty, depth);
        self.vars.pop();
        format!("{range}.{}({var}, {body})", self.pick(macros))
    }

    fn compound(&mut self, ty: Ty, d: u32) -> String {
        let quantifiers = ["exists", "all", "exists_one"];
        match ty {
            Ty::Bool => match self.rng.below(20) {
                0 => format!("{} && {}", self.expr(Ty::Bool, d), self.expr(Ty::Bool, d)),
                1 => format!("({} || {})", self.expr(Ty::Bool, d), self.expr(Ty::Bool, d)),
                2 => format!("!{}", self.expr(Ty::Bool, d)),
                3 => format!(
                    "{} {} {}",
                    self.expr(Ty::Int, d),
                    self.pick(&["<", "<=", ">", ">=", "==", "!="]),
                    self.expr(Ty::Int, d)
                ),
                4 => format!(
                    "{} {} {}",
                    self.expr(Ty::Str, d),
                    self.pick(&["==", "!=", "<"]),
                    self.expr(Ty::Str, d)
                ),
                5 => format!("{} == {}", self.expr(Ty::Any, d), self.leaf(Ty::Str)),
                6 => format!(
                    "{}.{}({})",
                    self.expr(Ty::Str, d),
                    self.pick(&["startsWith", "endsWith", "contains"]),
                    self.expr(Ty::Str, d)
                ),
                7 => format!(
                    "{}.matches({:?})",
                    self.expr(Ty::Str, d),
                    self.pick(&["^a", "[0-9]+", "(", "a|b"])
                ),
                8 => format!("{} in {}", self.expr(Ty::Str, d), self.expr(Ty::ListStr, d)),
                9 => format!("{} in {}", self.string(), self.expr(Ty::Attrs, d)),
                10 => self.comprehension(Ty::ListInt, Ty::Int, d, &quantifiers, Ty::Bool),
                11 => self.comprehension(Ty::Attrs, Ty::Str, d, &quantifiers, Ty::Bool),
                12 => self.comprehension(Ty::ListStr, Ty::Str, d, &quantifiers, Ty::Bool),
                13 => format!(
                    "{} ? {} : {}",
                    self.expr(Ty::Bool, d),
                    self.expr(Ty::Bool, d),
                    self.expr(Ty::Bool, d)
                ),
                14 => format!(
                    "{}.{}({})",
                    self.expr(Ty::Quantity, d),
                    self.pick(&["isGreaterThan", "isLessThan"]),
                    self.expr(Ty::Quantity, d)
                ),
                15 => format!("{}.isLessThan({})", self.expr(Ty::Semver, d), self.expr(Ty::Semver, d)),
                16 => {
                    let var = format!("v{}", self.next_var);
                    self.next_var += 1;
                    let init = self.expr(Ty::Attrs, d);
                    self.vars.push((var.clone(), Ty::Attrs));
                    let body = self.expr(Ty::Bool, d);
                    self.vars.pop();
                    format!("cel.bind({var}, {init}, {body})")
                }
                17 => {
                    let (k, v) = (format!("v{}", self.next_var), format!("v{}", self.next_var + 1));
                    self.next_var += 2;
                    let range = self.expr(Ty::Attrs, d);
                    self.vars.extend([(k.clone(), Ty::Str), (v.clone(), Ty::Any)]);
                    let body = self.expr(Ty::Bool, d);
                    self.vars.truncate(self.vars.len() - 2);
                    format!("{range}.{}({k}, {v}, {body})", self.pick(&quantifiers))
                }
                18 => format!("has({}.{})", self.expr(Ty::Attrs, d), self.pick(&NAMES)),
                _ => format!(
                    "{}.{}()",
                    self.expr(Ty::ListInt, d),
                    self.pick(&["isSorted", "distinct().isSorted", "sort().isSorted"])
                ),
            },
            Ty::Int => match self.rng.below(12) {
                0 => format!(
                    "({} {} {})",
                    self.expr(Ty::Int, d),
                    self.pick(&["+", "-", "*", "/", "%"]),
                    self.expr(Ty::Int, d)
                ),
                1 => format!("{}.size()", self.expr(Ty::Str, d)),
                2 => format!("size({})", self.expr(Ty::ListStr, d)),
                3 => format!("{}.size()", self.expr(Ty::Attrs, d)),
                4 => format!(
                    "{}.compareTo({})",
                    self.expr(Ty::Quantity, d),
                    self.expr(Ty::Quantity, d)
                ),
                5 => format!("{}.asInteger()", self.expr(Ty::Quantity, d)),
                6 => format!("{}.major()", self.expr(Ty::Semver, d)),
                7 => format!("{}[0]", self.expr(Ty::ListInt, d)),
                8 => format!("int({})", self.expr(Ty::Any, d)),
                9 => format!("{}.sum()", self.expr(Ty::ListInt, d)),
                10 => format!("{}.indexOf({})", self.expr(Ty::Str, d), self.expr(Ty::Str, d)),
                _ => format!("{}.size()", self.expr(Ty::ListInt, d)),
            },
            Ty::Str => match self.rng.below(10) {
                0 => format!("{} + {}", self.expr(Ty::Str, d), self.expr(Ty::Str, d)),
                1 => format!(
                    "{}.{}()",
                    self.expr(Ty::Str, d),
                    self.pick(&["lowerAscii", "upperAscii", "trim"])
                ),
                2 => format!("{}.substring({})", self.expr(Ty::Str, d), self.expr(Ty::Int, d)),
                3 => format!(
                    "{}.replace({}, {})",
                    self.expr(Ty::Str, d),
                    self.expr(Ty::Str, d),
                    self.expr(Ty::Str, d)
                ),
                4 => format!("{}.join({})", self.expr(Ty::ListStr, d), self.string()),
                5 => format!("string({})", self.expr(Ty::Any, d)),
                6 => format!("{}[0]", self.expr(Ty::ListStr, d)),
                7 => format!(
                    "{} ? {} : {}",
                    self.expr(Ty::Bool, d),
                    self.expr(Ty::Str, d),
                    self.expr(Ty::Str, d)
                ),
                8 => format!("{}.charAt(0)", self.expr(Ty::Str, d)),
                _ => format!(
                    "\"%s-%d\".format([{}, {}])",
                    self.expr(Ty::Str, d),
                    self.expr(Ty::Int, d)
                ),
            },
            Ty::ListInt => match self.rng.below(6) {
                0 => self.comprehension(Ty::ListInt, Ty::Int, d, &["map"], Ty::Int),
                1 => self.comprehension(Ty::ListInt, Ty::Int, d, &["filter"], Ty::Bool),
                2 => format!("{} + {}", self.expr(Ty::ListInt, d), self.expr(Ty::ListInt, d)),
                3 => format!("[{}, {}]", self.expr(Ty::Int, d), self.expr(Ty::Int, d)),
                4 => format!("{}.slice(0, 1)", self.expr(Ty::ListInt, d)),
                _ => format!(
                    "{}.{}()",
                    self.expr(Ty::ListInt, d),
                    self.pick(&["reverse", "distinct", "sort"])
                ),
            },
            Ty::ListStr => match self.rng.below(5) {
                0 => format!("{}.split({})", self.expr(Ty::Str, d), self.string()),
                1 => self.comprehension(Ty::Attrs, Ty::Str, d, &["map", "filter"], Ty::Str),
                2 => self.comprehension(Ty::ListStr, Ty::Str, d, &["map"], Ty::Str),
                3 => format!("[{}, {}]", self.expr(Ty::Str, d), self.expr(Ty::Str, d)),
                _ => format!("{}.sortBy(s, s)", self.expr(Ty::ListStr, d)),
            },
            Ty::Attrs => format!("device.attributes[{}]", self.expr(Ty::Str, d)),
            Ty::Any => format!("{}[{}]", self.expr(Ty::Attrs, d), self.expr(Ty::Str, d)),
            Ty::Quantity => match self.rng.below(3) {
                0 => format!("{}.add({})", self.expr(Ty::Quantity, d), self.expr(Ty::Quantity, d)),
                1 => format!("{}.sub({})", self.expr(Ty::Quantity, d), self.expr(Ty::Int, d)),
                _ => format!("quantity({})", self.expr(Ty::Str, d)),
            },
            Ty::Semver => format!("semver({})", self.expr(Ty::Str, d)),
        }
    }

    /// An error the API server must refuse, or a near miss it may accept.
    fn mistake(&mut self, depth: u32) -> String {
        let inner = self.expr(Ty::Str, depth.saturating_sub(1));
        match self.rng.below(6) {
            0 => "device.drvier".to_owned(),
            1 => format!("foo.{}", self.pick(&NAMES)),
            2 => format!("{inner}.startsWith()"),
            3 => format!("unknownFunction({inner})"),
            4 => format!("{inner}.size(1)"),
            _ => format!(
                r#"device.attributes["gpu.deckhouse.io"].{}.{}"#,
                self.pick(&NAMES),
                self.pick(&NAMES)
            ),
        }
    }
}
