//! Who a request comes from (issue 20): the TCP peer, or, when the peer is a trusted proxy
//! (`server.trusted_proxies`), the client its `X-Forwarded-For` names. Only configured
//! proxies are believed: from anyone else the header is ignored, so a client cannot pick
//! its own rate-limit window.

use std::net::IpAddr;

/// An address range: an address and how many leading bits must match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    addr: IpAddr,
    bits: u8,
}

impl Range {
    /// `10.0.0.0/8`, `::1`, `192.168.1.7`: refused naming the key when it is none of these.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("`server.trusted_proxies` entry `{text}` is not an address or a CIDR range");
        let (addr, bits) = match text.trim().split_once('/') {
            Some((a, b)) => (a.parse::<IpAddr>().map_err(|_| bad())?, Some(b.parse::<u8>().map_err(|_| bad())?)),
            None => (text.trim().parse::<IpAddr>().map_err(|_| bad())?, None),
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = bits.unwrap_or(max);
        if bits > max {
            return Err(bad());
        }
        Ok(Self { addr, bits })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let (a, b, width) = match (self.addr, canonical(ip)) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
            _ => return false,
        };
        if self.bits == 0 {
            return true;
        }
        let shift = width - u32::from(self.bits);
        (a >> shift) == (b >> shift)
    }
}

/// An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`) as IPv4.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The trusted proxies of the configuration.
#[derive(Clone, Debug, Default)]
pub(crate) struct Proxies(Vec<Range>);

impl Proxies {
    pub(crate) fn parse(entries: &[String]) -> Result<Self, String> {
        entries.iter().map(|e| Range::parse(e)).collect::<Result<_, _>>().map(Self)
    }

    pub(crate) fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|r| r.contains(ip))
    }

    /// The client a request comes from: walking `X-Forwarded-For` from the right (the hop
    /// nearest this server) past trusted proxies, the first address that is not one; the
    /// peer itself when it is not trusted or the header says nothing usable.
    pub(crate) fn client(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        let peer = canonical(peer);
        if !self.trusts(peer) {
            return peer;
        }
        let Some(header) = forwarded_for else { return peer };
        let mut client = peer;
        for hop in header.rsplit(',') {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else { break };
            client = canonical(ip);
            if !self.trusts(client) {
                break;
            }
        }
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_a_trusted_proxy_s_forwarded_for_names_the_client() {
        let proxies = Proxies::parse(&["10.0.0.0/8".into(), "127.0.0.1".into()]).unwrap();
        // From a trusted proxy: the nearest address that is not a proxy.
        assert_eq!(proxies.client(ip("10.1.2.3"), Some("203.0.113.9")), ip("203.0.113.9"));
        assert_eq!(proxies.client(ip("10.1.2.3"), Some("6.6.6.6, 203.0.113.9, 10.9.9.9")), ip("203.0.113.9"));
        assert_eq!(proxies.client(ip("::ffff:127.0.0.1"), Some("198.51.100.1")), ip("198.51.100.1"));
        // From anyone else the header is ignored: a client cannot choose its address.
        assert_eq!(proxies.client(ip("198.51.100.7"), Some("1.2.3.4")), ip("198.51.100.7"));
        // Nothing usable: the peer.
        assert_eq!(proxies.client(ip("10.0.0.1"), None), ip("10.0.0.1"));
        assert_eq!(proxies.client(ip("10.0.0.1"), Some("garbage")), ip("10.0.0.1"));
        assert!(Proxies::default().client(ip("10.0.0.1"), Some("1.2.3.4")) == ip("10.0.0.1"));
    }

    #[test]
    fn a_bad_entry_is_refused_naming_it() {
        for bad in ["10.0.0.0/33", "ten", "::1/129", "1.2.3.4/x"] {
            let err = Proxies::parse(&[bad.into()]).unwrap_err();
            assert!(err.contains(bad) && err.contains("server.trusted_proxies"), "{err}");
        }
        assert!(Range::parse("::/0").unwrap().contains(ip("2001:db8::1")));
    }
}
