//! A lab for fault tests: the temporary rkt world of `test-kit` (its own data dir, empty
//! local and system configuration) with a network configuration directory and a plugin
//! directory holding copies (hard links) of the scriptable test plugin, all of whose calls
//! go to one log. Every network name it hands out is unique, so the leak checker can
//! attribute state to it.

use std::fs;
use std::ops::Deref;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use test_kit::{unique, wait_for, World, PATIENCE};

use super::Ctx;
use crate::support::{test_plugin, RKT};

/// Puts the test plugin at `path`: a hard link (a copy across file systems), not a
/// symlink, so that rkt's ownership check, run as root, looks at the lab's directories and
/// not at the checkout's, which may belong to the user who cloned it.
fn install_test_plugin(path: &Path) {
    let bin = test_plugin();
    if fs::hard_link(&bin, path).is_err() {
        fs::copy(&bin, path).unwrap();
    }
}

/// One logged plugin call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The plugin's file name (argv0).
    pub plugin: String,
    pub command: String,
    pub container: String,
    pub ifname: String,
    /// The network name from stdin.
    pub net: String,
}

impl Call {
    /// `"ADD plug eth0"`.
    pub fn short(&self) -> String {
        format!("{} {} {}", self.command, self.plugin, self.ifname)
    }
}

/// A [`World`] (data directory, empty local and system configuration) with a network
/// configuration directory (`conf`) and a plugin directory (`plugins`) of its own.
pub struct Lab {
    world: World,
}

impl Deref for Lab {
    type Target = World;

    fn deref(&self) -> &World {
        &self.world
    }
}

impl Default for Lab {
    fn default() -> Self {
        Lab::new()
    }
}

impl Lab {
    pub fn new() -> Lab {
        let world = World::new(RKT);
        for d in ["conf", "plugins"] {
            fs::create_dir(world.path(d)).unwrap();
        }
        Lab { world }
    }

    pub fn conf_dir(&self) -> PathBuf {
        self.path("conf")
    }
    pub fn plugin_dir(&self) -> PathBuf {
        self.path("plugins")
    }
    pub fn log(&self) -> PathBuf {
        self.path("calls.jsonl")
    }

    /// A network name unique to this lab: `r<id>-<suffix>`.
    pub fn net(&self, suffix: &str) -> String {
        format!("r{}-{suffix}", self.id)
    }

    /// The leak checker's context of this lab (its data dir, its call log, its networks).
    pub fn ctx(&self, nets: &[&str]) -> Ctx {
        let mut ctx = Ctx::new(self.data())
            .plugin_log(self.log())
            .uuid_files_in(self.root.path());
        for n in nets {
            ctx = ctx.network(n);
        }
        ctx
    }

    /// Installs the test plugin as `name`, driven by `script` (its calls logged).
    pub fn plugin(&self, name: &str, mut script: Value) {
        let link = self.plugin_dir().join(name);
        if fs::symlink_metadata(&link).is_err() {
            install_test_plugin(&link);
        }
        script["log"] = Value::String(self.log().display().to_string());
        fs::write(
            self.plugin_dir().join(format!("{name}.script")),
            script.to_string(),
        )
        .unwrap();
    }

    /// A network `r<id>-<suffix>` (file `10-<suffix>.conflist`) whose only plugin is the
    /// test plugin installed as `plugin`, answering at once and logging its calls.
    pub fn plain_net(&self, suffix: &str, plugin: &str) -> String {
        let net = self.net(suffix);
        self.plugin(plugin, serde_json::json!({}));
        self.conflist(&format!("10-{suffix}.conflist"), &net, &[plugin]);
        net
    }

    /// Writes a file into the plugin directory with `mode`.
    pub fn plugin_file(&self, name: &str, bytes: &[u8], mode: u32) {
        let path = self.plugin_dir().join(name);
        fs::write(&path, bytes).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Writes a network configuration file.
    pub fn conf(&self, file: &str, json: &Value) {
        fs::write(self.conf_dir().join(file), json.to_string()).unwrap();
    }

    /// A one-network list `name` of plugins `types`, written as `<file>`.
    pub fn conflist(&self, file: &str, name: &str, types: &[&str]) {
        let plugins: Vec<Value> = types
            .iter()
            .map(|t| serde_json::json!({"type": t}))
            .collect();
        self.conf(
            file,
            &serde_json::json!({"cniVersion": "1.0.0", "name": name, "plugins": plugins}),
        );
    }

    /// `rkt <globals> run --net-conf-dir=.. --net-plugin-dir=.. <args>`, not started.
    pub fn run_command(&self, args: &[&str]) -> Command {
        self.run_command_saving_uuid(args).0
    }

    /// [`Lab::run_command`], and the file the pod's UUID goes to (`--uuid-file-save`, in
    /// the lab's root, where the leak checker finds it after `rkt gc` removed the pod).
    fn run_command_saving_uuid(&self, args: &[&str]) -> (Command, PathBuf) {
        let uuid_file = self.path(&format!("uuid-{}", unique()));
        let mut cmd = self.command(&["run"]);
        cmd.arg(format!("--net-conf-dir={}", self.conf_dir().display()))
            .arg(format!("--net-plugin-dir={}", self.plugin_dir().display()));
        // Options go before the app's `--`; a test passing its own keeps it.
        if !args.iter().any(|a| a.starts_with("--uuid-file-save")) {
            cmd.arg(format!("--uuid-file-save={}", uuid_file.display()));
        }
        cmd.args(args);
        (cmd, uuid_file)
    }

    /// Runs `rkt run` with this lab's directories and `args`; returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_command(args).output().unwrap()
    }

