//! ContainerStats and ListContainerStats: a container's CPU time and memory, from the
//! kernel's accounting of its processes (the app's process and every descendant, found
//! through `/proc/<pid>/task/*/children`): a sandbox's apps share the pod's cgroup unless
//! they have limits of their own, so the cgroup alone cannot tell one container's use from
//! another's. CPU is user + system time, the exited children's included; memory is the
//! resident set.

use std::collections::BTreeSet;

use crate::container::Container;
use crate::images::now_ns;
use crate::proto;

/// The host PIDs of `root` and its descendants.
fn tree(root: i32) -> Vec<i32> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            stack.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    seen.into_iter().collect()
}

/// CPU nanoseconds (own and reaped children's) and resident bytes of `pid`.
fn usage(pid: i32) -> (u64, u64) {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096) as u64;
    let stat = rkt::procfs::Stat::of(pid);
    // utime, stime, cutime and cstime are fields 14 to 17.
    let field = |n: usize| stat.as_ref().and_then(|s| s.number::<u64>(n)).unwrap_or(0);
    let cpu = (field(14) + field(15) + field(16) + field(17)) * 1_000_000_000 / ticks;
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let rss = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0)
        * page;
    (cpu, rss)
}

/// The stats of container `c`.
pub fn container_stats(c: &Container) -> proto::ContainerStats {
    let status = &c.sandbox.status;
    let index = status.manifest.apps.iter().position(|a| a.name == c.app);
    let host_pid = match (
        status.record.pid,
        index.and_then(|i| status.record.apps.get(i)),
    ) {
        (Some(init), Some(app)) => app
            .pid
            .and_then(|p| rkt::stage::enter::app_host_pid(init, p)),
        _ => None,
    };
    let (mut cpu, mut memory) = (0u64, 0u64);
    if let Some(pid) = host_pid {
        for p in tree(pid) {
            let (c, m) = usage(p);
            cpu += c;
            memory += m;
        }
    }
    let now = now_ns();
    let m = &c.meta;
    proto::ContainerStats {
        attributes: Some(proto::ContainerAttributes {
            id: m.id.clone(),
            metadata: Some(proto::ContainerMetadata {
                name: m.name.clone(),
                attempt: m.attempt,
            }),
            labels: m.labels.clone().into_iter().collect(),
            annotations: m.annotations.clone().into_iter().collect(),
        }),
        cpu: Some(proto::CpuUsage {
            timestamp: now,
            usage_core_nano_seconds: Some(proto::UInt64Value { value: cpu }),
            usage_nano_cores: None,
        }),
        memory: Some(proto::MemoryUsage {
            timestamp: now,
            working_set_bytes: Some(proto::UInt64Value { value: memory }),
            available_bytes: None,
            usage_bytes: Some(proto::UInt64Value { value: memory }),
            rss_bytes: Some(proto::UInt64Value { value: memory }),
            page_faults: None,
            major_page_faults: None,
        }),
        writable_layer: Some(proto::FilesystemUsage {
            timestamp: now,
            fs_id: Some(proto::FilesystemIdentifier {
                mountpoint: rkt::pod::apps::app_dir(&c.sandbox.pod.dir, &c.app)
                    .display()
                    .to_string(),
            }),
            used_bytes: Some(proto::UInt64Value { value: 0 }),
            inodes_used: Some(proto::UInt64Value { value: 0 }),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_uses_memory_and_a_child_is_in_its_tree() {
        let me = std::process::id() as i32;
        let (_, rss) = usage(me);
        assert!(rss > 0);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pids = tree(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            pids.contains(&me) && pids.contains(&(child.id() as i32)),
            "{pids:?}"
        );
    }
}
