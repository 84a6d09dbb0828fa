//! Where a rank listens: the interface (an address or a name such as
//! `eth0`) and the first free port of the configured range.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::ops::RangeInclusive;

/// The address to listen on and advertise for `interface`: loopback when
/// none is given, the address itself when it parses as one, else the
/// address of the network interface of that name (IPv4 preferred).
pub(super) fn resolve(interface: Option<&str>) -> Result<IpAddr, String> {
    let Some(name) = interface else {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    };
    let ip = match name.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => by_name(name)?,
    };
    if ip.is_unspecified() {
        return Err(format!(
            "interface {name} is the unspecified address, which peers cannot connect to; \
             name one interface or address"
        ));
    }
    Ok(ip)
}

fn by_name(name: &str) -> Result<IpAddr, String> {
    let all =
        if_addrs::get_if_addrs().map_err(|e| format!("cannot list the network interfaces: {e}"))?;
    let mine: Vec<IpAddr> = all
        .iter()
        .filter(|i| i.name == name && !i.is_link_local())
        .map(|i| i.ip())
        .collect();
    if let Some(ip) = mine.iter().find(|ip| ip.is_ipv4()).or(mine.first()) {
        return Ok(*ip);
    }
    let mut names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    Err(format!(
        "no network interface named {name:?} with a usable address (this host has: {})",
        names.join(", ")
    ))
}

/// A listener on `ip` at the first free port of `ports` (`0..=0`: any
/// port the system picks).
pub(super) fn bind(ip: IpAddr, ports: &RangeInclusive<u16>) -> Result<TcpListener, String> {
    if ports.is_empty() {
        return Err(format!(
            "the port range {}..={} is empty",
            ports.start(),
            ports.end()
        ));
    }
    for port in ports.clone() {
        match crate::gate::listen(SocketAddr::new(ip, port)) {
            Ok(listener) => return Ok(listener),
            Err(e) if e.kind() == ErrorKind::AddrInUse => continue,
            Err(e) => {
                return Err(format!(
                    "cannot listen on {}: {e}",
                    SocketAddr::new(ip, port)
                ));
            }
        }
    }
    Err(format!(
        "no free port in {}..={} on {ip}",
        ports.start(),
        ports.end()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_resolve_by_address_or_name() {
        assert_eq!(resolve(None), Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(resolve(Some("127.0.0.2")), Ok("127.0.0.2".parse().unwrap()));
        assert_eq!(resolve(Some("lo")), Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let e = resolve(Some("nosuch9")).unwrap_err();
        assert!(e.contains("no network interface named \"nosuch9\""), "{e}");
        assert!(e.contains("lo"), "the error lists what exists: {e}");
        assert!(
            resolve(Some("0.0.0.0"))
                .unwrap_err()
                .contains("unspecified")
        );
    }

    #[test]
    fn a_port_range_skips_ports_in_use() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let first = bind(ip, &(0..=0)).unwrap();
        let taken = first.local_addr().unwrap().port();
        // The taken port, then (most likely) a free one next to it.
        let next = taken.checked_add(1).unwrap_or(taken - 1);
        let range = taken.min(next)..=taken.max(next);
        if let Ok(second) = bind(ip, &range) {
            assert_eq!(second.local_addr().unwrap().port(), next);
        }
        let e = bind(ip, &(taken..=taken)).unwrap_err();
        assert_eq!(e, format!("no free port in {taken}..={taken} on 127.0.0.1"));
        #[allow(clippy::reversed_empty_ranges)]
        let empty = 5..=4;
        assert!(bind(ip, &empty).unwrap_err().contains("empty"));
    }
}