    /// Every logged call but VERSION, in order.
    pub fn calls(&self) -> Vec<Call> {
        let text = fs::read_to_string(self.log()).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| Call {
                plugin: Path::new(v["argv0"].as_str().unwrap_or(""))
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                command: v["command"].as_str().unwrap_or("").to_string(),
                container: v["env"]["CNI_CONTAINERID"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                ifname: v["env"]["CNI_IFNAME"].as_str().unwrap_or("").to_string(),
                net: v["stdin"]["name"].as_str().unwrap_or("").to_string(),
            })
            .filter(|c| c.command != "VERSION")
            .collect()
    }

    /// The calls in `"CMD plugin ifname"` form.
    pub fn call_lines(&self) -> Vec<String> {
        self.calls().iter().map(Call::short).collect()
    }

    /// Asserts every plugin that got an ADD (or was attempted) for a container also got
    /// a DEL for it, after its ADD.
    pub fn assert_every_add_deleted(&self) {
        let calls = self.calls();
        for (i, c) in calls.iter().enumerate() {
            if c.command != "ADD" {
                continue;
            }
            let deleted = calls[i + 1..].iter().any(|d| {
                d.command == "DEL"
                    && d.plugin == c.plugin
                    && d.container == c.container
                    && d.ifname == c.ifname
            });
            assert!(
                deleted,
                "{} for pod {} never got its DEL; calls: {:?}",
                c.short(),
                c.container,
                self.call_lines()
            );
        }
    }
}

/// A background `rkt run`, killed (SIGKILL) on drop if still running, so a failing test
/// leaves no process behind (the lab's gc then cleans up after it).
pub struct Running {
    pub uuid: String,
    pub child: Option<Child>,
}

impl Running {
    /// Waits for `rkt run` to end; returns its output.
    pub fn wait(mut self) -> Output {
        self.child.take().unwrap().wait_with_output().unwrap()
    }

    /// The PID of `rkt run`.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Lab {
    /// Starts `rkt run <args>` (with the lab's directories) in the background and waits
    /// until its UUID is known.
    pub fn spawn(&self, args: &[&str]) -> Running {
        let (mut cmd, uuid_file) = self.run_command_saving_uuid(args);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut running = Running {
            uuid: String::new(),
            child: Some(child),
        };
        running.uuid = wait_for("the pod's UUID", PATIENCE, || {
            let text = fs::read_to_string(&uuid_file).ok()?;
            let uuid = text.trim().to_string();
            (!uuid.is_empty()).then_some(uuid)
        });
        running
    }

    /// `rkt run --net=<net> -- /bin/sleep 600` in the background, returned once its app
    /// runs.
    pub fn start_sleeping_pod(&self, net: &str) -> Running {
        let pod = self.spawn(&[&format!("--net={net}"), "--", "/bin/sleep", "600"]);
        self.wait_running(&pod.uuid);
        pod
    }
}

/// Output helpers.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Removes host-local's lease directory of network `0` when dropped (the plugin keeps it
/// after the last lease goes, by design).
pub struct RemoveHostLocal(pub String);

impl Drop for RemoveHostLocal {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(Path::new("/var/lib/cni/networks").join(&self.0));
    }
}

/// A lab with one real ptp network (`ipMasq`, host-local) named after `name`, written to
/// `file`, on a /22 of its own (room for 1,000 pods) below `10.<first_octet_base + 0..30>`:
/// returns the lab, the network's name and its subnet.
pub fn ptp_masq_lab(name: &str, file: &str, second_octet_base: u32) -> (Lab, String, String) {
    let lab = Lab::new();
    let net = lab.net(name);
    let n = u32::from_str_radix(&lab.id[..4], 16).unwrap();
    let subnet = format!(
        "10.{}.{}.0/22",
        second_octet_base + n % 30,
        ((n >> 5) % 64) * 4
    );
    lab.conf(
        file,
        &serde_json::json!({"cniVersion": "1.0.0", "name": net, "type": "ptp", "ipMasq": true,
                "ipam": {"type": "host-local", "subnet": subnet}}),
    );
    (lab, net, subnet)
}
