//! The app of `rkt run` and `rkt prepare` when the first positional argument is an image (a
//! transport prefix, an image ID, or a name in the store: [`is_image`]) rather than a host
//! command: the flags after the image (`--exec`, `-- ARGS`) are parsed here, the image is
//! fetched per `--pull-policy`, and the library makes the app from it
//! ([`rkt::image_pod::app`]: its Entrypoint + Cmd, `--exec` replacing the Entrypoint and
//! dropping the Cmd, `-- ARGS` replacing the Cmd, with its Env under `--set-env`, WorkingDir
//! and User). A word that is no image must be a host program ([`check_host_command`]).

use anyhow::bail;
use std::path::Path;

use ::image::ImageRef;
use rkt::firewall::port_names::{resolve, AppPorts};
use rkt::firewall::ports::{push_unique, PortMapping};
use rkt::image_pod::app::{app_from_image, is_image, Overrides};
use rkt::pod::App;

use super::fetch::{fetch_image, fetch_options, image_store_in};
use super::pod_args::AppArgs;
use super::GlobalArgs;

/// The app `args` describe: a host command as before, or an image's app from the store of
/// the data directory `data` (`--insecure-options=http` and `tls` say how its registry is
/// reached). Whether the first word is an image is [`is_image`]'s to say; what is no image is
/// a host command if [`check_host_command`] finds it.
pub fn app(global: &GlobalArgs, data: &Path, args: &AppArgs) -> anyhow::Result<App> {
    let image = &args.image;
    let first = &args.command[0];
    if !is_image(data, first)? {
        if image.exec.is_some() {
            bail!("--exec needs an IMAGE (docker://, oci:, oci-archive:, docker-archive:, an image ID or a stored name), but {first:?} is a host command");
        }
        let app = args.app()?;
        check_host_command(&app)?;
        return Ok(app);
    }
    if args.rootfs.is_some() {
        bail!(
            "--rootfs and an IMAGE ({first}) exclude each other: the image is the root filesystem"
        );
    }
    let (exec_after, cmd_args) = split_rest(first, &args.command[1..])?;
    let exec = match (&image.exec, exec_after) {
        (Some(_), Some(_)) => bail!("--exec given twice for {first}"),
        (e, a) => e.clone().or(a),
    };
    let reference = ImageRef::parse(first)?;
    let options = fetch_options(image.store.policy(image.pull_policy), &global.insecure()?)?;
    let store = image_store_in(data)?;
    let record = fetch_image(global, &store, &reference, first, &options)?;
    let overrides = Overrides {
        exec,
        args: cmd_args,
        named: args.name.is_some(),
        no_overlay: image.no_overlay,
    };
    app_from_image(
        &store,
        &record,
        &reference,
        first,
        &overrides,
        |argv, root| {
            AppArgs {
                command: argv,
                ..args.clone()
            }
            .app_in(Some(root))
        },
    )
}

/// Refuses a host-command app whose program is no program: a word with a `/` (not a path
/// from `/` or `.`) that names no file from the current directory, a word with a `:tag` or
/// `@digest`, or a name on no directory of the app's `PATH`; such a word is a mistyped or
/// unfetched image far more often than a program, and the error says how to fetch it. An
/// app with `--rootfs` finds its program in DIR, as the stage does, unchecked here.
fn check_host_command(app: &App) -> anyhow::Result<()> {
    let Some(word) = app.exec.first() else {
        return Ok(());
    };
    if app.rootfs.is_some() || word.starts_with(['/', '.']) {
        return Ok(());
    }
    let path = rkt::stage::env::app_env(app, std::env::vars_os())
        .into_iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v);
    let why = if word.contains('/') {
        if Path::new(word).is_file() {
            return Ok(());
        }
        "no such file from the current directory".to_string()
    } else if word.contains([':', '@']) {
        "a program has no tag or digest".to_string()
    } else if rkt::stage::env::find_executable(word, path.as_ref()).is_some() {
        return Ok(());
    } else {
        format!(
            "none on the app's PATH {}",
            path.as_deref().unwrap_or_default().to_string_lossy()
        )
    };
    bail!(
        "{word:?} is neither a stored image nor a program ({why}): fetch the image with \
         `rkt fetch docker://{word}`, or run `docker://{word}` (fetched per --pull-policy); \
         a host program is run by its path or its name on PATH"
    )
}

/// What follows the IMAGE: `--exec=PATH` (or `--exec PATH`), then optionally `--` and the
/// arguments that replace the image's Cmd.
fn split_rest(
    image: &str,
    rest: &[String],
) -> anyhow::Result<(Option<String>, Option<Vec<String>>)> {
    let mut exec = None;
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        if arg == "--" {
            return Ok((exec, Some(rest[i + 1..].to_vec())));
        }
        if let Some(path) = arg.strip_prefix("--exec=") {
            exec = Some(path.to_string());
        } else if arg == "--exec" && i + 1 < rest.len() {
            i += 1;
            exec = Some(rest[i].clone());
        } else {
            bail!("unexpected {arg:?} after the image {image}: app options may follow it (--exec=PATH, --name=NAME, ...); put the app's arguments after \"--\"");
        }
        i += 1;
    }
    Ok((exec, None))
}

/// Adds the `--port=NAME:[HOSTIP:]HOSTPORT` values among `values` to `ports`, each resolved
/// against the ports the pod's apps' images expose (`80/tcp` is named `80-tcp`).
pub fn add_named_ports(
    ports: &mut Vec<PortMapping>,
    values: &[String],
    apps: &[&App],
) -> anyhow::Result<()> {
    let apps: Vec<AppPorts> = apps
        .iter()
        .map(|a| AppPorts {
            app: a.name.clone(),
            exposed: a
                .image
                .as_ref()
                .map(|i| i.exposed_ports.clone())
                .unwrap_or_default(),
        })
        .collect();
    for m in resolve(values, &apps)? {
        push_unique(ports, m)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exec_and_args_follow_the_image() {
        let (exec, args) =
            split_rest("img", &strings(&["--exec=/bin/ls", "--", "-l", "/"])).unwrap();
        assert_eq!(exec.as_deref(), Some("/bin/ls"));
        assert_eq!(args.unwrap(), strings(&["-l", "/"]));
        let (exec, args) = split_rest("img", &strings(&["--exec", "/bin/ls"])).unwrap();
        assert_eq!((exec.as_deref(), args), (Some("/bin/ls"), None));
        assert_eq!(split_rest("img", &[]).unwrap(), (None, None));
        let err = split_rest("img", &strings(&["echo"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"echo\"") && err.contains("img"), "{err}");
    }
}
