//! Compiled selectors and their cache. The environment is built once; each distinct expression
//! is checked, cost-estimated and compiled once per cache and shared, so a claim stream that
//! repeats the same class selectors pays for that only the first time.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use cel::parser::Expression;
use cel::{Env, Value};

use crate::deep_stack::on_deep_stack;
use crate::device::DeviceContext;
use crate::release::KubernetesRelease;
use crate::{CelError, check, cost, kubernetes_library};

/// The Kubernetes DRA CEL environment: the CEL standard library with optional syntax, the
/// strings and lists extensions, `cel.bind`, and the quantity and semver libraries.
// Registers a fixed set of distinct macros, extensions and functions into a fresh environment,
// which cannot collide; every selector test builds it.
#[allow(clippy::expect_used)]
pub fn dra_environment() -> Arc<Env> {
    let mut env = Env::stdlib();
    env.add_macro(check::bind_macro()).expect("cel.bind registers once");
    env.add_extension(cel::extensions::strings)
        .expect("strings extension registers once");
    env.add_extension(cel::extensions::lists)
        .expect("lists extension registers once");
    kubernetes_library::register(&mut env).expect("kubernetes libraries register once");
    Arc::new(env)
}

/// One compiled selector expression.
#[derive(Debug)]
pub struct CompiledSelector {
    expression: String,
    program: Expression,
    max_cost: u64,
}

impl CompiledSelector {
    /// Evaluates the selector for one device. A result that is not a bool, or any runtime error
    /// (a missing attribute, a failed conversion), is an error that carries the CEL text.
    pub fn matches(&self, device: &DeviceContext) -> Result<bool, CelError> {
        match Value::resolve(&self.program, device.context()) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::runtime(
                &self.expression,
                format!(
                    "CEL result of type {:?} could not be converted to bool",
                    other.type_of()
                ),
            )),
            Err(e) => Err(CelError::runtime(&self.expression, e.to_string())),
        }
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The worst-case cost estimated at compile time, as cel-go's estimator gives it (the API
    /// server's `MaxCost`); at most [`MAX_COST`].
    pub fn max_cost(&self) -> u64 {
        self.max_cost
    }
}

/// Checks `expression` as the API server of `release` checks a new selector (length, parse,
/// types, validators, result type) and returns its estimated worst-case cost, without applying
/// the cost limit.
pub fn estimate_max_cost(expression: &str, release: KubernetesRelease) -> Result<u64, CelError> {
    on_deep_stack(expression, || checked_max_cost(expression, release))
}

fn checked_max_cost(expression: &str, release: KubernetesRelease) -> Result<u64, CelError> {
    if expression.len() > MAX_EXPRESSION_LENGTH {
        return Err(CelError::compile(
            expression,
            format!("expression is longer than {MAX_EXPRESSION_LENGTH} characters"),
        ));
    }
    let checked = check::check(expression, release).map_err(|message| CelError::compile(expression, message))?;
    Ok(cost::max_cost(&checked.expr, &checked.checked, release))
}

/// Compiled expressions by their text. Thread-safe; compile errors are cached too, so a broken
/// class is reported the same way every time without recompiling it.
pub struct SelectorCache {
    env: Arc<Env>,
    release: KubernetesRelease,
    compiled: RwLock<HashMap<String, Result<Arc<CompiledSelector>, CelError>>>,
}

impl Default for SelectorCache {
    fn default() -> Self {
        SelectorCache::new()
    }
}

impl SelectorCache {
    /// A cache that checks selectors as the newest verified release does
    /// ([`KubernetesRelease::default`]).
    pub fn new() -> SelectorCache {
        SelectorCache::for_release(KubernetesRelease::default())
    }

    /// A cache that checks selectors as the API server of `release` checks new ones.
    pub fn for_release(release: KubernetesRelease) -> SelectorCache {
        SelectorCache {
            env: dra_environment(),
            release,
            compiled: RwLock::new(HashMap::new()),
        }
    }

    pub fn release(&self) -> KubernetesRelease {
        self.release
    }

    /// The environment device contexts must be built with.
    pub fn env(&self) -> &Arc<Env> {
        &self.env
    }

    /// Builds the `device` variable for one device.
    pub fn device_context(
        &self,
        driver: &str,
        device: &k8s_openapi::api::resource::v1::Device,
    ) -> Result<DeviceContext, CelError> {
        DeviceContext::new(&self.env, driver, device)
    }

    /// The compiled form of `expression`, compiling it on first use.
    pub fn get_or_compile(&self, expression: &str) -> Result<Arc<CompiledSelector>, CelError> {
        if let Some(found) = self
            .compiled
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(expression)
        {
            return found.clone();
        }
        let result = self.compile(expression);
        self.compiled
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(expression.to_owned(), result.clone());
        result
    }

    /// Checks types and the estimated cost first, as the API server does, so a selector the
    /// scheduler's environment would refuse is refused here with cel-go's message.
    fn compile(&self, expression: &str) -> Result<Arc<CompiledSelector>, CelError> {
        on_deep_stack(expression, || {
            let max_cost = checked_max_cost(expression, self.release)?;
            if max_cost > MAX_COST {
                return Err(CelError::compile(
                    expression,
                    format!("too complex, exceeds cost limit: estimated cost {max_cost} exceeds {MAX_COST}"),
                ));
            }
            let program = self
                .env
                .parser()
                .max_recursion_depth(check::MAX_RECURSION_DEPTH)
                .enable_ident_escape_syntax(true)
                .parse(expression)
                .map_err(|e| CelError::compile(expression, e.to_string()))?;
            Ok(Arc::new(CompiledSelector {
                expression: expression.to_owned(),
                program,
                max_cost,
            }))
        })
    }

    /// How many distinct expressions are cached.
    pub fn len(&self) -> usize {
        self.compiled.read().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `CELSelectorExpressionMaxLength` of resource.k8s.io/v1.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// `CELSelectorExpressionMaxCost` of resource.k8s.io/v1: the largest estimated cost the API
/// server accepts for a selector.
pub const MAX_COST: u64 = 1_000_000;
