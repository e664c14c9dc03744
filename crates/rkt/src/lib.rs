//! rkt's pod networking: pods that run in their own network namespace, wired up by CNI
//! plugins found where the configuration says.
//!
//! - [`config`]: the layered `paths` configuration and the effective directories.
//! - [`pod`]: pods on disk, their states and locks.
//! - [`netns`]: network namespaces, created, bind-mounted, entered and removed.
//! - [`networking`]: network selection, built-in networks, setup and teardown, DNS and hosts.
//! - [`image_pod`]: pods that run an image: the overlay root filesystem, the image's user,
//!   which images pods use.
//! - [`stage`]: the process that runs the app inside the pod's namespaces.
//! - [`security`]: who may write what rkt runs as root; the plugin timeout.
//!
//! The command line (`src/cli/`, part of the `rkt` binary) is a thin layer on top.

pub mod config;
pub mod fsutil;
pub mod image_pod;
pub mod netns;
pub mod networking;
pub mod pod;
pub mod security;
pub mod stage;
