//! The one polling loop of the tests: a deadline for a hung step, not a timing assertion.

use std::time::{Duration, Instant};

/// How long a step may take before the test is taken for hung: one minute, long enough for
/// a loaded two-core machine, short enough to fail a hung test.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `f` every 20 ms until it returns something and returns that; panics naming `what`
/// after `limit` ([`PATIENCE`] unless the step should be quick).
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_for_returns_the_first_value() {
        let mut n = 0;
        let got = wait_for("the third try", PATIENCE, || {
            n += 1;
            (n == 3).then_some(n)
        });
        assert_eq!(got, 3);
    }

    #[test]
    #[should_panic(expected = "gave up waiting for nothing")]
    fn wait_for_names_what_it_gave_up_on() {
        wait_for("nothing", Duration::from_millis(50), || None::<()>);
    }
}
