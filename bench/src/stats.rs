//! Samples, medians and alternating runs.

use std::time::Duration;

use crate::error::BenchError;
use crate::proc::check_interrupt;

/// The wall times of one variant.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub label: String,
    pub samples: Vec<Duration>,
}

impl Series {
    fn sorted(&self) -> Vec<Duration> {
        let mut s = self.samples.clone();
        s.sort();
        s
    }

    /// The median (the mean of the middle two for an even count); zero without samples.
    pub fn median(&self) -> Duration {
        let s = self.sorted();
        match s.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2,
        }
    }

    /// The fastest sample.
    pub fn min(&self) -> Duration {
        self.sorted().first().copied().unwrap_or_default()
    }

    /// The 90th percentile (nearest rank).
    pub fn p90(&self) -> Duration {
        let s = self.sorted();
        if s.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((s.len() as f64) * 0.9).ceil() as usize;
        s[rank.clamp(1, s.len()) - 1]
    }
}

/// A variant: a label and one timed run.
pub type Variant<'a> = (
    &'a str,
    Box<dyn FnMut() -> Result<Duration, BenchError> + 'a>,
);

/// Runs every variant `warmup` times unrecorded, then `iterations` rounds in which each
/// variant runs once, the order rotating each round so none always goes first.
pub fn alternate(
    variants: &mut [Variant<'_>],
    warmup: usize,
    iterations: usize,
) -> Result<Vec<Series>, BenchError> {
    for _ in 0..warmup {
        for (_, run) in variants.iter_mut() {
            check_interrupt()?;
            run()?;
        }
    }
    let mut series: Vec<Series> = variants
        .iter()
        .map(|(label, _)| Series {
            label: label.to_string(),
            samples: Vec::with_capacity(iterations),
        })
        .collect();
    let n = variants.len();
    for round in 0..iterations {
        for k in 0..n {
            let idx = (round + k) % n;
            check_interrupt()?;
            let d = (variants[idx].1)()?;
            series[idx].samples.push(d);
        }
    }
    Ok(series)
}

/// `12.3 ms`, `1.23 s` or `456 µs`.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

/// `a / b`, or 0 when `b` is zero.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        0.0
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}
