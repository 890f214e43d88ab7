//! Compiled selectors and their cache. The environment is built once; each distinct expression
//! is compiled once per cache and shared, so a claim stream that repeats the same class
//! selectors pays for parsing only the first time.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use cel::{Env, Program, Value};

use crate::device::DeviceContext;
use crate::{CelError, kubernetes_library};

/// The Kubernetes DRA CEL environment: the CEL standard library with optional syntax, the
/// strings and lists extensions, and the quantity and semver libraries.
pub fn dra_environment() -> Arc<Env> {
    let mut env = Env::stdlib();
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
    program: Program,
}

impl CompiledSelector {
    /// Evaluates the selector for one device. A result that is not a bool, or any runtime error
    /// (a missing attribute, a failed conversion), is an error that carries the CEL text.
    pub fn matches(&self, device: &DeviceContext) -> Result<bool, CelError> {
        match self.program.execute(device.context()) {
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
}

/// Compiled expressions by their text. Thread-safe; compile errors are cached too, so a broken
/// class is reported the same way every time without recompiling it.
pub struct SelectorCache {
    env: Arc<Env>,
    compiled: RwLock<HashMap<String, Result<Arc<CompiledSelector>, CelError>>>,
}

impl Default for SelectorCache {
    fn default() -> Self {
        SelectorCache::new()
    }
}

impl SelectorCache {
    pub fn new() -> SelectorCache {
        SelectorCache {
            env: dra_environment(),
            compiled: RwLock::new(HashMap::new()),
        }
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
        if let Some(found) = self.compiled.read().expect("selector cache lock").get(expression) {
            return found.clone();
        }
        let result = self.compile(expression);
        self.compiled
            .write()
            .expect("selector cache lock")
            .insert(expression.to_owned(), result.clone());
        result
    }

    fn compile(&self, expression: &str) -> Result<Arc<CompiledSelector>, CelError> {
        if expression.len() > MAX_EXPRESSION_LENGTH {
            return Err(CelError::compile(
                expression,
                format!("expression is longer than {MAX_EXPRESSION_LENGTH} characters"),
            ));
        }
        let program = self
            .env
            .compile(expression)
            .map_err(|e| CelError::compile(expression, e.to_string()))?;
        Ok(Arc::new(CompiledSelector {
            expression: expression.to_owned(),
            program,
        }))
    }

    /// How many distinct expressions are cached.
    pub fn len(&self) -> usize {
        self.compiled.read().expect("selector cache lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `CELSelectorExpressionMaxLength` of resource.k8s.io/v1.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;
