//! HTTP/2 spoken by hand, for clients that misbehave as no library would
//! let them: ones that read nothing, or answer no ping.

use std::io::{Read, Write};
use std::net::TcpStream;

/// The type of a PING frame.
pub const PING: u8 = 6;
/// The flag of a PING frame that answers one.
pub const ACK: u8 = 1;

/// One HTTP/2 frame: a 9-byte head (length, type, flags, stream), then the
/// payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    frame.extend([kind, flags]);
    frame.extend(stream.to_be_bytes());
    frame.extend(payload);
    frame
}

/// The next frame's type, flags and payload; `None` once the server closed
/// the connection.
pub fn read_frame(socket: &mut TcpStream) -> Option<(u8, u8, Vec<u8>)> {
    let mut head = [0; 9];
    socket.read_exact(&mut head).ok()?;
    let mut payload = vec![0; u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize];
    socket.read_exact(&mut payload).ok()?;
    Some((head[3], head[4], payload))
}

/// A connection with a StreamIds call of batches of one ID until
/// cancelled, in HTTP/2 spoken by hand so that nothing reads or answers
/// for the client: the preface, empty settings, the call, and not one byte
/// read.
pub fn stream_ids_by_hand(port: u16) -> TcpStream {
    let mut socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut headers = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/workerid.v1.Ids/StreamIds"),
        (":authority", "127.0.0.1"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        // A literal without indexing, new name (RFC 7541, 6.2.2).
        headers.push(0);
        headers.push(name.len() as u8);
        headers.extend(name.as_bytes());
        headers.push(value.len() as u8);
        headers.extend(value.as_bytes());
    }
    // StreamIdsRequest { tag: "test", count: 1 }, as one gRPC message.
    let request = [0x0a, 4, b't', b'e', b's', b't', 0x10, 1];
    let mut message = vec![0];
    message.extend((request.len() as u32).to_be_bytes());
    message.extend(request);
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    out.extend(frame(1, 0x4, 1, &headers));
    out.extend(frame(0, 0x1, 1, &message));
    socket.write_all(&out).unwrap();
    socket
}
