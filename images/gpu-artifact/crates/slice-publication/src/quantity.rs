//! Quantities compared by value. The API server stores a quantity in its canonical spelling
//! (`1000` comes back as `1k`, `25769803776` may come back as `24Gi` when written so), so comparing
//! strings would see a change on every start and rewrite the pool for nothing.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The integer a quantity spells, as a plain decimal string; the input unchanged when it is not an
/// integer quantity (we publish only integers, so such a value is compared as written).
pub fn canonical(quantity: &Quantity) -> Quantity {
    match integer_value(&quantity.0) {
        Some(value) => Quantity(value.to_string()),
        None => quantity.clone(),
    }
}

fn integer_value(text: &str) -> Option<i128> {
    let text = text.trim();
    let digits_end = text
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || (*i == 0 && (*c == '-' || *c == '+'))))
        .map_or(text.len(), |(i, _)| i);
    let (number, suffix) = text.split_at(digits_end);
    let number: i128 = number.parse().ok()?;
    let multiplier: i128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 10i128.pow(3),
        "M" => 10i128.pow(6),
        "G" => 10i128.pow(9),
        "T" => 10i128.pow(12),
        "P" => 10i128.pow(15),
        "E" => 10i128.pow(18),
        exponent => {
            let power: u32 = exponent.strip_prefix(['e', 'E'])?.parse().ok()?;
            10i128.checked_pow(power)?
        }
    };
    number.checked_mul(multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> String {
        canonical(&Quantity(text.into())).0
    }

    #[test]
    fn spellings_of_one_value_compare_equal() {
        assert_eq!(value("1k"), "1000");
        assert_eq!(value("1e3"), "1000");
        assert_eq!(value("24Gi"), "25769803776");
        assert_eq!(value("25769803776"), "25769803776");
        assert_eq!(value("16777216k"), value("16777216000"));
        assert_eq!(value("0"), "0");
    }

    #[test]
    fn non_integers_are_kept_as_written() {
        assert_eq!(value("1.5Gi"), "1.5Gi");
        assert_eq!(value("100m"), "100m");
    }
}
