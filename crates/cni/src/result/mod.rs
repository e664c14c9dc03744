//! Plugin results: parsing a plugin's stdout for any supported spec version, checking its
//! shape, and converting between versions the way libcni does.
//!
//! There are three result families:
//! - `0.1.0`/`0.2.0` ([`Result020`]): `ip4`, `ip6` (each with its own routes) and `dns`;
//! - `0.3.0`/`0.3.1`/`0.4.0` ([`Result040`]): `interfaces`, `ips` with a `version`, `routes`, `dns`;
//! - `1.0.0`/`1.1.0` ([`Result100`]): like 0.4.0 without `ips[].version`, with richer
//!   interfaces and routes.
//!
//! Converting down to 0.2.0 keeps the first address of each family and the destination
//! and gateway of the routes of a family that has an address; interfaces are lost, and a
//! result with no address cannot be converted. Converting 1.x to 0.4.0 drops the
//! interface fields 0.4.0 lacks.
//!
//! One module per family (`v020`, `v040`, `v100`) and the types they share (`common`),
//! the conversions (`convert`), the shape checker (`check`), [`CniResult`] (`any`) and
//! [`ResultError`] (`error`). This module only re-exports them.

mod any;
mod check;
mod common;
mod convert;
mod error;
mod v020;
mod v040;
mod v100;

pub use self::any::CniResult;
pub use self::common::{Dns, Route};
pub use self::error::ResultError;
pub use self::v020::{Ip020, Result020};
pub use self::v040::{Interface040, IpConfig040, Result040};
pub use self::v100::{Interface, IpConfig, Result100};
