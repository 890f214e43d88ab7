use super::frames::{InboundRewriter, PREFACE, write_frame};
use super::hpack::{AUTHORITY, rewrite_authority};

/// What grpc-go sends for a target `/var/lib/kubelet/plugins_registry/x-reg.sock`.
const GO_AUTHORITY: &[u8] = b"%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fx-reg.sock";
const STREAM_1: [u8; 4] = [0, 0, 0, 1];

fn raw_string(value: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::try_from(value.len()).unwrap()];
    out.extend_from_slice(value);
    out
}

/// `:method: POST` (static 3), `:authority` literal with incremental indexing (static name 1),
/// `:path` literal without indexing, `te: trailers` literal with a literal name.
fn request_block(authority: &[u8]) -> Vec<u8> {
    let mut block = vec![0x83, 0x41];
    block.extend(raw_string(authority));
    block.push(0x04);
    block.extend(raw_string(b"/pluginregistration.Registration/GetInfo"));
    block.push(0x40);
    block.extend(raw_string(b"te"));
    block.extend(raw_string(b"trailers"));
    block
}

#[test]
fn only_the_authority_value_changes() {
    let rewritten = rewrite_authority(&request_block(GO_AUTHORITY)).unwrap();
    assert_eq!(rewritten, request_block(AUTHORITY));
}

#[test]
fn indexed_fields_size_updates_and_huffman_values_are_handled() {
    // A table size update, an indexed field (dynamic 62: the authority the client indexed before),
    // a never-indexed `:authority` with a Huffman-coded value, a literal name `:authority`.
    let mut block = vec![0x3f, 0xe1, 0x1f, 0xbe, 0x11, 0x83, 0xaa, 0xbb, 0xcc, 0x00];
    block.extend(raw_string(b":authority"));
    block.extend(raw_string(GO_AUTHORITY));
    let mut expected = vec![0x3f, 0xe1, 0x1f, 0xbe, 0x11];
    expected.extend(raw_string(AUTHORITY));
    expected.push(0x00);
    expected.extend(raw_string(b":authority"));
    expected.extend(raw_string(AUTHORITY));
    assert_eq!(rewrite_authority(&block).unwrap(), expected);
}

#[test]
fn a_truncated_block_is_left_to_the_server() {
    let block = request_block(GO_AUTHORITY);
    assert_eq!(rewrite_authority(&block[..block.len() - 3]), None);
    assert_eq!(rewrite_authority(&[0x41, 0x7f, 0xff]), None);
}

fn settings_and_request(flags: u8, payload_prefix: &[u8], padding: usize) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    write_frame(&mut out, 0x4, 0, [0; 4], &[&[0, 3, 0, 0, 0, 100]]);
    let block = request_block(GO_AUTHORITY);
    write_frame(
        &mut out,
        0x1,
        flags,
        STREAM_1,
        &[payload_prefix, &block, &vec![0; padding]],
    );
    write_frame(&mut out, 0x0, 0x1, STREAM_1, &[b"\0\0\0\0\0"]);
    out
}

fn expected_output(flags: u8, priority: &[u8]) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    write_frame(&mut out, 0x4, 0, [0; 4], &[&[0, 3, 0, 0, 0, 100]]);
    write_frame(&mut out, 0x1, flags, STREAM_1, &[priority, &request_block(AUTHORITY)]);
    write_frame(&mut out, 0x0, 0x1, STREAM_1, &[b"\0\0\0\0\0"]);
    out
}

#[test]
fn headers_frames_are_rewritten_and_other_frames_pass_byte_for_byte() {
    let input = settings_and_request(0x4, &[], 0);
    assert_eq!(InboundRewriter::default().push(&input), expected_output(0x4, &[]));
}

#[test]
fn padding_is_dropped_and_priority_kept() {
    let priority = [0x80, 0, 0, 3, 15];
    let mut prefix = vec![4u8];
    prefix.extend_from_slice(&priority);
    let input = settings_and_request(0x4 | 0x8 | 0x20 | 0x1, &prefix, 4);
    assert_eq!(
        InboundRewriter::default().push(&input),
        expected_output(0x4 | 0x20 | 0x1, &priority)
    );
}

