//! The client-to-server half of an HTTP/2 connection, rewritten frame by frame: every header block
//! (a HEADERS frame and its CONTINUATION frames) gets `:authority: localhost`; everything else passes
//! unchanged, as it arrives. Only a header block is held until it ends, and only up to
//! [`MAX_HEADER_BLOCK`]: a larger one, or anything that is not HTTP/2 as expected, makes the rest
//! of the connection pass unchanged (the server then judges it itself), so what one connection
//! can make the plugin hold is bounded. Pure: bytes in, bytes out, no I/O.

use std::ops::Range;

use super::hpack::rewrite_authority;

/// The client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame payload every HTTP/2 peer accepts (SETTINGS_MAX_FRAME_SIZE's initial value).
const MAX_PAYLOAD: usize = 16_384;
/// The most of one header block (its frames as they came) held to be rewritten. The kubelet's
/// requests carry well under 1 KiB of headers; grpc-go's default limit on a header list is 16 KiB.
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;

/// A header block being collected until END_HEADERS.
struct OpenBlock {
    stream: [u8; 4],
    /// The HEADERS frame's flags other than PADDED and END_HEADERS (END_STREAM, PRIORITY).
    flags: u8,
    /// The priority fields when PRIORITY is set.
    priority: Vec<u8>,
    /// Its frames as they came: passed on unchanged when the connection turns out not to be HTTP/2
    /// as expected, or the block grows past the limit.
    raw: Vec<u8>,
    /// Where the block's fragments are in `raw`.
    fragments: Vec<Range<usize>>,
}

impl OpenBlock {
    fn fragment(&self) -> Vec<u8> {
        self.fragments
            .iter()
            .flat_map(|range| self.raw.get(range.clone()).unwrap_or_default())
            .copied()
            .collect()
    }
}

/// Feeds the inbound bytes through; what `push` returns is what the server reads.
#[derive(Default)]
pub struct InboundRewriter {
    /// An incomplete frame header, or an incomplete frame of a header block.
    pending: Vec<u8>,
    preface_seen: bool,
    open: Option<OpenBlock>,
    /// What is left of the payload of a frame outside header blocks, passed on as it arrives.
    passing: usize,
    /// Set once the stream is not HTTP/2 as expected or a header block is too large: the rest
    /// passes unchanged, and the server reports the protocol error itself.
    passthrough: bool,
}

