//! Size and cost ranges with cel-go's saturating arithmetic (`checker.SizeEstimate`,
//! `checker.CostEstimate`) and its cost constants (`common/cost.go`).

/// `common.StringTraversalCostFactor`.
pub(crate) const STRING_TRAVERSAL: f64 = 0.1;
/// `common.RegexStringLengthCostFactor`.
pub(crate) const REGEX_LENGTH: f64 = 0.25;
pub(crate) const LIST_CREATE: u64 = 10;
pub(crate) const MAP_CREATE: u64 = 30;
pub(crate) const STRUCT_CREATE: u64 = 40;

/// A range of sizes (string length, list or map entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Size {
    pub(crate) min: u64,
    pub(crate) max: u64,
}

/// A range of costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Cost {
    pub(crate) min: u64,
    pub(crate) max: u64,
}

/// `multiplyByCostFactor`: `x * factor` rounded up, saturating.
fn by_factor(x: u64, factor: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && factor > 0.0 && xf > u64::MAX as f64 / factor {
        return u64::MAX;
    }
    let ceil = (xf * factor).ceil();
    if ceil >= 18_446_744_073_709_551_616.0 {
        return u64::MAX;
    }
    ceil as u64
}

impl Size {
    pub(crate) const UNKNOWN: Size = Size { min: 0, max: u64::MAX };

    pub(crate) fn fixed(n: u64) -> Size {
        Size { min: n, max: n }
    }

    pub(crate) fn add(self, o: Size) -> Size {
        Size {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }

    pub(crate) fn multiply(self, o: Size) -> Size {
        Size {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }

    pub(crate) fn by_factor(self, factor: f64) -> Cost {
        Cost {
            min: by_factor(self.min, factor),
            max: by_factor(self.max, factor),
        }
    }

    pub(crate) fn times_cost(self, c: Cost) -> Cost {
        Cost {
            min: self.min.saturating_mul(c.min),
            max: self.max.saturating_mul(c.max),
        }
    }

    pub(crate) fn union(self, o: Size) -> Size {
        Size {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }

    /// The same range read as a cost (cel-go converts sizes to costs by a plain cast).
    pub(crate) fn as_cost(self) -> Cost {
        Cost {
            min: self.min,
            max: self.max,
        }
    }
}

impl Cost {
    pub(crate) fn fixed(n: u64) -> Cost {
        Cost { min: n, max: n }
    }

    pub(crate) fn add(self, o: Cost) -> Cost {
        Cost {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }

    pub(crate) fn multiply(self, o: Cost) -> Cost {
        Cost {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }

    pub(crate) fn by_factor(self, factor: f64) -> Cost {
        Cost {
            min: by_factor(self.min, factor),
            max: by_factor(self.max, factor),
        }
    }

    pub(crate) fn union(self, o: Cost) -> Cost {
        Cost {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_round_up_and_saturate() {
        assert_eq!(Size::fixed(63).by_factor(STRING_TRAVERSAL), Cost::fixed(7));
        // As in Go: the float product of an unknown size, not saturation.
        assert_eq!(Size::UNKNOWN.by_factor(STRING_TRAVERSAL).max, 1_844_674_407_370_955_264);
        assert_eq!(Size::UNKNOWN.by_factor(2.0).max, u64::MAX);
        assert_eq!(Size::UNKNOWN.by_factor(STRING_TRAVERSAL).min, 0);
        assert_eq!(Size::fixed(u64::MAX).add(Size::fixed(1)).max, u64::MAX);
        assert_eq!(Size::fixed(1 << 40).multiply(Size::fixed(1 << 40)).max, u64::MAX);
    }
}
