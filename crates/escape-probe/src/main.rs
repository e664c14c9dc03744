//! `escape-probe CHECK...`: run inside a pod by the isolation tests. For each check it
//! forks and attempts one thing with the system call itself (no shell tools, which a test host may
//! lack) and prints `CHECK: ok` or `CHECK: ENAME`. Every attempt is harmless when it
//! succeeds: invalid arguments where a call would change the host (reboot, modules), an
//! open for writing without a write where a write would (sysrq), temporary files removed.
//!
//! Checks: mount-proc, mount-sysfs, mknod-block (make a block node and read it),
//! unshare-user, unshare-mount, clone-user, init-module, finit-module, reboot, keyctl,
//! write-sysrq, write-proc-sys, write-sys, raw-socket, bind-80, chown, setuid,
//! io-uring-setup, `personality:HEX` (set that persona), `fork-many:N` (fork N children
//! that wait; also prints `fork-many:N forked: K`, the number that succeeded, before the
//! outcome, which is the errno of the first refusal) and `spoof-udp:SRC:DST:PORT` (one UDP
//! datagram `escape-probe spoof` to DST:PORT whose IP header, written by the probe on a raw
//! socket with `IP_HDRINCL`, says it comes from SRC).

use std::ffi::CString;
use std::io::Error;

fn errno_name(err: &Error) -> String {
    let n = err.raw_os_error().unwrap_or(0);
    let name = match n {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EROFS => "EROFS",
        libc::ENOSYS => "ENOSYS",
        libc::EINVAL => "EINVAL",
        libc::ENOENT => "ENOENT",
        libc::ENXIO => "ENXIO",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EBADF => "EBADF",
        libc::EFAULT => "EFAULT",
        libc::ENOEXEC => "ENOEXEC",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EAGAIN => "EAGAIN",
        _ => return format!("errno{n}"),
    };
    name.to_string()
}

