//! One header block (HPACK, RFC 7541) with the value of every literal `:authority` field replaced by
//! `localhost`. The block is walked representation by representation without decoding anything
//! else: indexed fields, table size updates and other literals are copied byte for byte. A field the
//! client indexes is indexed by the server with the new value, so later references to it (indexed
//! fields) name `localhost` on the server's side, at the same index.

/// What the kubelet itself sends on the sockets it dials with a `unix:` target.
pub const AUTHORITY: &[u8] = b"localhost";
/// `:authority`'s index in the static table.
const AUTHORITY_INDEX: u64 = 1;

/// The rewritten block; `None` when the block is not valid HPACK (the server then rejects it itself).
pub fn rewrite_authority(block: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(block.len());
    let mut at = 0;
    while let Some(&first) = block.get(at) {
        let prefix_bits = match first {
            b if b & 0x80 != 0 => 7,    // indexed field
            b if b & 0xc0 == 0x40 => 6, // literal, incremental indexing
            b if b & 0xe0 == 0x20 => 5, // dynamic table size update
            _ => 4,                     // literal without indexing or never indexed
        };
        let (index, after_index) = integer(block, at, prefix_bits)?;
        let is_literal = first & 0x80 == 0 && first & 0xe0 != 0x20;
        if !is_literal {
            out.extend_from_slice(block.get(at..after_index)?);
            at = after_index;
            continue;
        }
        let (name_is_authority, after_name) = if index == 0 {
            let (name, after_name) = string(block, after_index)?;
            (name == StringBytes::Raw(b":authority"), after_name)
        } else {
            (index == AUTHORITY_INDEX, after_index)
        };
        let (_, after_value) = string(block, after_name)?;
        out.extend_from_slice(block.get(at..after_name)?);
        if name_is_authority {
            out.push(u8::try_from(AUTHORITY.len()).ok()?); // not Huffman-coded, length < 127
            out.extend_from_slice(AUTHORITY);
        } else {
            out.extend_from_slice(block.get(after_name..after_value)?);
        }
        at = after_value;
    }
    Some(out)
}

#[derive(Debug, PartialEq)]
enum StringBytes<'a> {
    Raw(&'a [u8]),
    Huffman,
}

/// An HPACK integer with a `prefix_bits` prefix starting at `at`; the value and the offset after it.
fn integer(block: &[u8], at: usize, prefix_bits: u32) -> Option<(u64, usize)> {
    let max = (1u64 << prefix_bits) - 1;
    let mut value = u64::from(*block.get(at)?) & max;
    let mut at = at + 1;
    if value < max {
        return Some((value, at));
    }
    let mut shift = 0;
    loop {
        let byte = *block.get(at)?;
        at += 1;
        value = value.checked_add(u64::from(byte & 0x7f).checked_shl(shift)?)?;
        if byte & 0x80 == 0 {
            return Some((value, at));
        }
        shift += 7;
        if shift > 56 {
            return None;
        }
    }
}

/// A string literal at `at`; its bytes (when not Huffman-coded) and the offset after it.
fn string(block: &[u8], at: usize) -> Option<(StringBytes<'_>, usize)> {
    let huffman = *block.get(at)? & 0x80 != 0;
    let (length, start) = integer(block, at, 7)?;
    let end = start.checked_add(usize::try_from(length).ok()?)?;
    let bytes = block.get(start..end)?;
    Some((
        if huffman {
            StringBytes::Huffman
        } else {
            StringBytes::Raw(bytes)
        },
        end,
    ))
}
