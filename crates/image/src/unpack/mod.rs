//! Layer unpacking that never writes outside its target: one layer's tar stream applied to
//! a directory ([`layer`], which knows no store), and every layer of a stored image applied
//! in order ([`stored`], over the store and [`layer`]).
//!
//! The paths callers use are re-exported here: [`unpack_layer`], [`unpack_image`],
//! [`UnpackOptions`], [`IdShift`], [`LayerError`] and [`UnpackError`].

pub mod layer;
pub mod stored;

pub use self::layer::{unpack_layer, IdShift, LayerError, UnpackOptions};
pub use self::stored::{unpack_image, UnpackError};
