//! Hosts and Raft node addresses, parsed once and compared as values.
//!
//! Why types: one host reaches the exporter spelled many ways (`[::1]` in a URL, `::1` in
//! Patroni's `host` field, `Node-0` in a configuration, `fe80::1%eth0` with its zone), and the
//! `api_url` policy, the Raft node discovery and the witness judgement must agree on which
//! spellings are one host. So every host is read here, into one normal form: names in lower
//! case, IP addresses as std writes them, IPv6 without brackets. A Raft node is `host:port`
//! ([`NodeAddress`]), IPv6 in brackets (`[::1]:2222`); a bare IPv6 address is never split at
//! its last colon (`fe80::1` is no host `fe80:` on port 1).
//!
//! std reads IP addresses and socket addresses, the `url` crate reads host names as a URL
//! does (lower case, IDNA); only what neither reads is written by hand here: zone ids
//! (`fe80::1%eth0`: std takes none in `Ipv6Addr` and only a number in `SocketAddrV6`, the
//! `url` crate none at all) and names with a port.
//!
//! The Raft node ids themselves stay the strings pysyncobj reports: pysyncobj compares node
//! ids as strings, so two spellings of one address are two nodes to it, and the `node` label
//! shows what it says.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use url::Url;

/// Why a text is not a host or a node address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("{0:?} is not a host name or an IP address")]
    Host(String),
    #[error("{0:?} has no port (host:port, or [IPv6]:port)")]
    NoPort(String),
    #[error("{0:?} has no valid port (1 to 65535)")]
    Port(String),
    #[error("{0:?} is not a network (address/prefix, such as 10.0.0.0/24)")]
    Network(String),
}

/// A host in its normal form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// A host name, in lower case (IDNA names in their ASCII form).
    Name(String),
    /// An IPv4 or IPv6 address.
    Ip(IpAddr),
    /// An IPv6 address with its zone id (`fe80::1%eth0`): a link-local address means
    /// nothing without the interface it is on.
    Scoped { ip: Ipv6Addr, zone: String },
}

impl Host {
    /// Reads a host: a name, an IPv4 address, or an IPv6 address with or without brackets
    /// and with or without a zone id.
    ///
    /// # Errors
    /// When it is none of them (empty, a space, a port, a path).
    pub fn parse(text: &str) -> Result<Host, AddressError> {
        let bare = text
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(text);
        let invalid = || AddressError::Host(text.to_owned());
        let bracketed = bare.len() != text.len();
        if let Some((ip, zone)) = bare.split_once('%') {
            // By hand: std's Ipv6Addr takes no zone id, and the url crate none at all.
            let ip: Ipv6Addr = ip.parse().map_err(|_| invalid())?;
            return Host::scoped(ip, zone).ok_or_else(invalid);
        }
        match bare.parse::<IpAddr>() {
            Ok(ip) if ip.is_ipv6() || !bracketed => return Ok(Host::Ip(ip)),
            _ if bracketed => return Err(invalid()),
            _ => {}
        }
        // A name as a URL reads it (`url::Host::parse` refuses spaces, `/`, `:`, `@`, ...);
        // it may also read a number-like name as an IPv4 address, as it does in a URL.
        match url::Host::parse(bare).map_err(|_| invalid())? {
            url::Host::Domain(name) => Ok(Host::Name(name)),
            url::Host::Ipv4(ip) => Ok(Host::Ip(IpAddr::V4(ip))),
            url::Host::Ipv6(ip) => Ok(Host::Ip(IpAddr::V6(ip))),
        }
    }

    /// The host of a URL (already normalised by the `url` crate); `None` without one.
    pub fn of_url(url: &Url) -> Option<Host> {
        Some(match url.host()? {
            url::Host::Domain(name) => Host::Name(name.to_ascii_lowercase()),
            url::Host::Ipv4(ip) => Host::Ip(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => Host::Ip(IpAddr::V6(ip)),
        })
    }

    /// The host of a node named `host:port`, or the host itself when the node is named
    /// without its port (a configured node, or a bare IPv6 address such as `fe80::1`).
    ///
    /// # Errors
    /// When neither reading gives a host.
    pub fn of_node(text: &str) -> Result<Host, AddressError> {
        match NodeAddress::parse(text) {
            Ok(address) => Ok(address.host),
            Err(AddressError::NoPort(_)) => Host::parse(text),
            Err(error) => Err(error),
        }
    }

    /// A zone id is a name or number of an interface: neither empty nor holding what
    /// delimits an address.
    fn scoped(ip: Ipv6Addr, zone: &str) -> Option<Host> {
        let valid = !zone.is_empty()
            && zone
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        valid.then(|| Host::Scoped {
            ip,
            zone: zone.to_owned(),
        })
    }

    /// Whether it is written in brackets before a port (an IPv6 address).
    fn needs_brackets(&self) -> bool {
        matches!(self, Host::Ip(IpAddr::V6(_)) | Host::Scoped { .. })
    }
}

impl FromStr for Host {
    type Err = AddressError;
    fn from_str(text: &str) -> Result<Host, AddressError> {
        Host::parse(text)
    }
}

/// The normal form: `node-0`, `10.0.0.1`, `::1`, `fe80::1%eth0` (no brackets).
impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Scoped { ip, zone } => write!(f, "{ip}%{zone}"),
        }
    }
}

