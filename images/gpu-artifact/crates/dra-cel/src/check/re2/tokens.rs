//! The tokens of Go's regular expressions: escapes, bracketed classes, group flags and counted
//! repeats (`parseEscape`, `parseClass`, `parseUnicodeClass`, `parseNamedClass`, `parsePerlFlags`,
//! `parseRepeat` of `regexp/syntax`).

const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper", "word",
    "xdigit",
];

const CATEGORIES: &str = "C Cc Cf Co Cs L LC Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk Sm \
    So Z Zl Zp Zs";

/// The scripts of Unicode 15.0, as Go's `unicode.Scripts` names them.
const SCRIPTS: &str = "Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah Batak \
    Bengali Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian Caucasian_Albanian Chakma \
    Cham Cherokee Chorasmian Common Coptic Cuneiform Cypriot Cypro_Minoan Cyrillic Deseret Devanagari Dives_Akuru \
    Dogra Duployan Egyptian_Hieroglyphs Elbasan Elymaic Ethiopic Georgian Glagolitic Gothic Grantha Greek Gujarati \
    Gunjala_Gondi Gurmukhi Han Hangul Hanifi_Rohingya Hanunoo Hatran Hebrew Hiragana Imperial_Aramaic Inherited \
    Inscriptional_Pahlavi Inscriptional_Parthian Javanese Kaithi Kannada Katakana Kawi Kayah_Li Kharoshthi \
    Khitan_Small_Script Khmer Khojki Khudawadi Lao Latin Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian Mahajani \
    Makasar Malayalam Mandaic Manichaean Marchen Masaram_Gondi Medefaidrin Meetei_Mayek Mende_Kikakui \
    Meroitic_Cursive Meroitic_Hieroglyphs Miao Modi Mongolian Mro Multani Myanmar Nabataean Nag_Mundari Nandinagari \
    New_Tai_Lue Newa Nko Nushu Nyiakeng_Puachue_Hmong Ogham Ol_Chiki Old_Hungarian Old_Italic Old_North_Arabian \
    Old_Permic Old_Persian Old_Sogdian Old_South_Arabian Old_Turkic Old_Uyghur Oriya Osage Osmanya Pahawh_Hmong \
    Palmyrene Pau_Cin_Hau Phags_Pa Phoenician Psalter_Pahlavi Rejang Runic Samaritan Saurashtra Sharada Shavian \
    Siddham SignWriting Sinhala Sogdian Sora_Sompeng Soyombo Sundanese Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le \
    Tai_Tham Tai_Viet Takri Tamil Tangsa Tangut Telugu Thaana Thai Tibetan Tifinagh Tirhuta Toto Ugaritic Vai \
    Vithkuqi Wancho Warang_Citi Yezidi Yi Zanabazar_Square";

/// An escape outside a class, and whether it pushed anything (`\Q\E` quotes nothing).
pub(super) fn escape_outside_class(s: &str) -> Result<(&str, bool), String> {
    match s.as_bytes().get(1) {
        Some(b'A' | b'b' | b'B' | b'z') => Ok((&s[2..], true)),
        Some(b'C') => Err("invalid escape sequence".to_owned()),
        Some(b'Q') => {
            let (quoted, rest) = s[2..].split_once("\\E").unwrap_or((&s[2..], ""));
            Ok((rest, !quoted.is_empty()))
        }
        _ => class_escape(s).map(|rest| (rest, true)),
    }
}

/// An escape valid inside and outside classes: Unicode or Perl classes, or one character.
fn class_escape(s: &str) -> Result<&str, String> {
    if let Some(rest) = unicode_class(s)? {
        return Ok(rest);
    }
    if matches!(s.as_bytes().get(1), Some(b'd' | b'D' | b's' | b'S' | b'w' | b'W')) {
        return Ok(&s[2..]);
    }
    escaped_char(s).map(|(_, rest)| rest)
}

/// `\p{Name}`, `\pN`, `\P..`, `\p{^Name}`.
fn unicode_class(s: &str) -> Result<Option<&str>, String> {
    let Some(after) = s.strip_prefix("\\p").or_else(|| s.strip_prefix("\\P")) else {
        return Ok(None);
    };
    let (name, rest) = match after.strip_prefix('{') {
        Some(braced) => {
            let end = braced.find('}').ok_or("invalid character class range")?;
            (&braced[..end], &braced[end + 1..])
        }
        None => {
            let c = after.chars().next().ok_or("invalid character class range")?;
            (&after[..c.len_utf8()], &after[c.len_utf8()..])
        }
    };
    let name = name.strip_prefix('^').unwrap_or(name);
    let known = name == "Any"
        || CATEGORIES
            .split_whitespace()
            .chain(SCRIPTS.split_whitespace())
            .any(|n| n == name);
    match known {
        true => Ok(Some(rest)),
        false => Err("invalid character class range".to_owned()),
    }
}

