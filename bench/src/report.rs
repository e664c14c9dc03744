//! The markdown report: the targets with their figures and verdicts, every median, and the
//! machine and date; and splicing it into docs/PERFORMANCE.md between markers.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::error::BenchError;
use crate::rss::Peaks;
use crate::scenarios::{ManyResult, ScaleResult};
use crate::stats::{
    fmt_duration, median_ci, median_diff_ci, median_f64, per_round, ratio, secs, verdict_interval,
    Series,
};

/// The markers in docs/PERFORMANCE.md between which the latest report goes.
pub const BEGIN: &str = "<!-- bench:results:begin -->";
pub const END: &str = "<!-- bench:results:end -->";

/// Everything one run measured; a scenario left out with `--only` is `None`.
#[derive(Debug, Default)]
pub struct Results {
    pub iterations: usize,
    pub warmup: usize,
    pub real: Option<Vec<Series>>,
    pub noop: Option<Vec<Series>>,
    pub scale: Option<ScaleResult>,
    pub many: Option<ManyResult>,
    pub memory: Option<Vec<Peaks>>,
    pub busy: Option<crate::busy::BusyResult>,
    pub pull: Option<crate::pull::PullResult>,
    pub image_start: Option<crate::image_start::ImageStartResult>,
    pub app_start: Option<crate::app_start::AppStartResult>,
    pub logs: Option<crate::log_throughput::LogResult>,
    pub cri: Option<crate::cri::CriResult>,
}

/// The limit of scenario 5, in KiB.
const RSS_LIMIT_KIB: u64 = 8 * 1024;

fn holds(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

fn mib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

/// The machine: CPU model, `nproc`, kernel.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, m)| m.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    format!("{model}, nproc {nproc}, Linux {kernel}")
}

/// The median of the series at `i`.
fn med(s: &[Series], i: usize) -> Duration {
    s.get(i).map(Series::median).unwrap_or_default()
}

/// The median of the series labelled `label`, formatted, or a dash.
fn opt_what(s: &[Series], label: &str) -> String {
    s.iter()
        .find(|x| x.label == label)
        .map(|x| fmt_duration(x.median()))
        .unwrap_or_else(|| "—".into())
}

/// The median of the series labelled `label` over the median of the series at `base`.
fn ratio_what(s: &[Series], label: &str, base: usize) -> String {
    s.iter()
        .find(|x| x.label == label)
        .map(|x| format!("{:.2}×", ratio(x.median(), med(s, base))))
        .unwrap_or_else(|| "—".into())
}

/// Medians of three series, by position.
fn medians3(s: &[Series]) -> (Duration, Duration, Duration) {
    let m = |i: usize| s.get(i).map(Series::median).unwrap_or_default();
    (m(0), m(1), m(2))
}

/// `yes` when the whole interval meets the target, `**no**` when none of it does, and
/// `not resolved` when it straddles the target.
fn holds_ci(lo: f64, hi: f64, limit: f64) -> &'static str {
    if hi <= limit {
        "yes"
    } else if lo > limit {
        "**no**"
    } else {
        "not resolved (the interval holds the target)"
    }
}

/// What a check for leftovers found, as a table cell: `nothing`, or how many and the first.
fn leftovers_cell(found: &[String]) -> String {
    match found.first() {
        None => "nothing".to_string(),
        Some(first) => format!("{} (first: {})", found.len(), first.replace('|', "/")),
    }
}

/// `+1.2 ms [+0.4, +2.0]`: a median and its 95% interval, in milliseconds.
fn ms_ci(values: &[f64]) -> String {
    let m = median_f64(values) * 1e3;
    match median_ci(values) {
        Some((lo, hi)) => format!("{m:+.1} ms [{:+.1}, {:+.1}]", lo * 1e3, hi * 1e3),
        None => format!("{m:+.1} ms"),
    }
}