/// A Raft node's address: `host:port`, `[IPv6]:port`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeAddress {
    pub host: Host,
    pub port: u16,
}

impl NodeAddress {
    /// Reads `host:port`, `[IPv6]:port` or `[IPv6%zone]:port`.
    ///
    /// # Errors
    /// [`AddressError::NoPort`] for a host without a port (a bare IPv6 address included:
    /// `fe80::1` is not host `fe80:` on port 1); [`AddressError::Port`] for a port that is
    /// not 1 to 65535; [`AddressError::Host`] for what precedes it.
    pub fn parse(text: &str) -> Result<NodeAddress, AddressError> {
        // std reads `10.0.0.1:2222`, `[::1]:2222` and a numeric zone (`[fe80::1%2]:2222`).
        if let Ok(socket) = text.parse::<SocketAddr>() {
            let host = match socket {
                SocketAddr::V6(v6) if v6.scope_id() != 0 => Host::Scoped {
                    ip: *v6.ip(),
                    zone: v6.scope_id().to_string(),
                },
                _ => Host::Ip(socket.ip()),
            };
            return NodeAddress::with_port(host, socket.port(), text);
        }
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            // By hand: `[fe80::1%eth0]:2222` (std takes no named zone).
            let (host, port) = rest
                .split_once("]:")
                .ok_or_else(|| AddressError::NoPort(text.to_owned()))?;
            let host = Host::parse(host)?;
            if !host.needs_brackets() {
                return Err(AddressError::Host(text.to_owned()));
            }
            (host, port)
        } else {
            let Some((host, port)) = text.rsplit_once(':') else {
                return Err(AddressError::NoPort(text.to_owned()));
            };
            if host.contains(':') {
                // More colons: an IPv6 address, which takes its port only in brackets.
                return Err(if Host::parse(text).is_ok() {
                    AddressError::NoPort(text.to_owned())
                } else {
                    AddressError::Host(text.to_owned())
                });
            }
            (Host::parse(host)?, port)
        };
        let port = port
            .parse()
            .map_err(|_| AddressError::Port(text.to_owned()))?;
        NodeAddress::with_port(host, port, text)
    }

    fn with_port(host: Host, port: u16, text: &str) -> Result<NodeAddress, AddressError> {
        if port == 0 {
            return Err(AddressError::Port(text.to_owned()));
        }
        Ok(NodeAddress { host, port })
    }
}

impl FromStr for NodeAddress {
    type Err = AddressError;
    fn from_str(text: &str) -> Result<NodeAddress, AddressError> {
        NodeAddress::parse(text)
    }
}

