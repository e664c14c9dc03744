//! OCI and Docker images for rkt's pods: references ([`reference`]), a verified
//! content-addressed store ([`store`]), transports that read images from registries, OCI
//! layouts and archives ([`transport`]) in front of one verified copy ([`copy`]), fetching
//! by reference with a pull policy ([`fetch`]), and layer unpacking that never writes
//! outside its target ([`unpack`]), also once per layer for overlay mounts ([`layers`]). It knows nothing of pods or of rkt's command line.

pub mod copy;
pub mod digest;
pub mod error;
pub mod fetch;
pub mod layers;
pub mod lock;
pub mod merged;
pub mod partial;
pub mod platform;
pub mod reference;
pub mod store;
pub mod transport;
pub mod unpack;

pub use digest::Digest;
pub use fetch::{fetch, FetchError, FetchOptions, PullPolicy};
pub use partial::{NoProgress, Progress};
pub use platform::Platform;
pub use reference::{DockerRef, ImageRef, ReferenceError, Target};
pub use store::{ImageRecord, Removed, Store, StoreError};
