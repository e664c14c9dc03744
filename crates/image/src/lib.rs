//! OCI and Docker images for rkt's pods: references ([`reference`]), a verified
//! content-addressed store ([`store`]), transports that read images from registries, OCI
//! layouts and archives ([`transport`]) in front of one verified copy ([`copy`]), and layer
//! unpacking that never writes outside its target ([`unpack`]). It knows nothing of pods or
//! of rkt's command line.

pub mod digest;
pub mod reference;

pub use digest::Digest;
pub use reference::{DockerRef, ImageRef, ReferenceError, Target};
pub mod lock;
pub mod store;

pub use store::{ImageRecord, Store, StoreError};
