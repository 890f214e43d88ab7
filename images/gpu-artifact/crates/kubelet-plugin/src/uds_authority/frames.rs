//! The client-to-server half of an HTTP/2 connection, rewritten frame by frame: every header block
//! (a HEADERS frame and its CONTINUATION frames) gets `:authority: localhost`; everything else passes
//! unchanged. Pure: bytes in, bytes out, no I/O.

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

/// A header block being collected until END_HEADERS.
struct OpenBlock {
    stream: [u8; 4],
    /// The HEADERS frame's flags other than PADDED and END_HEADERS (END_STREAM, PRIORITY).
    flags: u8,
    /// The priority fields when PRIORITY is set.
    priority: Vec<u8>,
    fragment: Vec<u8>,
    /// Its frames as they came, for when the connection turns out not to be HTTP/2 as expected.
    raw: Vec<u8>,
}

/// Feeds the inbound bytes through; what `push` returns is what the server reads.
#[derive(Default)]
pub struct InboundRewriter {
    pending: Vec<u8>,
    preface_seen: bool,
    open: Option<OpenBlock>,
    /// Set once the stream is not HTTP/2 as expected: the rest passes unchanged, and the server
    /// reports the protocol error itself.
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
        while let Some(&[l0, l1, l2, ..]) = self.pending.get(..FRAME_HEADER) {
            let length = u32::from_be_bytes([0, l0, l1, l2]) as usize;
            if self.pending.len() < FRAME_HEADER + length {
                break;
            }
            let frame: Vec<u8> = self.pending.drain(..FRAME_HEADER + length).collect();
            if !self.frame(&frame, &mut out) {
                self.pending.splice(0..0, frame);
                return self.give_up(out);
            }
        }
        out
    }

    /// What is left when the client closed (an incomplete frame, as it came).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    fn give_up(&mut self, mut out: Vec<u8>) -> Vec<u8> {
        self.passthrough = true;
        if let Some(mut open) = self.open.take() {
            out.append(&mut open.raw);
        }
        out.append(&mut self.pending);
        out
    }

    /// Handles one whole frame; false when it is not what HTTP/2 allows here.
    fn frame(&mut self, frame: &[u8], out: &mut Vec<u8>) -> bool {
        let Some((&[_, _, _, kind, flags, s0, s1, s2, s3], payload)) = frame.split_first_chunk::<FRAME_HEADER>() else {
            return false;
        };
        let stream = [s0, s1, s2, s3];
        match (kind, self.open.as_mut()) {
            (HEADERS, None) => {
                let Some((priority, fragment)) = split_headers_payload(flags, payload) else {
                    return false;
                };
                let open = OpenBlock {
                    stream,
                    flags: flags & !(PADDED | END_HEADERS),
                    priority: priority.to_vec(),
                    fragment: fragment.to_vec(),
                    raw: frame.to_vec(),
                };
                self.open = Some(open);
            }
            (CONTINUATION, Some(open)) if open.stream == stream => {
                open.fragment.extend_from_slice(payload);
                open.raw.extend_from_slice(frame);
            }
            // Only CONTINUATION of the same stream may follow an open header block.
            (_, Some(_)) => return false,
            (_, None) => {
                out.extend_from_slice(frame);
                return true;
            }
        }
        if flags & END_HEADERS != 0
            && let Some(open) = self.open.take()
        {
            match rewrite_authority(&open.fragment) {
                Some(block) => emit_block(&open, &block, out),
                None => emit_block(&open, &open.fragment, out),
            }
        }
        true
    }
}

/// The priority fields and the header block fragment of a HEADERS payload, without its padding.
fn split_headers_payload(flags: u8, payload: &[u8]) -> Option<(&[u8], &[u8])> {
    let (pad, rest) = if flags & PADDED != 0 {
        let (&pad, rest) = payload.split_first()?;
        (usize::from(pad), rest)
    } else {
        (0, payload)
    };
    let rest = rest.get(..rest.len().checked_sub(pad)?)?;
    if flags & PRIORITY != 0 {
        Some((rest.get(..5)?, rest.get(5..)?))
    } else {
        Some((&[], rest))
    }
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
