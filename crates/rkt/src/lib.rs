//! rkt's pod networking: pods that run in their own network namespace, wired up by CNI
//! plugins found where the configuration says.
//!
//! The rooms, each depending only on those listed after it (docs/ARCHITECTURE.md; the test
//! `tests/import_graph.rs` keeps the graph free of cycles):
//!
//! - [`pod`]: a pod's life: run, stop, gc, rm, status; the one room that drives the others.
//! - [`appc`]: a pod's manifest in appc's form, for `rkt cat-manifest`.
//! - [`net_inspect`]: the networks in effect, for `rkt net list|status`.
//! - [`config`]: the layered `paths` configuration and the effective directories.
//! - [`networking`]: CNI orchestration: select and plan networks, set them up, record
//!   them, tear them down and check them.
//! - [`stage`]: the process that runs the app inside the pod's namespaces.
//! - [`firewall`]: what rkt does to the host's firewall itself: the sweep of rules a DEL
//!   left, and port forwarding's plumbing.
//! - [`image_pod`]: pods that run an image: the overlay root filesystem, the image's user,
//!   which images pods use.
//! - [`etc_files`]: the pod's `/etc/resolv.conf` and `/etc/hosts`.
//! - [`security`]: who may write what rkt runs as root; `--insecure-options`.
//! - [`trust`]: `rkt trust`'s keystore, where rkt 1.30 kept its keys.
//! - [`mount_template`]: the small mount namespace a busy host's pods are copied from.
//! - [`podstore`]: pods on disk: store, manifest, state record, locks.
//! - [`isolation`]: what keeps the app from the host: capabilities, seccomp, kernel paths,
//!   users, cgroups.
//! - [`attach`]: the protocol of `rkt attach` between an app's monitor and its clients.
//! - [`logs`]: an app's kept output, in the CRI's container log format.
//! - [`pending_signal`]: the signal that arrived while nobody was there to receive it.
//! - [`netns`]: network namespaces, created, bind-mounted, entered and removed.
//! - [`fsutil`]: atomic file replacement.
//!
//! The command line (`src/cli/`, part of the `rkt` binary) is a thin layer on top.

pub mod appc;
pub mod attach;
pub mod config;
pub mod error;
pub mod etc_files;
pub mod firewall;
pub mod fsutil;
pub mod image_pod;
pub mod isolation;
pub mod logs;
pub mod mount_template;
pub mod net_inspect;
pub mod netns;
pub mod networking;
pub mod pending_signal;
pub mod pod;
pub mod podstore;
pub mod procfs;
pub mod security;
pub mod stage;
pub mod trust;