impl InboundRewriter {
    /// Takes the next bytes read from the client; returns the bytes ready for the server.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.passthrough {
            return bytes.to_vec();
        }
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        if !self.preface_seen {
            let n = self.pending.len().min(PREFACE.len());
            if self.pending.get(..n) != PREFACE.get(..n) {
                return self.give_up(out);
            }
            if n < PREFACE.len() {
                return out;
            }
            out.extend(self.pending.drain(..PREFACE.len()));
            self.preface_seen = true;
        }
        loop {
            if self.passing > 0 {
                let n = self.passing.min(self.pending.len());
                out.extend(self.pending.drain(..n));
                self.passing -= n;
                if self.passing > 0 {
                    break;
                }
            }
            let Some(&[l0, l1, l2, kind, ..]) = self.pending.get(..FRAME_HEADER) else {
                break;
            };
            let length = u32::from_be_bytes([0, l0, l1, l2]) as usize;
            let held = self.open.as_ref().map_or(0, |open| open.raw.len());
            match (kind, self.open.is_some()) {
                // Outside a header block: its header now, its payload as it arrives.
                (HEADERS, false) | (CONTINUATION, true) => {}
                (_, false) => {
                    out.extend(self.pending.drain(..FRAME_HEADER));
                    self.passing = length;
                    continue;
                }
                // Only CONTINUATION of the same stream may follow an open header block.
                (_, true) => return self.give_up(out),
            }
            if held + FRAME_HEADER + length > MAX_HEADER_BLOCK {
                return self.give_up(out);
            }
            if self.pending.len() < FRAME_HEADER + length {
                break;
            }
            let frame: Vec<u8> = self.pending.drain(..FRAME_HEADER + length).collect();
            if !self.frame(frame, &mut out) {
                return self.give_up(out);
            }
        }
        out
    }

    /// What is left when the client closed (an incomplete frame, as it came).
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = self.open.take().map(|open| open.raw).unwrap_or_default();
        out.append(&mut self.pending);
        out
    }

    fn give_up(&mut self, mut out: Vec<u8>) -> Vec<u8> {
        self.passthrough = true;
        if let Some(mut open) = self.open.take() {
            out.append(&mut open.raw);
        }
        out.append(&mut self.pending);
        out
    }

    /// Handles one whole frame of a header block (HEADERS, or CONTINUATION of an open one); false
    /// when it is not what HTTP/2 allows here. The frame is given back to `pending` on false.
    fn frame(&mut self, frame: Vec<u8>, out: &mut Vec<u8>) -> bool {
        let Some((&[_, _, _, kind, flags, s0, s1, s2, s3], payload)) = frame.split_first_chunk::<FRAME_HEADER>() else {
            return false;
        };
        let stream = [s0, s1, s2, s3];
        match (kind, self.open.as_mut()) {
            (HEADERS, None) => {
                let Some((priority, fragment)) = split_headers_payload(flags, payload) else {
                    self.pending.splice(0..0, frame);
                    return false;
                };
                let priority = payload.get(priority).unwrap_or_default().to_vec();
                let first = FRAME_HEADER + fragment.start..FRAME_HEADER + fragment.end;
                let fragments = std::iter::once(first).collect();
                self.open = Some(OpenBlock {
                    stream,
                    flags: flags & !(PADDED | END_HEADERS),
                    priority,
                    raw: frame,
                    fragments,
                });
            }
            (CONTINUATION, Some(open)) if open.stream == stream => {
                let start = open.raw.len() + FRAME_HEADER;
                open.fragments.push(start..start + payload.len());
                open.raw.extend_from_slice(&frame);
            }
            _ => {
                self.pending.splice(0..0, frame);
                return false;
            }
        }
        if flags & END_HEADERS != 0
            && let Some(open) = self.open.take()
        {
            let fragment = open.fragment();
            match rewrite_authority(&fragment) {
                Some(block) => emit_block(&open, &block, out),
                None => emit_block(&open, &fragment, out),
            }
        }
        true
    }
}

/// Where the priority fields and the header block fragment of a HEADERS payload are in it, without
/// its padding.
fn split_headers_payload(flags: u8, payload: &[u8]) -> Option<(Range<usize>, Range<usize>)> {
    let (pad, start) = if flags & PADDED != 0 {
        (usize::from(*payload.first()?), 1)
    } else {
        (0, 0)
    };
    let end = payload.len().checked_sub(pad)?;
    let fragment_start = if flags & PRIORITY != 0 { start + 5 } else { start };
    (fragment_start <= end).then_some((start..fragment_start, fragment_start..end))
}

/// Writes `block` as one HEADERS frame, with CONTINUATION frames where it does not fit in one.
fn emit_block(open: &OpenBlock, block: &[u8], out: &mut Vec<u8>) {
    let first_room = MAX_PAYLOAD - open.priority.len();
    let (first, mut rest) = block.split_at(block.len().min(first_room));
    let end = if rest.is_empty() { END_HEADERS } else { 0 };
    write_frame(out, HEADERS, open.flags | end, open.stream, &[&open.priority, first]);
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(MAX_PAYLOAD));
        let end = if tail.is_empty() { END_HEADERS } else { 0 };
        write_frame(out, CONTINUATION, end, open.stream, &[chunk]);
        rest = tail;
    }
}

pub(super) fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: [u8; 4], parts: &[&[u8]]) {
    let length: usize = parts.iter().map(|p| p.len()).sum();
    let [_, l0, l1, l2] = u32::try_from(length).unwrap_or(u32::MAX).to_be_bytes();
    out.extend_from_slice(&[l0, l1, l2]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream);
    for part in parts {
        out.extend_from_slice(part);
    }
}