/// Scenario 6's rows of the targets table: rkt against scripted libcni at every load, rkt's
/// excess over the plugin floor at the largest load against no load, and the throughput of
/// starting and stopping the largest load at once.
fn render_busy_targets(out: &mut String, b: &crate::busy::BusyResult) {
    for l in &b.loads {
        let (rkt, libcni, floor) = medians3(&l.series);
        let r = median_f64(&l.ratio);
        let (lo, hi) = verdict_interval(&l.ratio);
        let _ = writeln!(
            out,
            "| 6 | busy host, {} other pods: pod cycle vs scripted libcni (floor {}; {} rounds) | rkt run {} / libcni {}; per round {r:.3}× [{lo:.3}, {hi:.3}] | {:.2}× | ≤ 1.0× | {} |",
            l.load,
            fmt_duration(floor),
            l.excess.len(),
            fmt_duration(rkt),
            fmt_duration(libcni),
            ratio(rkt, libcni),
            holds_ci(lo, hi, 1.0)
        );
    }
    if let (Some(idle), Some(busy)) = (b.loads.first(), b.loads.last()) {
        if let Some((d, lo, hi)) = median_diff_ci(&idle.excess, &busy.excess, 10_000) {
            let _ = writeln!(
                out,
                "| 6 | busy host: rkt's excess over the floor (per round), {} pods vs {} | {} vs {} | {:+.1} ms [{:+.1}, {:+.1}] | ≤ +2 ms | {} |",
                busy.load,
                idle.load,
                ms_ci(&busy.excess),
                ms_ci(&idle.excess),
                d * 1e3,
                lo * 1e3,
                hi * 1e3,
                holds_ci(lo, hi, 0.002)
            );
        }
        if let Some((d, lo, hi)) = median_diff_ci(&idle.cpu_excess, &busy.cpu_excess, 10_000) {
            let _ = writeln!(
                out,
                "| 6 | busy host: the same in CPU time (user + sys of each cycle's processes, less sensitive to contention) | {} vs {} | {:+.1} ms [{:+.1}, {:+.1}] | — | — |",
                ms_ci(&busy.cpu_excess),
                ms_ci(&idle.cpu_excess),
                d * 1e3,
                lo * 1e3,
                hi * 1e3
            );
        }
    }
    let nat_lines = b.loads.last().map(|l| l.nat.lines).unwrap_or(0);
    for (what, batch) in [("started", &b.start_all), ("stopped", &b.stop_all)] {
        if batch.pods == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "| 6 | busy host: {} pods {what} at once (nat table: {} lines) | {} ({:.1} pods/s), {} failures{} | — | 0 failures | {} |",
            batch.pods,
            nat_lines,
            fmt_duration(batch.took),
            batch.per_second(),
            batch.failures.len(),
            batch
                .failures
                .first()
                .map(|f| format!(" (first: {})", f.replace('|', "/")))
                .unwrap_or_default(),
            holds(batch.failures.is_empty())
        );
    }
    if b.leak_checked {
        let _ = writeln!(
            out,
            "| 6 | busy host: left after the last stop and `rkt gc` (namespaces, links, rules and chains, leases, cache entries, pods, cgroups) | {} | — | nothing | {} |",
            leftovers_cell(&b.leaks),
            holds(b.leaks.is_empty())
        );
    }
}

/// Scenario 6 per load: the rounds, the machine's load, the paired differences with their
/// 95% intervals, and the firewall's size and cost.
fn render_busy_details(out: &mut String, b: &crate::busy::BusyResult) {
    let _ = writeln!(
        out,
        "\nScenario 6 per load (rounds of `rkt run`, plugin floor and scripted libcni at the same \
moment, `rkt run` always next to the floor; at most {} s of rounds per load, fewer once the \
excess's interval is within ±1 ms). Differences are per round: median [95% interval of the \
median, from order statistics]. *iptables* is one run of `iptables -t nat -S` (the whole \
table) and of `iptables -t nat -S POSTROUTING` (one chain), medians of 5. The same `rkt run` \
with `fsync` a no-op (LD_PRELOAD) runs in each round too, first or last in turn.\n",
        b.budget.as_secs()
    );
    out.push_str("| other pods | rounds (time) | load average before → after | rkt − floor | libcni − floor | CPU: rkt − floor | rkt − rkt with fsync a no-op | nat table | iptables: table / one chain |\n|---|---|---|---|---|---|---|---|---|\n");
    let ci_or_dash = |v: &[f64]| {
        if v.is_empty() {
            "—".to_string()
        } else {
            ms_ci(v)
        }
    };
    for l in &b.loads {
        let _ = writeln!(
            out,
            "| {} | {} ({:.0} s) | {:.2} → {:.2} | {} | {} | {} | {} | {} lines | {} / {} |",
            l.load,
            l.excess.len(),
            l.took.as_secs_f64(),
            l.loadavg.0,
            l.loadavg.1,
            ms_ci(&l.excess),
            ms_ci(&l.libcni_excess),
            ms_ci(&l.cpu_excess),
            ci_or_dash(&l.fsync_cost),
            l.nat.lines,
            fmt_duration(l.nat.save),
            fmt_duration(l.nat.list_chain)
        );
    }
    if b.loads.iter().any(|l| !l.candidate_diff.is_empty()) {
        out.push_str("\nThe candidate (`--candidate-rkt`) in the same rounds, first or last in turn:\n\n| other pods | candidate − rkt run | CPU: candidate − rkt run |\n|---|---|---|\n");
        for l in &b.loads {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                l.load,
                ci_or_dash(&l.candidate_diff),
                ci_or_dash(&l.candidate_cpu_diff)
            );
        }
    }
}

/// `0.42× [0.40, 0.45]`: the median of per-round ratios and its 95% interval.
fn ratio_ci(values: &[f64]) -> String {
    let m = median_f64(values);
    match median_ci(values) {
        Some((lo, hi)) => format!("{m:.2}× [{lo:.2}, {hi:.2}]"),
        None => {
            let (lo, hi) = verdict_interval(values);
            format!("{m:.2}× (rounds {lo:.2} to {hi:.2})")
        }
    }
}

