//! Dialling rank 0 and the rendezvous's little-endian fields on the wire, each read with a deadline and a cap.

use super::*;

/// Connects to `address`, retrying while nobody listens yet.
pub(super) fn connect_until(
    address: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<TcpStream, String> {
    let mut last = String::from("no attempt");
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "cannot reach rank 0's rendezvous at {address} within {timeout:?}: {last}"
            ));
        }
        match address.to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    match TcpStream::connect_timeout(&a, left.min(Duration::from_secs(5))) {
                        Ok(s) => return Ok(s),
                        Err(e) => last = format!("{a}: {e}"),
                    }
                }
            }
            // Name resolution may fail while the cluster's DNS catches up.
            Err(e) => last = format!("cannot resolve {address}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50).min(left));
    }
}

/// Reads one rank's contribution to `round`.
pub(super) fn read_contribution(
    stream: &mut TcpStream,
    round: u32,
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    let io = |e: io::Error| describe_io(&e);
    set_deadline(stream, deadline).map_err(io)?;
    let got = read_u32(stream).map_err(io)?;
    if got != round {
        return Err(format!("it sent round {got}"));
    }
    read_capped(stream, ALLGATHER_BYTES_MAX).map_err(io)
}

/// Sets the read timeout to what is left until `deadline`.
pub(super) fn set_deadline(stream: &TcpStream, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    stream.set_read_timeout(Some(left))
}

pub(super) fn read_u8(s: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    s.read_exact(&mut b)?;
    Ok(b[0])
}

pub(super) fn read_u32(s: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads a `len:u32` then that many bytes, refusing a length over `max`
/// before allocating.
pub(super) fn read_capped(s: &mut impl Read, max: usize) -> io::Result<Vec<u8>> {
    let len = read_u32(s)? as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a length of {len} bytes (more than {max})"),
        ));
    }
    let mut bytes = vec![0u8; len];
    s.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Reads a `len:u16` reason.
pub(super) fn read_reason(s: &mut impl Read) -> io::Result<String> {
    let mut b = [0u8; 2];
    s.read_exact(&mut b)?;
    let len = u16::from_le_bytes(b) as usize;
    if len > REASON_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a reason of {len} bytes (more than {REASON_BYTES_MAX})"),
        ));
    }
    let mut bytes = vec![0u8; len];
    s.read_exact(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Appends a `len:u16` reason, cut to [`REASON_BYTES_MAX`].
pub(super) fn put_reason(out: &mut Vec<u8>, reason: &str) {
    let mut end = reason.len().min(REASON_BYTES_MAX);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&reason.as_bytes()[..end]);
}

/// An I/O error as a person reads it.
pub(super) fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "timed out".to_string(),
        io::ErrorKind::UnexpectedEof => "the connection closed".to_string(),
        _ => e.to_string(),
    }
}
