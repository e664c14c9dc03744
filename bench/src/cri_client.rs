//! The one-process CRI client of scenarios 11 and 12: one `criclient serve` process per
//! runtime (bench/criclient, Go, built against crictl's own gRPC and CRI API), kept for the
//! whole run with its one gRPC connection, as kubelet is, so that what is timed is the
//! runtime's part and not a client's process start. Requests and answers are JSON lines on
//! its stdin and stdout; the times are the client's own of the RPCs, measured in it.
//!
//! [`CriClient`] owns the process: dropping it closes its stdin (it exits), then kills it
//! after [`EXIT_PATIENCE`] and reaps it, so no path out of a scenario leaves it behind.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::BenchError;
use crate::proc::Stat;

/// How long the client may take to exit once its stdin is closed.
const EXIT_PATIENCE: Duration = Duration::from_secs(2);

/// A pod brought up by [`CriClient::up`].
#[derive(Debug)]
pub struct Up {
    /// The sandbox's ID.
    pub pod: String,
    /// The container's ID.
    pub ctr: String,
    /// RunPodSandbox + CreateContainer + StartContainer.
    pub took: Duration,
}

/// One pod of [`CriClient::up_many`], up or not.
#[derive(Debug)]
pub struct PodUp {
    /// The sandbox's ID, once RunPodSandbox returned it.
    pub pod: Option<String>,
    /// The first RPC that failed, and why.
    pub error: Option<String>,
}

/// Scenario 12's pods brought up at once.
#[derive(Debug)]
pub struct ManyUp {
    /// Until the last pod's StartContainer (or failure) returned.
    pub took: Duration,
    pub pods: Vec<PodUp>,
}