/// The verdict for a per-round ratio against an upper `limit`.
fn ratio_holds(values: &[f64], limit: f64) -> &'static str {
    let (lo, hi) = verdict_interval(values);
    holds_ci(lo, hi, limit)
}

/// Scenario 9's rows: the app's start into the sandbox against the whole pod, per network.
fn render_app_start_targets(out: &mut String, a: &crate::app_start::AppStartResult) {
    use crate::app_start::{ADD_START, IMAGE_ADD_START, IMAGE_RUN, RUN, RUN_DETACH, START_ONLY};
    let m = |n: &crate::app_start::NetRun, l: &str| {
        n.get(l)
            .map(|s| fmt_duration(s.median()))
            .unwrap_or_else(|| "—".into())
    };
    for n in &a.nets {
        for (what, app, whole) in [
            ("add + start of /bin/true vs `rkt run`", ADD_START, RUN),
            ("start alone of /bin/true vs `rkt run`", START_ONLY, RUN),
            (
                "add + start of /bin/true vs `rkt run --detach` (until it runs)",
                ADD_START,
                RUN_DETACH,
            ),
            (
                "add + start of a stored image vs `rkt run IMAGE`",
                IMAGE_ADD_START,
                IMAGE_RUN,
            ),
        ] {
            let per_round = n.per_round(app, whole);
            if per_round.is_empty() {
                continue;
            }
            let target = app == ADD_START && whole == RUN || app == IMAGE_ADD_START;
            let _ = writeln!(
                out,
                "| 9 | app into a running sandbox, --net={}: {what} (per round) | {} / {} | {} | {} | {} |",
                n.net,
                m(n, app),
                m(n, whole),
                ratio_ci(&per_round),
                if target { "≤ 0.5×" } else { "—" },
                if target { ratio_holds(&per_round, 0.5) } else { "—" }
            );
        }
    }
    if let Some(why) = &a.no_image {
        let _ = writeln!(
            out,
            "| 9 | image app left out | {} | — | — | — |",
            why.replace('|', "/")
        );
    }
    let _ = writeln!(
        out,
        "| 9 | left after the sandboxes stopped and `rkt gc` (the leak checker) | {} | — | nothing | {} |",
        leftovers_cell(&a.leaks),
        holds(a.leaks.is_empty())
    );
}

/// Scenario 10's rows: rkt's two log paths against podman's, wall and CPU time.
fn render_log_targets(out: &mut String, l: &crate::log_throughput::LogResult) {
    use crate::log_throughput::{FLOOR, PODMAN, RKT_RUN, RKT_RUN_CANDIDATE, RKT_SANDBOX};
    let mib = (l.bytes >> 20) as f64;
    let cell = |label: &str| {
        l.get(label)
            .map(|s| {
                format!(
                    "{} (CPU {}, {:.0} MiB/s)",
                    fmt_duration(s.median()),
                    s.cpu_median().map(fmt_duration).unwrap_or_default(),
                    mib / s.median().as_secs_f64().max(1e-9)
                )
            })
            .unwrap_or_else(|| "—".into())
    };
    for rkt in [RKT_RUN, RKT_SANDBOX, RKT_RUN_CANDIDATE] {
        if l.get(rkt).is_none() {
            continue;
        }
        if l.get(PODMAN).is_some() {
            for (cpu, what) in [(false, "wall"), (true, "CPU")] {
                let per_round = l.per_round(rkt, PODMAN, cpu);
                let _ = writeln!(
                    out,
                    "| 10 | {} MiB of lines through the log, {what} time: {rkt} vs podman (per round) | {} / {} | {} | ≤ 0.8× | {} |",
                    l.bytes >> 20,
                    cell(rkt),
                    cell(PODMAN),
                    ratio_ci(&per_round),
                    ratio_holds(&per_round, 0.8)
                );
            }
        }
        let per_round = l.per_round(rkt, FLOOR, false);
        let _ = writeln!(
            out,
            "| 10 | {rkt} vs the floor (no logger), wall | {} / {} | {} | — | — |",
            cell(rkt),
            cell(FLOOR),
            ratio_ci(&per_round)
        );
    }
    if l.get(RKT_RUN_CANDIDATE).is_some() {
        for (cpu, what) in [(false, "wall"), (true, "CPU")] {
            let per_round = l.per_round(RKT_RUN, RKT_RUN_CANDIDATE, cpu);
            let _ = writeln!(
                out,
                "| 10 | {what} time: {RKT_RUN} vs the candidate's (per round) | {} / {} | {} | — | — |",
                cell(RKT_RUN),
                cell(RKT_RUN_CANDIDATE),
                ratio_ci(&per_round)
            );
        }
    }
    if let Some(why) = &l.no_podman {
        let _ = writeln!(out, "| 10 | podman left out | {why} | — | — | — |");
    }
    for (label, runs, whole) in &l.checked {
        let _ = writeln!(
            out,
            "| 10 | every line in the log, whole and once: {label} | {whole} of {runs} runs | — | all | {} |",
            holds(runs == whole && *runs > 0)
        );
    }
}