/// `parseEscape`: one escaped character and the rest.
fn escaped_char(s: &str) -> Result<(u32, &str), String> {
    let invalid = || Err("invalid escape sequence".to_owned());
    let t = &s[1..];
    let Some(c) = t.chars().next() else {
        return Err("trailing backslash at end of expression".to_owned());
    };
    let t = &t[c.len_utf8()..];
    let octal = |t: &str| t.bytes().take_while(|b| (b'0'..=b'7').contains(b)).count();
    match c {
        '1'..='7' if octal(t) == 0 => invalid(),
        '0'..='7' => {
            let n = octal(t).min(2);
            let value = u32::from_str_radix(&s[1..2 + n], 8).unwrap_or(0);
            Ok((value, &t[n..]))
        }
        'x' if t.starts_with('{') => {
            let end = t.find('}').filter(|e| *e > 1).ok_or("invalid escape sequence")?;
            match u32::from_str_radix(&t[1..end], 16) {
                Ok(v) if v <= 0x10FFFF && t[1..end].bytes().all(|b| b.is_ascii_hexdigit()) => Ok((v, &t[end + 1..])),
                _ => invalid(),
            }
        }
        'x' => match t.get(..2).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit())) {
            Some(hex) => Ok((u32::from_str_radix(hex, 16).unwrap_or(0), &t[2..])),
            None => invalid(),
        },
        'a' => Ok((7, t)),
        'f' => Ok((12, t)),
        'n' => Ok((10, t)),
        'r' => Ok((13, t)),
        't' => Ok((9, t)),
        'v' => Ok((11, t)),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((c as u32, t)),
        _ => invalid(),
    }
}

/// `parseClass`: a bracketed class, returning the rest after `]`.
pub(super) fn class(s: &str) -> Result<&str, String> {
    let mut t = &s[1..];
    t = t.strip_prefix('^').unwrap_or(t);
    let mut first = true;
    loop {
        if t.is_empty() {
            return Err("missing closing ]".to_owned());
        }
        if t.starts_with(']') && !first {
            return Ok(&t[1..]);
        }
        first = false;
        if let Some(after) = t.strip_prefix("[:")
            && let Some(end) = after.find(":]")
        {
            let name = &after[..end];
            if !POSIX_CLASSES.contains(&name.strip_prefix('^').unwrap_or(name)) {
                return Err("invalid character class range".to_owned());
            }
            t = &after[end + 2..];
            continue;
        }
        if let Some(rest) = unicode_class(t)? {
            t = rest;
            continue;
        }
        if matches!(t.as_bytes(), [b'\\', b'd' | b'D' | b's' | b'S' | b'w' | b'W', ..]) {
            t = &t[2..];
            continue;
        }
        let (lo, rest) = class_char(t)?;
        t = rest;
        if t.len() >= 2 && t.starts_with('-') && !t[1..].starts_with(']') {
            let (hi, rest) = class_char(&t[1..])?;
            if hi < lo {
                return Err("invalid character class range".to_owned());
            }
            t = rest;
        }
    }
}

fn class_char(s: &str) -> Result<(u32, &str), String> {
    match s.chars().next() {
        None => Err("missing closing ]".to_owned()),
        Some('\\') => escaped_char(s),
        Some(c) => Ok((c as u32, &s[c.len_utf8()..])),
    }
}

/// `(?flags)`, `(?flags:`, `(?P<name>` or `(?<name>`: whether a group opens (capturing or
/// not), and the rest of the pattern.
pub(super) fn perl_flags(s: &str) -> Result<(Option<bool>, &str), String> {
    let named = s.strip_prefix("(?P<").or_else(|| s.strip_prefix("(?<"));
    if let Some(after) = named.filter(|_| s.len() > 3) {
        let end = after.find('>').ok_or("invalid named capture")?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()) {
            return Err("invalid named capture".to_owned());
        }
        return Ok((Some(true), &after[end + 1..]));
    }
    let (mut negated, mut saw_flag) = (false, false);
    for (i, c) in s[2..].char_indices() {
        match c {
            'i' | 'm' | 's' | 'U' => saw_flag = true,
            '-' if !negated => {
                negated = true;
                saw_flag = false;
            }
            ':' | ')' if !negated || saw_flag => {
                let rest = &s[2 + i + 1..];
                return Ok(((c == ':').then_some(false), rest));
            }
            _ => break,
        }
    }
    Err("invalid or unsupported Perl syntax".to_owned())
}

/// `{n}`, `{n,}` or `{n,m}` with its bounds (max -1 when open, min -1 when a number is too big),
/// or `None` when the braces are a literal.
pub(super) fn counted_repeat(s: &str) -> Option<((i64, i64), &str)> {
    let (min, rest) = int(s.strip_prefix('{')?)?;
    let (min, max, rest) = match rest.strip_prefix(',') {
        None => (min, min, rest),
        Some(r) if r.starts_with('}') => (min, -1, r),
        Some(r) => {
            let (max, r) = int(r)?;
            (if max < 0 { -1 } else { min }, max, r)
        }
    };
    Some(((min.max(-1), max), rest.strip_prefix('}')?))
}

/// `parseInt`: digits without leading zeros; negative when the number is too big.
fn int(s: &str) -> Option<(i64, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || (digits >= 2 && s.starts_with('0')) {
        return None;
    }
    let n = s[..digits]
        .parse::<i64>()
        .ok()
        .filter(|n| *n < 100_000_000)
        .unwrap_or(-2);
    Some((n, &s[digits..]))
}
