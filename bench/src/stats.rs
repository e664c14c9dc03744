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

/// Per round, `a`'s value over `b`'s (the two measured in the same round). A `b` of zero
/// (nothing measured) counts as 1e-9, so that its ratio is huge rather than infinite.
pub fn per_round(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y.max(1e-9)).collect()
}

/// Durations in seconds.
pub fn secs(v: &[Duration]) -> Vec<f64> {
    v.iter().map(Duration::as_secs_f64).collect()
}

/// The median of `values` (the mean of the middle two for an even count); 0 without any.
pub fn median_f64(values: &[f64]) -> f64 {
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// A 95% confidence interval of the median of `values`, from order statistics: the sample
/// values of ranks `j` and `k` such that the true median lies between them with probability
/// at least 95% whatever the distribution (the count of values below the median is
/// binomial(n, 1/2)). `None` below 6 values, where no such pair of ranks exists.
pub fn median_ci(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < 6 {
        return None;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    // P(B < j) for B ~ binomial(n, 1/2), summed in log space so large n does not overflow.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut below = 0.0f64;
    let mut j = 0usize; // the largest j with P(B < j) <= 2.5%
    for i in 0..n {
        let p = (ln_choose + ln_half_n).exp();
        if below + p > 0.025 {
            break;
        }
        below += p;
        j = i + 1;
        ln_choose += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    // Ranks j and n-j+1 (1-based) hold the median with probability 1 - 2 P(B < j) >= 95%.
    if j == 0 {
        return None;
    }
    Some((s[j - 1], s[n - j]))
}

/// The interval a verdict is judged on: the median's 95% interval ([`median_ci`]), or with
/// too few values for one, the range of all of them (a target then holds only when every
/// round holds it).
pub fn verdict_interval(values: &[f64]) -> (f64, f64) {
    median_ci(values).unwrap_or_else(|| {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if values.is_empty() {
            (f64::NAN, f64::NAN)
        } else {
            (lo, hi)
        }
    })
}

/// A small deterministic random number generator (xorshift64*), so a bootstrap gives the
/// same interval for the same samples.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// The difference of the medians of `b` and `a` with a 95% percentile-bootstrap interval
/// (`resamples` resamples of each, drawn independently: the two sets are measured at
/// different times). `None` when either is empty.
pub fn median_diff_ci(a: &[f64], b: &[f64], resamples: usize) -> Option<(f64, f64, f64)> {
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut draw = |v: &[f64], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend((0..v.len()).map(|_| v[rng.below(v.len())]));
        median_f64(buf)
    };
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    let mut diffs: Vec<f64> = (0..resamples)
        .map(|_| draw(b, &mut rb) - draw(a, &mut ra))
        .collect();
    diffs.sort_by(f64::total_cmp);
    let at = |q: f64| diffs[((q * resamples as f64) as usize).min(resamples - 1)];
    Some((median_f64(b) - median_f64(a), at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_ci_uses_the_binomial_ranks() {
        // For n = 10 the 95% interval is ranks 2 and 9 (coverage 97.9%; ranks 3 and 8 give
        // only 89.1%).
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(median_ci(&v), Some((2.0, 9.0)));
        // n = 100: ranks 40 and 61 (the tabulated order-statistic interval).
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(median_ci(&v), Some((40.0, 61.0)));
        // Unsorted input is sorted first; too few values give no interval.
        assert_eq!(
            median_ci(&[9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0, 10.0]),
            Some((2.0, 9.0))
        );
        assert_eq!(median_ci(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
        // Too few for an interval: every round counts.
        assert_eq!(verdict_interval(&[3.0, 1.0, 2.0]), (1.0, 3.0));
        assert_eq!(verdict_interval(&v), median_ci(&v).unwrap());
    }

    #[test]
    fn the_bootstrap_interval_holds_the_difference_and_shrinks_with_more_samples() {
        let spread = |n: usize, shift: f64| -> Vec<f64> {
            (0..n).map(|i| shift + (i % 21) as f64 - 10.0).collect()
        };
        let (d, lo, hi) = median_diff_ci(&spread(60, 0.0), &spread(60, 5.0), 2000).unwrap();
        assert_eq!(d, 5.0);
        assert!(lo <= 5.0 && 5.0 <= hi && lo < hi, "{lo} {hi}");
        let (_, lo2, hi2) = median_diff_ci(&spread(600, 0.0), &spread(600, 5.0), 2000).unwrap();
        assert!(hi2 - lo2 < hi - lo, "{lo2}..{hi2} vs {lo}..{hi}");
        assert_eq!(median_diff_ci(&[], &[1.0], 100), None);
    }
}
