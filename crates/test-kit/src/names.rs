//! Unique names for what tests running at once share with the host: network namespaces,
//! networks, subnets, links, files.

/// Eight random hex digits (32 bits): tests running at once never share a name.
///
/// Eight, so that every name made from it fits its limit: an interface name takes at most
/// 15 bytes (IFNAMSIZ 16 with its NUL), and the longest prefix a test gives a link is two
/// bytes (`lk<unique>`, 10); namespace and network names (`mh<unique>-lan`,
/// `rkt-test-a-<unique>`) have no such limit but stay short in `ip` output. A caller that
/// needs a number reads the first hex digits (`u32::from_str_radix(&id[..4], 16)`).
pub fn unique() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn unique_names_are_eight_hex_digits_and_differ() {
        let (a, b) = (super::unique(), super::unique());
        assert_eq!(a.len(), 8);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }
}
