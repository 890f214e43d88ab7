//! Literal conversions the validators try at compile time: Go's `time.ParseDuration`, RFC 3339
//! timestamps (`time.Parse(time.RFC3339, ...)`, strict: upper-case `T` and `Z` only) and CEL's
//! timestamp range (years 1 to 9999).

const MIN_UNIX_SECONDS: i64 = -62_135_596_800;
const MAX_UNIX_SECONDS: i64 = 253_402_300_799;

/// Whether `text` is a Go duration that fits an `int64` of nanoseconds.
pub(crate) fn valid_duration(text: &str) -> bool {
    parse_duration(text).is_some()
}

/// Go's `time.ParseDuration`: the duration in nanoseconds.
pub(crate) fn parse_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole = &rest[..digits];
        rest = &rest[digits..];
        let mut fraction = "";
        if let Some(after) = rest.strip_prefix('.') {
            let n = after.bytes().take_while(u8::is_ascii_digit).count();
            fraction = &after[..n];
            rest = &after[n..];
            if whole.is_empty() && n == 0 {
                return None;
            }
        } else if whole.is_empty() {
            return None;
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let nanos: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        let Ok(whole) = whole.parse::<u128>().or(if whole.is_empty() { Ok(0) } else { Err(()) }) else {
            return None;
        };
        if whole > 1 << 63 {
            return None;
        }
        total += whole * nanos;
        if !fraction.is_empty() {
            let digits = &fraction[..fraction.len().min(18)];
            let value: f64 = format!("0.{digits}").parse().unwrap_or(0.0);
            total += (value * nanos as f64) as u128;
        }
        if total > 1 << 63 {
            return None;
        }
    }
    match negative {
        true => Some((total as i128).wrapping_neg() as i64),
        false if total < 1 << 63 => Some(total as i64),
        false => None,
    }
}

fn number(text: &str, range: std::ops::RangeInclusive<i64>) -> Option<i64> {
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|n| range.contains(n))
}

fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whether `text` is an RFC 3339 timestamp within CEL's range.
pub(crate) fn valid_timestamp_text(text: &str) -> bool {
    parse_timestamp(text).is_some()
}

/// An RFC 3339 timestamp within CEL's range, as seconds since the epoch.
pub(crate) fn parse_timestamp(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if b.len() < 20 || !at(4, b'-') || !at(7, b'-') || !at(10, b'T') || !at(13, b':') || !at(16, b':') {
        return None;
    }
    let field = |range: std::ops::Range<usize>, bounds| text.get(range).and_then(|t| number(t, bounds));
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        field(0..4, 0..=9999),
        field(5..7, 1..=12),
        field(8..10, 1..=31),
        field(11..13, 0..=23),
        field(14..16, 0..=59),
        field(17..19, 0..=59),
    ) else {
        return None;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if day > *month_days.get(usize::try_from(month - 1).ok()?)? {
        return None;
    }
    let mut rest = text.get(19..)?;
    if let Some(after) = rest.strip_prefix('.') {
        let n = after.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        rest = after.get(n..)?;
    }
    let offset = match rest {
        "Z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes().get(3) != Some(&b':') {
                return None;
            }
            let hours = rest.get(1..3).and_then(|h| number(h, 0..=23));
            let (Some(h), Some(m)) = (hours, rest.get(4..6).and_then(|m| number(m, 0..=59))) else {
                return None;
            };
            sign * (h * 3600 + m * 60)
        }
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    valid_timestamp_seconds(seconds).then_some(seconds)
}

/// Whether `seconds` since the epoch is within CEL's timestamp range.
pub(crate) fn valid_timestamp_seconds(seconds: i64) -> bool {
    (MIN_UNIX_SECONDS..=MAX_UNIX_SECONDS).contains(&seconds)
}

/// `seconds` since the epoch in RFC 3339 (UTC), as cel-go prints a timestamp.
pub(crate) fn format_timestamp(seconds: i64) -> String {
    let (days, secs) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_go() {
        for ok in ["0", "1s", "-1.5h", "1h30m", ".5s", "1.s", "300ms", "2562047h"] {
            assert!(valid_duration(ok), "{ok}");
        }
        for bad in ["", "1", "1x", "s", ".s", "1d", "2562048h", "--1s"] {
            assert!(!valid_duration(bad), "{bad}");
        }
    }

    #[test]
    fn timestamps_follow_rfc3339_and_the_cel_range() {
        for ok in [
            "2024-02-29T23:59:59Z",
            "0001-01-01T00:00:00Z",
            "2020-01-01T00:00:00.123+02:00",
        ] {
            assert!(valid_timestamp_text(ok), "{ok}");
        }
        for bad in [
            "2023-02-29T00:00:00Z",
            "2020-01-01 00:00:00Z",
            "0000-12-31T00:00:00Z",
            "2020-01-01T00:00:00",
        ] {
            assert!(!valid_timestamp_text(bad), "{bad}");
        }
        assert!(!valid_timestamp_text("0001-01-01T00:00:00+01:00"));
        for seconds in [0, 951_782_400, -62_135_596_800, 253_402_300_799] {
            assert_eq!(parse_timestamp(&format_timestamp(seconds)), Some(seconds), "{seconds}");
        }
        assert_eq!(parse_duration("-1.5h"), Some(-5_400_000_000_000));
    }
}