/// `host:port`, IPv6 in brackets: `node-0:2222`, `[::1]:2222`, `[fe80::1%eth0]:2222`.
impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.needs_brackets() {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// An IP network in CIDR notation: `10.0.0.0/24`, `fd00::/64` (`[fd00::]/64` too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    /// Reads `address/prefix`, the prefix at most 32 (IPv4) or 128 (IPv6).
    ///
    /// # Errors
    /// When it is not an address, a `/` and such a prefix.
    pub fn parse(text: &str) -> Result<Network, AddressError> {
        let invalid = || AddressError::Network(text.to_owned());
        let (address, prefix) = text.split_once('/').ok_or_else(invalid)?;
        let address = match Host::parse(address) {
            Ok(Host::Ip(address)) => address,
            _ => return Err(invalid()),
        };
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = prefix
            .parse()
            .ok()
            .filter(|prefix| *prefix <= max)
            .ok_or_else(invalid)?;
        Ok(Network { address, prefix })
    }

    /// Whether `address` is in the network (never across IPv4 and IPv6).
    pub fn contains(&self, address: IpAddr) -> bool {
        match (address, self.address) {
            (IpAddr::V4(a), IpAddr::V4(n)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(a) & mask == u32::from(n) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(n)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(a) & mask == u128::from(n) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Host {
        Host::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    fn node(text: &str) -> NodeAddress {
        NodeAddress::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    #[test]
    fn hosts_have_one_normal_form() {
        for (text, normal) in [
            ("node-0", "node-0"),
            ("Node-0.Example.COM", "node-0.example.com"),
            ("10.0.0.1", "10.0.0.1"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("[0:0:0:0:0:0:0:1]", "::1"),
            ("FE80::1", "fe80::1"),
            ("fe80::1%eth0", "fe80::1%eth0"),
            ("[fe80::1%eth0]", "fe80::1%eth0"),
            ("fe80::1%2", "fe80::1%2"),
        ] {
            let parsed = host(text);
            assert_eq!(parsed.to_string(), normal, "{text}");
            assert_eq!(host(normal), parsed, "{normal} round-trips");
        }
        assert_eq!(host("10.0.0.1"), Host::Ip("10.0.0.1".parse().unwrap()));
        assert_eq!(host("[::1]"), host("0::1"));
        assert_eq!(
            host("fe80::1%eth0"),
            Host::Scoped {
                ip: "fe80::1".parse().unwrap(),
                zone: "eth0".into(),
            }
        );
        assert_ne!(host("fe80::1%eth0"), host("fe80::1%eth1"));
        assert_ne!(host("fe80::1%eth0"), host("fe80::1"));
    }

    #[test]
    fn what_is_no_host_is_refused() {
        for bad in [
            "",
            "a b",
            "node-0:2222",
            "http://node-0",
            "a/b",
            "user@host",
            "[node-0]",
            "[10.0.0.1]",
            "fe80::1%",
            "fe80::1%eth 0",
            "10.0.0.1%eth0",
            "[::1",
            "::g",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn node_addresses_in_every_form() {
        for (text, host_text, port, normal) in [
            ("10.0.0.1:2222", "10.0.0.1", 2222, "10.0.0.1:2222"),
            ("Node-0:2222", "node-0", 2222, "node-0:2222"),
            ("[::1]:2222", "::1", 2222, "[::1]:2222"),
            (
                "[fe80::1%eth0]:2222",
                "fe80::1%eth0",
                2222,
                "[fe80::1%eth0]:2222",
            ),
            ("[fe80::1%2]:2222", "fe80::1%2", 2222, "[fe80::1%2]:2222"),
            ("[FE80::0001]:1", "fe80::1", 1, "[fe80::1]:1"),
        ] {
            let parsed = node(text);
            assert_eq!(parsed.host, host(host_text), "{text}");
            assert_eq!(parsed.port, port, "{text}");
            assert_eq!(parsed.to_string(), normal, "{text}");
            assert_eq!(node(normal), parsed, "{normal} round-trips");
        }
    }

    #[test]
    fn a_bare_ipv6_address_has_no_port() {
        // Not host `fe80:` on port 1, nor `::1:2222` split at its last colon.
        for bare in [
            "fe80::1",
            "::1",
            "fe80::1:2222",
            "fe80::1%eth0",
            "[::1]",
            "node-0",
        ] {
            assert!(
                matches!(NodeAddress::parse(bare), Err(AddressError::NoPort(_))),
                "{bare}: {:?}",
                NodeAddress::parse(bare)
            );
        }
        // As a node's host, a bare address is the host itself.
        assert_eq!(Host::of_node("fe80::1").unwrap(), host("fe80::1"));
        assert_eq!(Host::of_node("node-0").unwrap(), host("node-0"));
        assert_eq!(Host::of_node("[::1]:2222").unwrap(), host("::1"));
        assert_eq!(Host::of_node("10.0.0.1:2222").unwrap(), host("10.0.0.1"));
    }

    #[test]
    fn bad_ports_and_hosts_are_refused() {
        for (bad, port) in [
            ("10.0.0.1:99999", true),
            ("10.0.0.1:0", true),
            ("10.0.0.1:", true),
            ("node-0:http", true),
            ("[::1]:x", true),
            ("a b:2222", false),
            ("[node-0]:2222", false),
            (":2222", false),
            ("fe80::g:2222", false),
        ] {
            let error = NodeAddress::parse(bad).unwrap_err();
            assert_eq!(
                matches!(error, AddressError::Port(_)),
                port,
                "{bad}: {error}"
            );
            assert!(Host::of_node(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_urls_host_is_the_same_host() {
        for (url, text) in [
            ("http://[::1]:8008/patroni", "::1"),
            ("https://Node-0:8008/", "node-0"),
            ("http://10.0.0.1:8008", "10.0.0.1"),
        ] {
            let url = Url::parse(url).unwrap();
            assert_eq!(Host::of_url(&url), Some(host(text)), "{url}");
        }
        assert_eq!(Host::of_url(&Url::parse("unix:/run/x").unwrap()), None);
    }

    #[test]
    fn networks_contain_their_addresses() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let net = Network::parse("10.0.0.0/24").unwrap();
        assert!(net.contains(ip("10.0.0.7")));
        assert!(!net.contains(ip("10.0.1.7")));
        assert!(!net.contains(ip("::ffff:10.0.0.7")));
        let v6 = Network::parse("[fd00::]/64").unwrap();
        assert_eq!(v6, Network::parse("fd00::/64").unwrap());
        assert!(v6.contains(ip("fd00::1")));
        assert!(!v6.contains(ip("fd01::1")));
        assert!(Network::parse("0.0.0.0/0")
            .unwrap()
            .contains(ip("192.0.2.1")));
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0",
            "node-0/24",
            "10.0.0.0/x",
            "/8",
        ] {
            assert!(Network::parse(bad).is_err(), "{bad}");
        }
    }
}
