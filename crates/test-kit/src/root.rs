//! Whether the tests run as root, and the one way a test that needs root skips itself
//! without it: with a line on stderr naming the test's module, so a run as a user shows what
//! it did not try (CI runs as root and so runs everything).

/// Whether the tests run as root (pods, namespaces, mounts and firewall rules need it).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Returns early from the test, saying so on stderr, when not root.
///
/// ```ignore
/// #[test]
/// fn a_pod_runs() {
///     test_kit::require_root!();
///     // ...
/// }
/// ```
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            eprintln!("skipping {}: needs root", module_path!());
            return;
        }
    };
}
