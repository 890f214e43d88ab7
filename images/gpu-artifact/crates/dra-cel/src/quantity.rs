//! Kubernetes resource quantities (`resource.Quantity`): parsing of the canonical suffixes and
//! exact arithmetic, so capacities, counters and CEL `quantity()` values compare the same way the
//! API server and the scheduler compare them.
//!
//! A quantity is held as an integer count of nano-units (10^-9). That covers every value a DRA
//! slice can carry (up to `8Ei`) exactly; finer fractions round up to the next nano-unit, as Go's
//! `Quantity` does when it scales to nano precision.

use std::cmp::Ordering;
use std::fmt;

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// A parsed `resource.Quantity`, comparable and addable without loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {input:?}")]
pub struct QuantityError {
    input: String,
}

impl Quantity {
    /// The zero quantity.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// A whole number of units.
    pub fn from_units(units: i64) -> Quantity {
        Quantity {
            nanos: units as i128 * NANOS_PER_UNIT,
        }
    }

    /// Parses the Kubernetes quantity syntax: a signed decimal number followed by a binary
    /// suffix (`Ki`..`Ei`), a decimal SI suffix (`n`, `u`, `m`, `k`, `M`..`E`) or an exponent.
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        let error = || QuantityError {
            input: input.to_owned(),
        };
        let (negative, rest) = match input.as_bytes().first() {
            Some(b'-') => (true, &input[1..]),
            Some(b'+') => (false, &input[1..]),
            _ => (false, input),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(error());
        }
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        // Digits as a big integer scaled by 10^-fraction_len.
        let digits: String = format!("{whole}{fraction}");
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| error())?
        };
        let scale10 = -(fraction.len() as i32);
        let (binary_shift, decimal_exponent) = match suffix {
            "" => (0, 0),
            "Ki" => (10, 0),
            "Mi" => (20, 0),
            "Gi" => (30, 0),
            "Ti" => (40, 0),
            "Pi" => (50, 0),
            "Ei" => (60, 0),
            "n" => (0, -9),
            "u" => (0, -6),
            "m" => (0, -3),
            "k" => (0, 3),
            "M" => (0, 6),
            "G" => (0, 9),
            "T" => (0, 12),
            "P" => (0, 15),
            "E" => (0, 18),
            s if s.starts_with(['e', 'E']) => {
                let exponent: i32 = s[1..].parse().map_err(|_| error())?;
                if s.len() < 2 || !(-30..=30).contains(&exponent) {
                    return Err(error());
                }
                (0, exponent)
            }
            _ => return Err(error()),
        };
        // nanos = mantissa * 10^(scale10 + decimal_exponent + 9) * 2^binary_shift, rounded up.
        let power = scale10 + decimal_exponent + 9;
        let shifted = mantissa.checked_mul(1i128 << binary_shift).ok_or_else(error)?;
        let nanos = if power >= 0 {
            shifted
                .checked_mul(10i128.checked_pow(power as u32).ok_or_else(error)?)
                .ok_or_else(error)?
        } else {
            let divisor = 10i128.checked_pow((-power) as u32).ok_or_else(error)?;
            (shifted + divisor - 1) / divisor
        };
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// The value in whole units, if it is integral and fits an i64 (CEL `asInteger`).
    pub fn as_integer(&self) -> Option<i64> {
        if self.nanos % NANOS_PER_UNIT != 0 {
            return None;
        }
        i64::try_from(self.nanos / NANOS_PER_UNIT).ok()
    }

    /// The value as a float (CEL `asApproximateFloat`).
    pub fn as_approximate_float(&self) -> f64 {
        self.nanos as f64 / NANOS_PER_UNIT as f64
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        self.nanos.signum() as i64
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(other.nanos),
        }
    }

    /// How many times `step` fits into `self`, rounded up (for request-policy steps).
    pub fn div_ceil(self, step: Quantity) -> Option<i128> {
        if step.nanos <= 0 {
            return None;
        }
        Some((self.nanos + step.nanos - 1).div_euclid(step.nanos))
    }

    /// `self * factor`, for `min + n * step`.
    pub fn times(self, factor: i128) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_mul(factor),
        }
    }

    /// The quantity as an exact decimal string in plain units (no suffix), e.g. `1073741824`
    /// or `0.5`; parsing the output gives the same quantity back.
    pub fn to_decimal_string(&self) -> String {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let whole = abs / NANOS_PER_UNIT as u128;
        let fraction = abs % NANOS_PER_UNIT as u128;
        if fraction == 0 {
            return format!("{sign}{whole}");
        }
        let digits = format!("{fraction:09}");
        format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
    }

    /// The ordering CEL's `compareTo` reports: -1, 0 or 1.
    pub fn compare(&self, other: &Quantity) -> i64 {
        match self.cmp(other) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_decimal_string())
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn binary_and_decimal_suffixes_agree_with_plain_numbers() {
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("12Gi"), q("12884901888"));
        assert_eq!(q("1k"), q("1000"));
        assert_eq!(q("500m"), q("0.5"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("1.5Gi").as_integer(), Some(1_610_612_736));
        assert_eq!(q("-2").sign(), -1);
    }

    #[test]
    fn malformed_quantities_are_rejected() {
        for bad in ["", "Gi", "1.2.3", "1Xi", "1 Gi", "--1", "1e"] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn decimal_string_round_trips() {
        for s in ["0", "1", "0.5", "80Gi", "1n", "-3m"] {
            assert_eq!(q(&q(s).to_decimal_string()), q(s), "{s}");
        }
        assert_eq!(q("80Gi").to_decimal_string(), "85899345920");
    }

    #[test]
    fn steps_round_up() {
        assert_eq!(q("25").div_ceil(q("10")), Some(3));
        assert_eq!(q("30").div_ceil(q("10")), Some(3));
        assert_eq!(q("1").div_ceil(Quantity::ZERO), None);
    }
}
