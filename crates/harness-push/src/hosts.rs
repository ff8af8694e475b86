//! Which hosts a push may be posted to (issue 33, SSRF): a push URL is the client's, and the
//! harness posts to it from inside the deployment's network.
//!
//! - Never: link-local addresses (`169.254.0.0/16`, `fe80::/10`: the cloud metadata
//!   endpoint `169.254.169.254` among them), unspecified (`0.0.0.0`, `::`), broadcast and
//!   multicast addresses. Nothing a webhook lives on is there.
//! - Private hosts, only with [`HostPolicy::allow_private`] (the default, `[push]
//!   allow_private_hosts`): loopback, `localhost`, RFC 1918 (`10/8`, `172.16/12`,
//!   `192.168/16`), shared address space (`100.64/10`) and unique-local IPv6 (`fc00::/7`).
//!   The default serves the embedded case (one laptop, a webhook beside it); a server on a
//!   shared network sets it to `false`.
//!
//! A literal address is checked when the config is created; a name is checked when it is
//! resolved for a post ([`GuardedResolver`]), so a name that resolves (or is rebound) to a
//! refused address is never posted to.

use std::net::{IpAddr, SocketAddr};

/// What a push may be posted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPolicy {
    /// Loopback and private-range hosts are allowed.
    pub allow_private: bool,
}

impl Default for HostPolicy {
    fn default() -> Self {
        Self { allow_private: true }
    }
}

impl HostPolicy {
    /// Why an address is refused, `None` when a push may go there.
    pub fn refuses_address(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (never, private) = match ip {
            IpAddr::V4(v4) => {
                let [a, b, ..] = v4.octets();
                (
                    v4.is_link_local() || v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast(),
                    v4.is_loopback() || v4.is_private() || (a == 100 && (64..128).contains(&b)),
                )
            }
            IpAddr::V6(v6) => {
                let first = v6.segments()[0];
                (
                    (first & 0xffc0) == 0xfe80 || v6.is_unspecified() || v6.is_multicast(),
                    v6.is_loopback() || (first & 0xfe00) == 0xfc00,
                )
            }
        };
        if never {
            Some("a link-local, unspecified, broadcast or multicast address (never a push target)")
        } else if private && !self.allow_private {
            Some("a loopback or private address (`[push] allow_private_hosts = false`)")
        } else {
            None
        }
    }

    /// Why the host of a push URL is refused when the config is created: a literal address
    /// by [`Self::refuses_address`], `localhost` when private hosts are not allowed. Other
    /// names are checked when resolved.
    pub fn refuses_host(&self, host: &str) -> Option<&'static str> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.refuses_address(ip);
        }
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if !self.allow_private && (name == "localhost" || name.ends_with(".localhost")) {
            return Some("a loopback name (`[push] allow_private_hosts = false`)");
        }
        None
    }
}

/// The push client's resolver: the system's, with every address the policy refuses left out;
/// a name with no address left fails the post, naming why.
pub(crate) struct GuardedResolver(pub HostPolicy);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut why = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.refuses_address(a.ip()) {
                    Some(reason) => {
                        why = Some(reason);
                        false
                    }
                    None => true,
                })
                .collect();
            if allowed.is_empty() {
                let why = why.unwrap_or("no address");
                return Err(format!("the push host resolves to {why}").into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_that_resolves_to_a_refused_address_is_not_resolved_for_a_post() {
        use reqwest::dns::Resolve;
        let name = |n: &str| n.parse::<reqwest::dns::Name>().expect("a name");
        let closed = GuardedResolver(HostPolicy { allow_private: false });
        let err = closed.resolve(name("localhost")).await.err().expect("localhost is loopback");
        assert!(err.to_string().contains("loopback or private"), "{err}");
        let open = GuardedResolver(HostPolicy::default());
        let found: Vec<SocketAddr> = open.resolve(name("localhost")).await.expect("allowed").collect();
        assert!(found.iter().all(|a| a.ip().is_loopback()) && !found.is_empty(), "{found:?}");
    }

    #[test]
    fn link_local_and_metadata_addresses_are_never_allowed_and_private_ones_only_by_the_policy() {
        let open = HostPolicy { allow_private: true };
        let closed = HostPolicy { allow_private: false };
        for never in
            ["169.254.169.254", "0.0.0.0", "fe80::1", "::", "255.255.255.255", "224.0.0.1", "::ffff:169.254.1.1"]
        {
            assert!(open.refuses_host(never).is_some(), "{never}");
        }
        for private in
            ["127.0.0.1", "10.1.2.3", "172.16.0.9", "192.168.1.1", "100.64.0.1", "::1", "fd00::5", "localhost"]
        {
            assert_eq!(open.refuses_host(private), None, "{private}");
            assert!(closed.refuses_host(private).is_some(), "{private}");
        }
        for public in ["93.184.216.34", "2606:2800:220:1::1", "hooks.example.com", "172.32.0.1", "100.128.0.1"] {
            assert_eq!(closed.refuses_host(public), None, "{public}");
        }
    }
}
