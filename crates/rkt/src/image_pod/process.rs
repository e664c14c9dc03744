//! What the pod's init does for an image app once it is inside the pod's root filesystem:
//! resolve the image's `User` in the pod's own `/etc` (see [`super::user`]; its `WorkingDir`
//! is entered by the stage with `--working-dir`'s); the app's process then takes those
//! credentials just before it executes the app (through [`crate::isolation`], which switches
//! the user in its order, when `--user`/`--group` did not choose one).

use std::ffi::OsString;
use std::path::Path;

use super::user::{self, Credentials, UserError};
use super::AppImage;

/// Why an image app could not be set up inside the pod.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(transparent)]
    User(#[from] UserError),
}

/// `env` with `HOME` set to the home directory of the image's user (see
/// [`AppImage::home_from_user`]); root keeps `/root` when it has no passwd entry.
pub fn with_home(
    env: &[(OsString, OsString)],
    image: Option<&AppImage>,
    creds: Option<&Credentials>,
) -> Vec<(OsString, OsString)> {
    let mut env = env.to_vec();
    let (Some(image), Some(creds)) = (image, creds) else {
        return env;
    };
    if !image.home_from_user {
        return env;
    }
    let home = match (&creds.home, creds.uid) {
        (Some(home), _) => home.clone(),
        (None, 0) => return env,
        (None, _) => "/".to_string(),
    };
    match env.iter_mut().find(|(k, _)| k == "HOME") {
        Some(entry) => entry.1 = home.into(),
        None => env.push(("HOME".into(), home.into())),
    }
    env
}

/// Resolves `image`'s user in the pod's `/etc`. Call inside the pod's root.
pub fn credentials(image: &AppImage) -> Result<Option<Credentials>, ProcessError> {
    match image.user.as_deref().filter(|u| !u.is_empty()) {
        Some(spec) => Ok(Some(user::resolve(spec, Path::new("/etc"))?)),
        None => Ok(None),
    }
}