struct Pipes {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

/// A running `criclient serve` talking to one runtime.
pub struct CriClient {
    /// The runtime it talks to, for messages.
    label: &'static str,
    pid: u32,
    pipes: Mutex<Pipes>,
    /// Its stderr.
    log: PathBuf,
    /// The runtime's name and version, as its Version RPC answered at the start.
    version: String,
}

/// The scenario this module's errors name.
const SCENARIO: &str = "criclient";

fn nanos(v: &Value) -> Duration {
    Duration::from_nanos(v["ns"].as_u64().unwrap_or(0))
}

fn text(v: &Value, key: &str) -> Option<String> {
    v[key]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl PodUp {
    fn from_answer(v: &Value) -> PodUp {
        PodUp {
            pod: text(v, "pod"),
            error: text(v, "error"),
        }
    }
}

impl CriClient {
    /// Starts `cmd` (`criclient`, made ready to run where it must: the namespace) as
    /// `criclient serve -endpoint unix://SOCKET`, its stderr into `log`, and checks that it
    /// reaches the runtime (a Version RPC, whose answer [`CriClient::version`] keeps).
    pub fn spawn(
        mut cmd: Command,
        label: &'static str,
        socket: &Path,
        log: PathBuf,
    ) -> Result<CriClient, BenchError> {
        let err = std::fs::File::create(&log).map_err(|e| BenchError::io(&log, e))?;
        cmd.arg("serve")
            .arg("-endpoint")
            .arg(format!("unix://{}", socket.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err);
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd
            .spawn()
            .map_err(|source| BenchError::Spawn { program, source })?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let mut client = CriClient {
            label,
            pid: child.id(),
            pipes: Mutex::new(Pipes {
                child,
                stdin,
                stdout: BufReader::new(
                    stdout.ok_or_else(|| BenchError::scenario(SCENARIO, "no stdout pipe"))?,
                ),
            }),
            log,
            version: String::new(),
        };
        let v = client.request_ok(&json!({"op": "version"}))?;
        client.version = text(&v, "runtime").unwrap_or_default();
        Ok(client)
    }

    /// Sends one request and returns its answer; an answer's `error` is the caller's to
    /// read. Fails when the client is gone (its exit status and stderr in the message).
    fn request(&self, req: &Value) -> Result<Value, BenchError> {
        let mut pipes = self
            .pipes
            .lock()
            .map_err(|_| BenchError::scenario(SCENARIO, "a thread using the client panicked"))?;
        let mut line = req.to_string();
        line.push('\n');
        let written = match pipes.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        let mut answer = String::new();
        let read = written.and_then(|()| pipes.stdout.read_line(&mut answer));
        match read {
            Ok(n) if n > 0 => serde_json::from_str(&answer).map_err(|e| {
                BenchError::scenario(
                    SCENARIO,
                    format!(
                        "against {}: an answer that is not JSON ({e}): {answer}",
                        self.label
                    ),
                )
            }),
            other => {
                crate::proc::check_interrupt()?;
                let why = match other {
                    Err(e) => e.to_string(),
                    Ok(_) => "end of its output".into(),
                };
                let status = match pipes.child.try_wait() {
                    Ok(Some(s)) => s.to_string(),
                    _ => "still running".into(),
                };
                let tail = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(3).collect();
                Err(BenchError::scenario(
                    SCENARIO,
                    format!(
                        "against {}: no answer to {} ({why}; {status}): {}",
                        self.label,
                        req["op"],
                        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                    ),
                ))
            }
        }
    }

    /// A request whose answer must carry no `error`.
    fn request_ok(&self, req: &Value) -> Result<Value, BenchError> {
        let v = self.request(req)?;
        match text(&v, "error") {
            Some(e) => Err(BenchError::scenario(
                SCENARIO,
                format!("against {}: {e}", self.label),
            )),
            None => Ok(v),
        }
    }

    /// The runtime's name and version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// RunPodSandbox, CreateContainer and StartContainer of the pod and container whose
    /// configurations are in the files `pod` and `ctr`.
    pub fn up(&self, pod: &str, ctr: &str) -> Result<Up, BenchError> {
        let v = self.request_ok(&json!({"op": "up", "pod": pod, "ctr": ctr}))?;
        match (text(&v, "pod"), text(&v, "ctr")) {
            (Some(pod), Some(ctr)) => Ok(Up {
                pod,
                ctr,
                took: nanos(&v),
            }),
            _ => Err(BenchError::scenario(
                SCENARIO,
                format!("against {}: no pod or container ID", self.label),
            )),
        }
    }

    /// StopContainer (timeout 0), RemoveContainer, StopPodSandbox, RemovePodSandbox.
    pub fn down(&self, pod: &str, ctr: &str) -> Result<Duration, BenchError> {
        let v = self.request_ok(&json!({"op": "down", "pod": pod, "ctr": ctr}))?;
        Ok(nanos(&v))
    }

    /// Every pair's [`CriClient::up`] at once, one goroutine each.
    pub fn up_many(&self, pairs: &[(String, String)]) -> Result<ManyUp, BenchError> {
        let pairs: Vec<[&str; 2]> = pairs
            .iter()
            .map(|(p, c)| [p.as_str(), c.as_str()])
            .collect();
        let v = self.request_ok(&json!({"op": "up_many", "pairs": pairs}))?;
        let pods: Vec<PodUp> = v["pods"]
            .as_array()
            .map(|a| a.iter().map(PodUp::from_answer).collect())
            .unwrap_or_default();
        if pods.len() != pairs.len() {
            return Err(BenchError::scenario(
                SCENARIO,
                format!(
                    "against {}: {} answers to {} pods",
                    self.label,
                    pods.len(),
                    pairs.len()
                ),
            ));
        }
        Ok(ManyUp {
            took: nanos(&v),
            pods,
        })
    }

    /// StopPodSandbox + RemovePodSandbox of every pod at once: the time until the last
    /// returned, and each failure.
    pub fn down_many(&self, pods: &[String]) -> Result<(Duration, Vec<String>), BenchError> {
        let v = self.request_ok(&json!({"op": "down_many", "pods": pods}))?;
        let errors = v["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Ok((nanos(&v), errors))
    }

    /// The CPU time (user + system, all its threads) the client used so far, from
    /// `/proc/PID/stat` (clock ticks: 10 ms steps).
    pub fn cpu(&self) -> Duration {
        let ticks = Stat::of(self.pid).map_or(0, |s| s.cpu_ticks);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_nanos(ticks * 1_000_000_000 / hz)
    }
}

impl Drop for CriClient {
    /// Closes the client's stdin (it exits at the end of its requests), kills it if it has
    /// not exited after [`EXIT_PATIENCE`], and reaps it.
    fn drop(&mut self) {
        let pipes = match self.pipes.get_mut() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        drop(pipes.stdin.take());
        let start = Instant::now();
        while matches!(pipes.child.try_wait(), Ok(None)) && start.elapsed() < EXIT_PATIENCE {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = pipes.child.kill();
        let _ = pipes.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client played by `sh -c SCRIPT` (the `serve -endpoint …` arguments land in `$0`…),
    /// its stderr in `dir`.
    fn fake(dir: &tempfile::TempDir, script: &str) -> Result<CriClient, BenchError> {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        let log = dir.path().join("client.log");
        CriClient::spawn(cmd, "fake", Path::new("/nonexistent.sock"), log)
    }

    fn tempdir() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary directory")
    }

    const VERSION: &str = r#"read l; echo '{"runtime":"fake 1","ns":5}'"#;

    #[test]
    fn an_rpc_error_names_the_rpc_and_pods_keep_their_ids() {
        let dir = tempdir();
        let client = fake(&dir, &format!(
            r#"{VERSION}; read l; echo '{{"pod":"p1","ns":7,"error":"CreateContainer: boom"}}'; read l; echo '{{"ns":9,"pods":[{{"pod":"p2","ctr":"c2","ns":8}},{{"pod":"p3","ns":6,"error":"StartContainer: no"}}]}}'"#
        ))
        .expect("the fake answers Version");
        assert_eq!(client.version(), "fake 1");
        let e = client.up("pod.json", "ctr.json").unwrap_err().to_string();
        assert!(e.contains("against fake: CreateContainer: boom"), "{e}");
        let pairs = vec![("a".to_string(), "b".to_string()); 2];
        let many = client.up_many(&pairs).expect("an answer per pod");
        assert_eq!(many.took, Duration::from_nanos(9));
        assert_eq!(many.pods[0].pod.as_deref(), Some("p2"));
        assert_eq!(many.pods[0].error, None);
        assert_eq!(many.pods[1].pod.as_deref(), Some("p3"));
        assert_eq!(many.pods[1].error.as_deref(), Some("StartContainer: no"));
    }

    #[test]
    fn a_client_gone_is_an_error_with_its_status_and_stderr() {
        let dir = tempdir();
        let client = fake(&dir, &format!("{VERSION}; echo 'dial failed' >&2; exit 3"))
            .expect("the fake answers Version");
        let e = client.down("p", "c").unwrap_err().to_string();
        assert!(e.contains(r#"no answer to "down""#), "{e}");
        assert!(e.contains("dial failed"), "{e}");
    }

    #[test]
    fn a_client_that_cannot_reach_its_runtime_fails_at_start() {
        let dir = tempdir();
        let e = fake(
            &dir,
            r#"read l; echo '{"ns":0,"error":"Version: unavailable"}'"#,
        )
        .err()
        .expect("Version failed")
        .to_string();
        assert!(e.contains("Version: unavailable"), "{e}");
    }

    #[test]
    fn many_answers_must_match_the_pods() {
        let dir = tempdir();
        let client = fake(
            &dir,
            &format!(r#"{VERSION}; read l; echo '{{"ns":1,"pods":[]}}'"#),
        )
        .expect("the fake answers Version");
        let e = client
            .up_many(&[("a".into(), "b".into())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 answers to 1 pods"), "{e}");
    }
}