#[test]
fn continuation_frames_become_one_headers_frame() {
    let block = request_block(GO_AUTHORITY);
    let (head, tail) = block.split_at(7);
    let mut input = PREFACE.to_vec();
    write_frame(&mut input, 0x4, 0, [0; 4], &[&[0, 3, 0, 0, 0, 100]]);
    write_frame(&mut input, 0x1, 0, STREAM_1, &[head]);
    write_frame(&mut input, 0x9, 0x4, STREAM_1, &[tail]);
    write_frame(&mut input, 0x0, 0x1, STREAM_1, &[b"\0\0\0\0\0"]);
    assert_eq!(InboundRewriter::default().push(&input), expected_output(0x4, &[]));
}

#[test]
fn bytes_arriving_one_by_one_give_the_same_stream() {
    let input = settings_and_request(0x4, &[], 0);
    let mut rewriter = InboundRewriter::default();
    let mut out: Vec<u8> = input.iter().flat_map(|b| rewriter.push(&[*b])).collect();
    out.extend(rewriter.finish());
    assert_eq!(out, expected_output(0x4, &[]));
}

#[test]
fn what_is_not_http2_passes_unchanged() {
    let mut rewriter = InboundRewriter::default();
    assert_eq!(rewriter.push(b"GET / HTTP/1.1\r\n\r\n"), b"GET / HTTP/1.1\r\n\r\n");
    // A frame other than CONTINUATION inside an open header block: given up, passed as it came.
    let mut input = PREFACE.to_vec();
    write_frame(&mut input, 0x1, 0, STREAM_1, &[&request_block(GO_AUTHORITY)]);
    let mut data = Vec::new();
    write_frame(&mut data, 0x0, 0, STREAM_1, &[b"x"]);
    let mut rewriter = InboundRewriter::default();
    let mut out = rewriter.push(&input);
    out.extend(rewriter.push(&data));
    input.extend(data);
    assert_eq!(out, input);
}

/// The preface and a SETTINGS frame, as every client connection starts.
fn connection_start() -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    write_frame(&mut out, 0x4, 0, [0; 4], &[&[0, 3, 0, 0, 0, 100]]);
    out
}

/// The 9-byte header of a frame announcing `length` bytes of payload.
fn frame_header(length: usize, kind: u8, flags: u8) -> Vec<u8> {
    let [_, l0, l1, l2] = u32::try_from(length).unwrap().to_be_bytes();
    let mut header = vec![l0, l1, l2, kind, flags];
    header.extend_from_slice(&STREAM_1);
    header
}

#[test]
fn a_data_frame_passes_as_it_arrives_without_waiting_for_its_end() {
    let mut rewriter = InboundRewriter::default();
    let start = connection_start();
    assert_eq!(rewriter.push(&start), start);
    // A 1 MiB DATA frame: what has arrived of it is the server's at once, nothing is held back.
    let mut first = frame_header(1 << 20, 0x0, 0);
    first.extend(vec![7u8; 1000]);
    assert_eq!(rewriter.push(&first), first);
    let rest = vec![7u8; (1 << 20) - 1000];
    assert_eq!(rewriter.push(&rest), rest);
    // The next header block is rewritten again.
    let mut request = Vec::new();
    write_frame(&mut request, 0x1, 0x4, STREAM_1, &[&request_block(GO_AUTHORITY)]);
    let mut expected = Vec::new();
    write_frame(&mut expected, 0x1, 0x4, STREAM_1, &[&request_block(AUTHORITY)]);
    assert_eq!(rewriter.push(&request), expected);
}

#[test]
fn a_header_block_past_the_limit_passes_through_unchanged_from_then_on() {
    let mut rewriter = InboundRewriter::default();
    let mut input = connection_start();
    // HEADERS without END_HEADERS, then CONTINUATION frames of 16 KiB: 256 KiB of header block.
    write_frame(&mut input, 0x1, 0, STREAM_1, &[&request_block(GO_AUTHORITY)]);
    for _ in 0..16 {
        write_frame(&mut input, 0x9, 0, STREAM_1, &[&[0x40; 16_384]]);
    }
    let out = rewriter.push(&input);
    assert_eq!(out, input, "given up on and passed as it came");
    let tail = frame_header(5, 0x9, 0x4);
    assert_eq!(rewriter.push(&tail), tail, "passthrough from then on");
}

#[test]
fn a_headers_frame_announcing_more_than_the_limit_passes_as_it_arrives() {
    let mut rewriter = InboundRewriter::default();
    rewriter.push(&connection_start());
    let mut first = frame_header(1 << 20, 0x1, 0x4);
    first.extend(vec![0x40; 1000]);
    assert_eq!(rewriter.push(&first), first);
}