/// The verdict for a per-round ratio against a lower `limit`.
fn ratio_holds_min(values: &[f64], limit: f64) -> &'static str {
    let (lo, hi) = verdict_interval(values);
    if lo >= limit {
        "yes"
    } else if hi < limit {
        "**no**"
    } else {
        "not resolved (the interval holds the target)"
    }
}

/// Scenarios 11 to 13's rows: rkt-cri against containerd.
fn render_cri_targets(out: &mut String, c: &crate::cri::CriResult) {
    use crate::cri::Client;
    use crate::cri_world::Kind::{Containerd, RktCri};
    let pair = |client| Some((c.cycle(RktCri, client)?, c.cycle(Containerd, client)?));
    if let Some((rkt, ctd)) = pair(Client::OneProcess) {
        for (cpu, what) in [(false, "wall"), (true, "CPU")] {
            let pick = |s: &Series| secs(if cpu { &s.cpu } else { &s.samples });
            let med = |s: &Series| {
                if cpu {
                    s.cpu_median().unwrap_or_default()
                } else {
                    s.median()
                }
            };
            let ratios = per_round(&pick(&rkt.whole), &pick(&ctd.whole));
            let _ = writeln!(
                out,
                "| 11 | a CRI pod's life (RunPodSandbox, CreateContainer, StartContainer, StopContainer, RemoveContainer, StopPodSandbox, RemovePodSandbox) through one client process with one connection, as kubelet, {what} time{}: rkt-cri vs containerd (per round) | {} / {} | {} | ≤ 0.5× | {} |",
                if cpu {
                    " of the runtime's processes"
                } else {
                    " of the seven RPCs"
                },
                fmt_duration(med(&rkt.whole)),
                fmt_duration(med(&ctd.whole)),
                ratio_ci(&ratios),
                ratio_holds(&ratios, 0.5)
            );
        }
    }
    if let Some((rkt, ctd)) = pair(Client::Crictl) {
        let ratios = per_round(&secs(&rkt.whole.samples), &secs(&ctd.whole.samples));
        let floor = if c.floor.samples.is_empty() {
            String::new()
        } else {
            format!(
                "; crictl's own floor, 7 × `crictl version`: {}",
                fmt_duration(c.floor.median())
            )
        };
        let _ = writeln!(
            out,
            "| 11 | for information, the same life through crictl, a process per command (runp, create, start, stop, rm, stopp, rmp{floor}), wall time: rkt-cri vs containerd (per round) | {} / {} | {} | — | — |",
            fmt_duration(rkt.whole.median()),
            fmt_duration(ctd.whole.median()),
            ratio_ci(&ratios),
        );
    }
    if let (Some(rkt), Some(ctd)) = (c.many_of(RktCri), c.many_of(Containerd)) {
        let (tr, tc) = (rkt.throughputs(c.pods), ctd.throughputs(c.pods));
        let ratios = per_round(&tr, &tc);
        let _ = writeln!(
            out,
            "| 12 | {} pods at once through the CRI (one client process, a goroutine per pod: RunPodSandbox + CreateContainer + StartContainer), throughput: rkt-cri vs containerd (per round, {} rounds) | {:.1} / {:.1} pods/s | {} | ≥ 2× | {} |",
            c.pods,
            ratios.len(),
            median_f64(&tr),
            median_f64(&tc),
            ratio_ci(&ratios),
            ratio_holds_min(&ratios, 2.0)
        );
        let errors: usize = rkt
            .rounds
            .iter()
            .chain(&ctd.rounds)
            .map(|r| r.errors.len() + r.not_running)
            .sum();
        let _ = writeln!(
            out,
            "| 12 | pods that failed to come up, to run or to go (both runtimes, every round) | {errors} | — | none | {} |",
            holds(errors == 0)
        );
        let memory_measured = rkt
            .rounds
            .iter()
            .chain(&ctd.rounds)
            .any(|r| r.memory.is_some());
        if memory_measured {
            for (pss, what) in [(true, "PSS"), (false, "RSS")] {
                let kib = |m: &crate::cri::ManyRuntime| -> Vec<f64> {
                    m.rounds
                        .iter()
                        .filter_map(|r| r.memory.as_ref())
                        .map(|x| (if pss { x.pss_kib } else { x.rss_kib }) as f64)
                        .collect()
                };
                let (kr, kc) = (kib(rkt), kib(ctd));
                let ratios = per_round(&kr, &kc);
                let _ = writeln!(
                    out,
                    "| 13 | memory ({what}) of the runtime's processes with {} pods running, the containers' own left out: rkt-cri vs containerd + shims (per round) | {} / {} | {} | {} | {} |",
                    c.pods,
                    mib(median_f64(&kr) as u64),
                    mib(median_f64(&kc) as u64),
                    ratio_ci(&ratios),
                    if pss { "≤ 0.25×" } else { "—" },
                    if pss { ratio_holds(&ratios, 0.25) } else { "—" }
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "| 11–13 | left behind at the end (processes in the runtimes' cgroups, host-local leases, mounts) | {} | — | nothing | {} |",
        leftovers_cell(&c.leftovers),
        holds(c.leftovers.is_empty())
    );
}

/// Scenarios 11 to 13's details: every cycle figure, each round, memory by role.
fn render_cri_details(out: &mut String, c: &crate::cri::CriResult) {
    if !c.cycles.is_empty() {
        out.push_str(
            "\nScenario 11, a CRI pod's life (medians; CPU: the runtime's cgroups, cpuacct). \
             Up: RunPodSandbox + CreateContainer + StartContainer (crictl runp, create, start); \
             down: StopContainer + RemoveContainer + StopPodSandbox + RemovePodSandbox (crictl \
             stop, rm, stopp, rmp). The one-process client's times are its RPCs' as it saw \
             them; crictl's include its seven process starts:\n\n",
        );
        out.push_str("| runtime | client | version | whole cycle | min | p90 | up | down | CPU time |\n|---|---|---|---|---|---|---|---|---|\n");
        for r in &c.cycles {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.kind.label(),
                r.client.describe(),
                r.version,
                fmt_duration(r.whole.median()),
                fmt_duration(r.whole.min()),
                fmt_duration(r.whole.p90()),
                fmt_duration(r.up.median()),
                fmt_duration(r.down.median()),
                r.whole.cpu_median().map(fmt_duration).unwrap_or_default()
            );
        }
        let f = &c.floor;
        let _ = writeln!(
            out,
            "| — | {} | — | {} | {} | {} | — | — | — |",
            f.label,
            fmt_duration(f.median()),
            fmt_duration(f.min()),
            fmt_duration(f.p90())
        );
    }
    for m in &c.many {
        let _ = writeln!(
            out,
            "\nScenarios 12 and 13, {}, {} pods at once, each round:\n",
            m.kind.label(),
            c.pods
        );
        out.push_str("| round | all running after | pods/s | CPU meanwhile (the client's) | stop + remove all at once | CPU meanwhile | failed | running | PSS (RSS) with the pods | server alone before |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for (i, (r, per_s)) in m.rounds.iter().zip(m.throughputs(c.pods)).enumerate() {
            let mem = |x: &Option<crate::cri::Memory>| {
                x.as_ref()
                    .map(|x| format!("{} ({})", mib(x.pss_kib), mib(x.rss_kib)))
                    .unwrap_or_else(|| "—".into())
            };
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} ({}) | {} | {} | {} | {} | {} | {} |",
                i + 1,
                fmt_duration(r.start),
                per_s,
                fmt_duration(r.start_cpu),
                fmt_duration(r.client_cpu),
                fmt_duration(r.stop),
                fmt_duration(r.stop_cpu),
                r.errors.len() + r.not_running,
                r.running,
                mem(&r.memory),
                mem(&r.idle)
            );
        }
        if let Some(mem) = m.rounds.iter().rev().find_map(|r| r.memory.as_ref()) {
            let _ = writeln!(
                out,
                "\n{}'s processes by role, last round (the containers' own: {} processes, {} PSS, left out):\n",
                m.kind.label(),
                mem.workload_count,
                mib(mem.workload_pss_kib)
            );
            out.push_str("| role | processes | PSS | RSS |\n|---|---|---|---|\n");
            for (role, n, pss, rss) in &mem.roles {
                let _ = writeln!(out, "| {role} | {n} | {} | {} |", mib(*pss), mib(*rss));
            }
        }
        for e in m.rounds.iter().flat_map(|r| &r.errors).take(3) {
            let _ = writeln!(
                out,
                "\n{} failure: `{}`",
                m.kind.label(),
                e.replace('`', "'")
            );
        }
    }
    // The targets' table shows the first only.
    for l in &c.leftovers {
        let _ = writeln!(out, "\nLeft behind: `{}`", l.replace('`', "'"));
    }
}

