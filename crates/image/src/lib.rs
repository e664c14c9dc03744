//! OCI and Docker images for rkt's pods: references ([`reference`]), a verified
//! content-addressed store ([`store`]), transports that read images from registries, OCI
//! layouts and archives ([`transport`]) in front of one verified copy ([`copy`]), and layer
//! unpacking that never writes outside its target ([`unpack`]). It knows nothing of pods or
//! of rkt's command line.

pub mod copy;
pub mod digest;
pub mod fetch;
pub mod platform;
pub mod reference;
pub mod transport;

pub use digest::Digest;
pub use reference::{DockerRef, ImageRef, ReferenceError, Target};
pub mod lock;
pub mod store;

pub use fetch::{fetch, FetchError, FetchOptions, PullPolicy};
pub use platform::Platform;
pub use store::{ImageRecord, Store, StoreError};