/// `Ok` for a return value that is not -1, the errno otherwise.
fn check(rc: i64) -> Result<(), Error> {
    if rc == -1 {
        Err(Error::last_os_error())
    } else {
        Ok(())
    }
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// A fresh directory under /tmp, removed by the caller.
fn temp_dir(tag: &str) -> String {
    let dir = format!("/tmp/escape-probe-{tag}-{}", std::process::id());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("create a directory under /tmp");
    dir
}

fn mount_fs(fstype: &str) -> Result<(), Error> {
    let dir = temp_dir(fstype);
    let target = c(&dir);
    let fs = c(fstype);
    // SAFETY: NUL-terminated strings that outlive the calls.
    let rc = unsafe {
        libc::mount(
            fs.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    let res = check(rc as i64);
    if res.is_ok() {
        // SAFETY: as above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
    let _ = std::fs::remove_dir(&dir);
    res
}

/// A block device number the kernel has (from /sys/dev/block, else loop0).
fn some_block_device() -> (u32, u32) {
    if let Ok(entries) = std::fs::read_dir("/sys/dev/block") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some((maj, min)) = name.split_once(':') {
                if let (Ok(maj), Ok(min)) = (maj.parse(), min.parse()) {
                    return (maj, min);
                }
            }
        }
    }
    (7, 0)
}

fn mknod_block() -> Result<(), Error> {
    let dir = temp_dir("mknod");
    let node = format!("{dir}/blk");
    let (maj, min) = some_block_device();
    let path = c(&node);
    // SAFETY: a NUL-terminated path; makedev only combines numbers.
    let res = check(unsafe {
        libc::mknod(
            path.as_ptr(),
            libc::S_IFBLK | 0o600,
            libc::makedev(maj, min),
        )
    } as i64)
    .and_then(|()| {
        use std::io::Read;
        let mut f = std::fs::File::open(&node)?;
        let mut buf = [0u8; 512];
        f.read(&mut buf).map(drop)
    });
    let _ = std::fs::remove_dir_all(&dir);
    res
}

fn unshare(flags: libc::c_int) -> Result<(), Error> {
    // SAFETY: unshare takes flags only; the probe is single-threaded.
    check(unsafe { libc::unshare(flags) } as i64)
}

fn clone_user() -> Result<(), Error> {
    // SAFETY: a fork-like clone (no CLONE_VM) of this single-threaded process; the child
    // only calls _exit.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    check(pid)?;
    if pid == 0 {
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
    Ok(())
}

fn open_for_writing(path: &str) -> Result<(), Error> {
    std::fs::OpenOptions::new().write(true).open(path).map(drop)
}

fn setuid_in_child() -> Result<(), Error> {
    // SAFETY: fork of a single-threaded process; the child makes two calls and _exits.
    let pid = unsafe { libc::fork() };
    check(pid as i64)?;
    if pid == 0 {
        // SAFETY: plain calls in the child.
        let ok = unsafe { libc::setuid(65534) == 0 && libc::getuid() == 65534 };
        // SAFETY: ends the child.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(Error::from_raw_os_error(libc::EPERM))
    }
}

fn io_uring_setup() -> Result<(), Error> {
    // struct io_uring_params: 120 bytes, zeroed (the kernel fills in what it sets up).
    let mut params = [0u8; 120];
    // SAFETY: a valid, writable params buffer of the size the kernel expects.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    check(fd)?;
    // SAFETY: the descriptor io_uring_setup returned, ours.
    unsafe { libc::close(fd as libc::c_int) };
    Ok(())
}

fn personality(hex: &str) -> Result<(), Error> {
    let value = u32::from_str_radix(hex.trim_start_matches("0x"), 16)
        .unwrap_or_else(|_| panic!("personality:{hex}: expected a hexadecimal value"));
    // SAFETY: an integer argument; it changes this check's child only.
    check(unsafe { libc::personality(value as libc::c_ulong) } as i64)
}

/// Forks up to `n` children that wait to be killed; prints how many it got.
fn fork_many(n: &str) -> Result<(), Error> {
    let n: usize = n
        .parse()
        .unwrap_or_else(|_| panic!("fork-many:{n}: expected a number"));
    let mut children = Vec::new();
    let mut refused = None;
    for _ in 0..n {
        // SAFETY: fork of a single-threaded process; the child only pauses until killed.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            loop {
                // SAFETY: waits for the signal that ends the child.
                unsafe { libc::pause() };
            }
        }
        if pid < 0 {
            refused = Some(Error::last_os_error());
            break;
        }
        children.push(pid);
    }
    println!("fork-many:{n} forked: {}", children.len());
    for &pid in &children {
        // SAFETY: signals and reaps our own children.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    refused.map_or(Ok(()), Err)
}

/// An IPv4 header's checksum.
fn ip_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One UDP datagram to `dst:port` with `src` written as its source address.
fn spoof_udp(spec: &str) -> Result<(), Error> {
    let parts: Vec<&str> = spec.split(':').collect();
    let [src, dst, port] = parts[..] else {
        panic!("spoof-udp:{spec}: expected SRC:DST:PORT");
    };
    let src: std::net::Ipv4Addr = src.parse().expect("spoof-udp: SRC is an IPv4 address");
    let dst: std::net::Ipv4Addr = dst.parse().expect("spoof-udp: DST is an IPv4 address");
    let port: u16 = port.parse().expect("spoof-udp: PORT is a number");
    let payload = b"escape-probe spoof";
    let total = 20 + 8 + payload.len();
    let mut packet = vec![0u8; total];
    packet[0] = 0x45; // IPv4, 5 words of header
    packet[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    packet[8] = 64; // TTL
    packet[9] = libc::IPPROTO_UDP as u8;
    packet[12..16].copy_from_slice(&src.octets());
    packet[16..20].copy_from_slice(&dst.octets());
    let sum = ip_checksum(&packet[..20]);
    packet[10..12].copy_from_slice(&sum.to_be_bytes());
    packet[20..22].copy_from_slice(&40000u16.to_be_bytes());
    packet[22..24].copy_from_slice(&port.to_be_bytes());
    packet[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    // UDP checksum 0: none, which IPv4 allows.
    packet[28..].copy_from_slice(payload);
    // SAFETY: a raw socket we own; IP_HDRINCL: we give the whole header.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    check(fd as i64)?;
    let to = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(dst).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: the packet and address outlive the call; the sizes are theirs.
    let sent = unsafe {
        libc::sendto(
            fd,
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&to as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    let res = check(sent as i64);
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    res
}

fn attempt(name: &str) -> Result<(), Error> {
    if let Some((check, arg)) = name.split_once(':') {
        return match check {
            "personality" => personality(arg),
            "fork-many" => fork_many(arg),
            "spoof-udp" => spoof_udp(arg),
            other => {
                eprintln!("escape-probe: unknown check {other:?}");
                std::process::exit(2);
            }
        };
    }
    match name {
        "mount-proc" => mount_fs("proc"),
        "mount-sysfs" => mount_fs("sysfs"),
        "mknod-block" => mknod_block(),
        "unshare-user" => unshare(libc::CLONE_NEWUSER),
        "unshare-mount" => unshare(libc::CLONE_NEWNS),
        "clone-user" => clone_user(),
        // An empty image: refused with EPERM before the kernel looks at it, EINVAL or
        // ENOEXEC after (nothing loaded).
        "init-module" => {
            let params = c("");
            // SAFETY: a valid pointer to zero bytes of image and a NUL-terminated string.
            check(unsafe {
                libc::syscall(
                    libc::SYS_init_module,
                    params.as_ptr(),
                    0usize,
                    params.as_ptr(),
                )
            })
        }
        "finit-module" => {
            let f = std::fs::File::open("/dev/null")?;
            let params = c("");
            use std::os::fd::AsRawFd;
            // SAFETY: a descriptor we own and a NUL-terminated string.
            check(unsafe {
                libc::syscall(libc::SYS_finit_module, f.as_raw_fd(), params.as_ptr(), 0)
            })
        }
        // Wrong magic numbers: refused with EPERM without CAP_SYS_BOOT, EINVAL with it.
        "reboot" => check(unsafe {
            // SAFETY: integer arguments only; the bad magic makes it a no-op.
            libc::syscall(libc::SYS_reboot, 1, 2, libc::LINUX_REBOOT_CMD_CAD_OFF, 0)
        }),
        // KEYCTL_GET_KEYRING_ID of the session keyring, without creating it.
        "keyctl" => check(unsafe {
            // SAFETY: integer arguments only.
            libc::syscall(libc::SYS_keyctl, 0, -3i64, 0)
        }),
        "write-sysrq" => open_for_writing("/proc/sysrq-trigger"),
        "write-proc-sys" => open_for_writing("/proc/sys/kernel/domainname"),
        "write-sys" => open_for_writing("/sys/kernel/uevent_helper")
            .or_else(|_| open_for_writing("/sys/class/net/lo/mtu")),
        "raw-socket" => {
            // SAFETY: plain socket calls on a descriptor we own.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP) };
            check(fd as i64)?;
            // SAFETY: `fd` is the socket just opened, closed once.
            unsafe { libc::close(fd) };
            Ok(())
        }
        "bind-80" => std::net::TcpListener::bind("127.0.0.1:80").map(drop),
        "chown" => {
            let dir = temp_dir("chown");
            let file = format!("{dir}/f");
            std::fs::write(&file, b"x")?;
            let res = std::os::unix::fs::chown(&file, Some(65534), Some(65534));
            let _ = std::fs::remove_dir_all(&dir);
            res
        }
        "setuid" => setuid_in_child(),
        "io-uring-setup" => io_uring_setup(),
        other => {
            eprintln!("escape-probe: unknown check {other:?}");
            std::process::exit(2);
        }
    }
}

/// Each check runs in a child of its own, so that one that succeeds (entering a new user
/// namespace, say) does not change what the next one starts from.
/// The checks that report what they found rather than whether one call succeeded, each
/// printing its own line; `None` for any other name.
///
/// - `tiocsti:TEXT`: types TEXT into the terminal on stdin with TIOCSTI, as a hostile app
///   would to make the caller's shell run a command (`\n` in TEXT is a newline).
/// - `exe-of:PID:DEV:INO`: whether `/proc/PID/exe` is the file DEV:INO (the host's rkt
///   binary), and how opening it for writing fails.
/// - `watch-exe:DEV:INO:MILLIS`: for MILLIS (or until `/tmp/escape-probe-stop` exists),
///   watches every process of the pod for one whose executable is the file DEV:INO, and
///   counts the rkt processes seen at all.
fn detail_check(name: &str) -> Option<String> {
    let (check, args) = name.split_once(':')?;
    let args: Vec<&str> = args.split(':').collect();
    let ident = |dev: &str, ino: &str| (dev.parse::<u64>().ok(), ino.parse::<u64>().ok());
    match (check, &args[..]) {
        ("tiocsti", _) => {
            let text = name["tiocsti:".len()..].replace("\\n", "\n");
            let mut result = "ok".to_string();
            for byte in text.bytes() {
                // SAFETY: TIOCSTI reads one byte from the pointer given.
                if unsafe { libc::ioctl(0, libc::TIOCSTI, &byte) } != 0 {
                    result = errno_name(&Error::last_os_error());
                    break;
                }
            }
            Some(format!("tiocsti: {result}"))
        }
        ("exe-of", [pid, dev, ino]) => {
            let path = format!("/proc/{pid}/exe");
            let same = match (std::fs::metadata(&path), ident(dev, ino)) {
                (Ok(m), (Some(d), Some(i))) => {
                    use std::os::unix::fs::MetadataExt;
                    if (m.dev(), m.ino()) == (d, i) {
                        "host".to_string()
                    } else {
                        "other".to_string()
                    }
                }
                (Err(e), _) => errno_name(&e),
                _ => "bad-arguments".to_string(),
            };
            let write = match std::fs::OpenOptions::new().append(true).open(&path) {
                Ok(_) => "ok".to_string(),
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => "ETXTBSY".to_string(),
                Err(e) => errno_name(&e),
            };
            Some(format!("exe-of: {same} write={write}"))
        }
        ("watch-exe", [dev, ino, millis]) => {
            use std::os::unix::fs::MetadataExt;
            let (Some(dev), Some(ino)) = ident(dev, ino) else {
                return Some("watch-exe: bad-arguments".into());
            };
            let until = std::time::Instant::now()
                + std::time::Duration::from_millis(millis.parse().unwrap_or(1000));
            let me = std::process::id().to_string();
            let (mut host, mut rkt) = (0, std::collections::BTreeSet::new());
            let stop = std::path::Path::new("/tmp/escape-probe-stop");
            while std::time::Instant::now() < until && !stop.exists() {
                let Ok(entries) = std::fs::read_dir("/proc") else {
                    break;
                };
                for entry in entries.flatten() {
                    let pid = entry.file_name().to_string_lossy().into_owned();
                    if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me || pid == "1" {
                        continue;
                    }
                    let exe = entry.path().join("exe");
                    if let Ok(m) = std::fs::metadata(&exe) {
                        if (m.dev(), m.ino()) == (dev, ino) {
                            host += 1;
                        }
                    }
                    let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                    if cmdline.starts_with(b"/proc/self/exe\0") || cmdline.starts_with(b"rkt\0") {
                        rkt.insert(pid);
                    }
                }
            }
            if stop.exists() {
                // The command that asked for the stop (a `rkt enter` of `touch`) gets to
                // exit before this app does and the pod, ending, kills what is left in it.
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
            Some(format!("watch-exe: host={host} rkt={}", rkt.len()))
        }
        _ => None,
    }
}

fn main() {
    use std::io::Write;
    for name in std::env::args().skip(1) {
        if let Some(line) = detail_check(&name) {
            println!("{line}");
            continue;
        }
        // SAFETY: fork of a single-threaded process; the child runs one check and _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let line = match attempt(&name) {
                Ok(()) => format!("{name}: ok\n"),
                Err(e) => format!("{name}: {}\n", errno_name(&e)),
            };
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        assert!(pid > 0, "fork: {}", Error::last_os_error());
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
}