/// The report in markdown.
pub fn render(r: &Results) -> String {
    let mut out = String::new();
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let _ = writeln!(out, "- Date: {now}");
    let _ = writeln!(out, "- Machine: {}", machine());
    let _ = writeln!(
        out,
        "- Runs: {} per variant after {} warm-up, variants alternating (order rotating each round); medians.",
        r.iterations, r.warmup
    );
    out.push('\n');
    out.push_str("| # | what | measured (medians) | ratio | target | holds |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    if let Some(s) = &r.real {
        let (rkt, libcni, floor) = medians3(s);
        let _ = writeln!(
            out,
            "| 1 | pod cycle, ptp + host-local, vs the plugin floor | rkt run {} / floor {} | {:.2}× | ≤ 1.05× | {} |",
            fmt_duration(rkt),
            fmt_duration(floor),
            ratio(rkt, floor),
            holds(ratio(rkt, floor) <= 1.05)
        );
        let _ = writeln!(
            out,
            "| 1 | pod cycle, ptp + host-local, vs scripted libcni | rkt run {} / libcni {} | {:.2}× | ≤ 0.85× | {} |",
            fmt_duration(rkt),
            fmt_duration(libcni),
            ratio(rkt, libcni),
            holds(ratio(rkt, libcni) <= 0.85)
        );
    }
    if let Some(s) = &r.noop {
        let (rkt, libcni, _) = medians3(s);
        let _ = writeln!(
            out,
            "| 2 | runtime overhead: the cycle with a do-nothing plugin | rkt run {} / libcni {} | {:.2}× | ≤ 0.5× | {} |",
            fmt_duration(rkt),
            fmt_duration(libcni),
            ratio(rkt, libcni),
            holds(ratio(rkt, libcni) <= 0.5)
        );
    }
    if let Some(s) = &r.scale {
        let (ours, libcni) = (s.ours.median(), s.libcni.median());
        let _ = writeln!(
            out,
            "| 3 | load {} configurations, pick the last | crates/cni {} / libcni {} | {:.2}× | ≤ 0.5× | {} |",
            s.files,
            fmt_duration(ours),
            fmt_duration(libcni),
            ratio(ours, libcni),
            holds(ratio(ours, libcni) <= 0.5)
        );
    }
    if let Some(m) = &r.many {
        let conc = m.concurrent.median();
        let seq = m.sequential.median();
        let per_s = |d: Duration| m.pods as f64 / d.as_secs_f64().max(1e-9);
        let _ = writeln!(
            out,
            "| 4 | {} pods at once vs one after another: throughput | {:.1} pods/s ({}) / {:.1} pods/s ({}) | {:.2}× | ≥ 1.5× | {} |",
            m.pods,
            per_s(conc),
            fmt_duration(conc),
            per_s(seq),
            fmt_duration(seq),
            ratio(seq, conc),
            holds(ratio(seq, conc) >= 1.5)
        );
        let _ = writeln!(
            out,
            "| 4 | {} pods at once: failures, duplicate addresses ({} batches) | {} failures, {} duplicates | — | 0, 0 | {} |",
            m.pods,
            m.concurrent.samples.len() + m.sequential.samples.len(),
            m.failures,
            m.duplicates,
            holds(m.failures == 0 && m.duplicates == 0)
        );
    }
    if let Some(p) = &r.memory {
        let runner = p.iter().map(|p| p.runner_kib).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "| 5 | peak RSS of `rkt run` (the runner; largest of {} runs) | {} | — | ≤ 8 MiB | {} |",
            p.len(),
            mib(runner),
            holds(runner > 0 && runner <= RSS_LIMIT_KIB)
        );
    }
    if let Some(b) = &r.busy {
        render_busy_targets(&mut out, b);
    }
    if let Some(p) = &r.pull {
        for (when, s) in [("cold", &p.cold), ("warm", &p.warm)] {
            let (rkt, oci) = (med(s, 0), med(s, 1));
            let _ = writeln!(
                out,
                "| 7 | pull {:.1} MB in {} layers from a local registry, {when} ({} runs each): rkt fetch + unpack vs skopeo copy + umoci unpack | rkt {} / skopeo + umoci {} | {:.2}× | ≤ 1.0× | {} |",
                p.bytes as f64 / 1e6,
                p.layers,
                p.runs,
                fmt_duration(rkt),
                fmt_duration(oci),
                ratio(rkt, oci),
                holds(ratio(rkt, oci) <= 1.0)
            );
        }
    }
    if let Some(p) = &r.image_start {
        let (image, rootfs) = (med(&p.series, 0), med(&p.series, 1));
        let extra = image.as_secs_f64() * 1e3 - rootfs.as_secs_f64() * 1e3;
        // CPU time is steadier than wall time on a shared machine: shown beside it.
        let cpu = |i: usize| p.series[i].cpu_median().unwrap_or_default();
        let extra_cpu = cpu(0).as_secs_f64() * 1e3 - cpu(1).as_secs_f64() * 1e3;
        let _ = writeln!(
            out,
            "| 8 | start a pod (`--net=none`, busybox true) from a stored {}-layer image vs `--rootfs` of the unpacked tree | image {} / --rootfs {} (CPU {extra_cpu:+.1} ms) | {extra:+.1} ms | ≤ +3 ms | {} |",
            p.layers,
            fmt_duration(image),
            fmt_duration(rootfs),
            holds(extra <= 3.0)
        );
    }
    if let Some(a) = &r.app_start {
        render_app_start_targets(&mut out, a);
    }
    if let Some(l) = &r.logs {
        render_log_targets(&mut out, l);
    }
    if let Some(c) = &r.cri {
        render_cri_targets(&mut out, c);
    }

    out.push_str("\nEvery figure:\n\n");
    out.push_str(
        "| scenario | variant | median | min | p90 | CPU time (user + sys of all its processes, median) |\n|---|---|---|---|---|---|\n",
    );
    let mut row = |scenario: &str, s: &Series| {
        let _ = writeln!(
            out,
            "| {scenario} | {} | {} | {} | {} | {} |",
            s.label,
            fmt_duration(s.median()),
            fmt_duration(s.min()),
            fmt_duration(s.p90()),
            s.cpu_median()
                .map(fmt_duration)
                .unwrap_or_else(|| "—".into())
        );
    };
    if let Some(s) = &r.real {
        s.iter().for_each(|x| row("1 ptp + host-local", x));
    }
    if let Some(s) = &r.noop {
        s.iter().for_each(|x| row("2 do-nothing plugin", x));
    }
    if let Some(s) = &r.scale {
        let name = format!("3 {} files", s.files);
        for x in [&s.ours, &s.ours_in_process, &s.libcni, &s.rkt_run] {
            row(&name, x);
        }
    }
    if let Some(m) = &r.many {
        let name = format!("4 {} pods (batch)", m.pods);
        row(&name, &m.concurrent);
        row(&name, &m.sequential);
    }
    if let Some(b) = &r.busy {
        for l in &b.loads {
            let name = format!("6 busy host, {} other pods", l.load);
            l.series.iter().for_each(|x| row(&name, x));
        }
    }
    if let Some(p) = &r.pull {
        p.cold.iter().for_each(|x| row("7 image pull, cold", x));
        p.warm.iter().for_each(|x| row("7 image pull, warm", x));
    }
    if let Some(p) = &r.image_start {
        p.series.iter().for_each(|x| row("8 image pod start", x));
    }
    if let Some(a) = &r.app_start {
        for n in &a.nets {
            let name = format!("9 app start, --net={}", n.net);
            n.series.iter().for_each(|x| row(&name, x));
        }
    }
    if let Some(l) = &r.logs {
        let name = format!("10 {} MiB through a log", l.bytes >> 20);
        l.series.iter().for_each(|x| row(&name, x));
    }

    let cycles: Vec<(&str, &Vec<Series>)> = [
        ("1 ptp + host-local", &r.real),
        ("2 do-nothing plugin", &r.noop),
    ]
    .into_iter()
    .filter_map(|(name, s)| s.as_ref().map(|s| (name, s)))
    .collect();
    if !cycles.is_empty() {
        out.push_str("\nWhere the time goes (medians). *Plugins alone* is the floor minus its namespace part: \
a runtime that cost nothing at all would still take that long, so *plugins alone / libcni* is the best \
ratio any runtime can reach against the scripted libcni cycle. *No isolation* is the same `rkt run` \
with `--insecure-options=all-run` (no capability, seccomp or path protection, no plugin ownership \
checks): what isolation costs. The other what-if rows run the same `rkt run` \
with `fsync` made a no-op (LD_PRELOAD), and that with the data directory on tmpfs: they measure what \
`fsync` and the filesystem cost. *The pod alone* is that last run with `--net=none`, no CNI work at \
all: plugins alone plus the pod alone is the least `rkt run` can take with its present process model.\n\n");
        out.push('|');
        for (name, _) in &cycles {
            let _ = write!(out, " | {name}");
        }
        out.push_str(" |\n|---|");
        for _ in &cycles {
            out.push_str("---|");
        }
        out.push('\n');
        type Cell<'a> = Box<dyn Fn(&[Series]) -> String + 'a>;
        use crate::scenarios::{
            CANDIDATE, WHAT_IF_NO_FSYNC, WHAT_IF_NO_ISOLATION, WHAT_IF_NO_NET, WHAT_IF_TMPFS,
        };
        let what =
            |s: &[Series], label: &str| s.iter().find(|x| x.label == label).map(Series::median);
        let diff = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
            (Some(a), Some(b)) => fmt_duration(a.saturating_sub(b)),
            _ => "—".into(),
        };
        // The pod without CNI is measured in scenario 2 and holds for both.
        let pod_alone = r.noop.as_deref().and_then(|s| what(s, WHAT_IF_NO_NET));
        let plugins_alone = |s: &[Series]| med(s, 2).saturating_sub(med(s, 3));
        let bound = move |s: &[Series]| pod_alone.map(|p| plugins_alone(s) + p);
        let rows: Vec<(&str, Cell)> = vec![
            ("rkt run", Box::new(|s| fmt_duration(med(s, 0)))),
            (
                "rkt run − floor",
                Box::new(|s| fmt_duration(med(s, 0).saturating_sub(med(s, 2)))),
            ),
            (
                "scripted libcni − floor",
                Box::new(|s| fmt_duration(med(s, 1).saturating_sub(med(s, 2)))),
            ),
            (
                "plugins alone (floor − namespace)",
                Box::new(|s| fmt_duration(plugins_alone(s))),
            ),
            (
                "best possible for any runtime vs libcni (plugins alone / libcni)",
                Box::new(|s| format!("{:.2}×", ratio(plugins_alone(s), med(s, 1)))),
            ),
            (
                "candidate `rkt run` (`--candidate-rkt`)",
                Box::new(|s| opt_what(s, CANDIDATE)),
            ),
            (
                "… that vs libcni",
                Box::new(|s| ratio_what(s, CANDIDATE, 1)),
            ),
            ("… that vs floor", Box::new(|s| ratio_what(s, CANDIDATE, 2))),
            (
                "what if: no isolation (`--insecure-options=all-run`)",
                Box::new(|s| opt_what(s, WHAT_IF_NO_ISOLATION)),
            ),
            (
                "cost of isolation (rkt run − that)",
                Box::new(|s| diff(Some(med(s, 0)), what(s, WHAT_IF_NO_ISOLATION))),
            ),
            (
                "what if: fsync a no-op",
                Box::new(|s| opt_what(s, WHAT_IF_NO_FSYNC)),
            ),
            (
                "what if: fsync a no-op, data dir on tmpfs",
                Box::new(|s| opt_what(s, WHAT_IF_TMPFS)),
            ),
            (
                "… that vs libcni",
                Box::new(|s| ratio_what(s, WHAT_IF_TMPFS, 1)),
            ),
            (
                "… that vs floor",
                Box::new(|s| ratio_what(s, WHAT_IF_TMPFS, 2)),
            ),
            (
                "cost of fsync (rkt run − fsync a no-op)",
                Box::new(|s| diff(Some(med(s, 0)), what(s, WHAT_IF_NO_FSYNC))),
            ),
            (
                "cost of ext4 over tmpfs (fsync a no-op − that on tmpfs)",
                Box::new(|s| diff(what(s, WHAT_IF_NO_FSYNC), what(s, WHAT_IF_TMPFS))),
            ),
            (
                "the pod alone: `--net=none`, no fsync, tmpfs (scenario 2)",
                Box::new(move |_| pod_alone.map(fmt_duration).unwrap_or_else(|| "—".into())),
            ),
            (
                "lower bound for rkt today (plugins alone + the pod alone)",
                Box::new(move |s| bound(s).map(fmt_duration).unwrap_or_else(|| "—".into())),
            ),
            (
                "… that vs libcni",
                Box::new(move |s| {
                    bound(s)
                        .map(|b| format!("{:.2}×", ratio(b, med(s, 1))))
                        .unwrap_or_else(|| "—".into())
                }),
            ),
            (
                "… that vs floor",
                Box::new(move |s| {
                    bound(s)
                        .map(|b| format!("{:.2}×", ratio(b, med(s, 2))))
                        .unwrap_or_else(|| "—".into())
                }),
            ),
        ];
        for (label, cell) in rows {
            let _ = write!(out, "| {label}");
            for (_, s) in &cycles {
                let _ = write!(out, " | {}", cell(s));
            }
            out.push_str(" |\n");
        }
    }
    if let Some(p) = &r.memory {
        out.push_str("\nPeak RSS per process (VmHWM at exit, traced; largest of the runs):\n\n");
        let max = |f: fn(&Peaks) -> u64| p.iter().map(f).max().unwrap_or(0);
        let _ = writeln!(out, "| process | peak RSS |\n|---|---|");
        let _ = writeln!(
            out,
            "| `rkt run` (runner) | {} |",
            mib(max(|p| p.runner_kib))
        );
        let _ = writeln!(
            out,
            "| re-executed `rkt stage1-init` and the pod's init | {} |",
            mib(max(|p| p.stage_kib))
        );
        let _ = writeln!(
            out,
            "| largest other process (plugins, the app) | {} |",
            mib(max(|p| p.others_kib))
        );
        let _ = writeln!(
            out,
            "| whole tree (`wait4` ru_maxrss, what `/usr/bin/time` shows) | {} |",
            mib(max(|p| p.tree_maxrss_kib))
        );
    }
    if let Some(b) = &r.busy {
        render_busy_details(&mut out, b);
    }
    if let Some(c) = &r.cri {
        render_cri_details(&mut out, c);
    }
    if let Some(m) = &r.many {
        for e in &m.errors {
            let _ = writeln!(out, "\nScenario 4 failure: `{}`", e.replace('`', "'"));
        }
    }
    out
}

/// Replaces what is between [`BEGIN`] and [`END`] in `doc` with `report`.
pub fn update_doc(doc: &Path, report: &str) -> Result<(), BenchError> {
    let text = std::fs::read_to_string(doc).map_err(|e| BenchError::io(doc, e))?;
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        return Err(BenchError::io(
            doc,
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("markers {BEGIN} and {END} not found"),
            ),
        ));
    };
    let updated = format!("{}{BEGIN}\n{report}{}", &text[..b], &text[e..]);
    std::fs::write(doc, updated).map_err(|e| BenchError::io(doc, e))
}
