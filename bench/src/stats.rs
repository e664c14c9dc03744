//! Samples, medians and alternating runs.

use std::time::Duration;

use crate::error::BenchError;
use crate::proc::check_interrupt;

/// The wall times of one variant, and the CPU time (user + system) its processes used.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub label: String,
    pub samples: Vec<Duration>,
    /// CPU time of every process of each run (empty where not measured).
    pub cpu: Vec<Duration>,
}

/// User plus system time of every child and descendant reaped so far.
pub fn children_cpu() -> Duration {
    // SAFETY: an all-zero rusage is a valid output buffer for getrusage, which only
    // writes into it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

impl Series {
    /// The median CPU time, or `None` when not measured.
    pub fn cpu_median(&self) -> Option<Duration> {
        if self.cpu.is_empty() {
            return None;
        }
        let s = Series {
            samples: self.cpu.clone(),
            ..Series::default()
        };
        Some(s.median())
    }

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
/// variant runs once, the order rotating each round so none always goes first. A variant's
/// CPU time is that of the processes it started and waited for (`RUSAGE_CHILDREN`).
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
            cpu: Vec::with_capacity(iterations),
        })
        .collect();
    let n = variants.len();
    for round in 0..iterations {
        for k in 0..n {
            let idx = (round + k) % n;
            check_interrupt()?;
            let cpu_before = children_cpu();
            let d = (variants[idx].1)()?;
            series[idx].samples.push(d);
            series[idx]
                .cpu
                .push(children_cpu().saturating_sub(cpu_before));
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
