//! The order of the calls that narrow a process's capabilities, made through
//! [`Syscall`] so that [`super::apply`]'s sequence can be tested with the recording fake.

use super::capabilities::{cap_name, CapSet, NAMES};
use super::syscall::Syscall;
use super::IsolationError;

/// Narrows the calling process to `set`: drops the other capabilities (up to `last`) from
/// the bounding set and clears the ambient set. The other sets follow in
/// [`limit_process_sets`].
pub fn limit_bounding(sys: &dyn Syscall, set: CapSet, last: u8) -> Result<(), IsolationError> {
    let wanted_unknown = set.0 >> (last as u32 + 1);
    if wanted_unknown != 0 {
        let names = CapSet(set.0 & !((1u64 << (last as u32 + 1)) - 1)).names();
        return Err(IsolationError::Unsupported {
            what: format!(
                "this kernel knows capabilities up to number {last}, not {}",
                names.join(", ")
            ),
        });
    }
    for cap in 0..=last {
        if !set.contains(cap) {
            sys.drop_bounding(cap)
                .map_err(|source| IsolationError::Capability {
                    what: format!("drop {} from the bounding set", cap_name(cap)),
                    source,
                })?;
        }
    }
    sys.clear_ambient()
        .map_err(|source| IsolationError::Capability {
            what: "clear the ambient set".into(),
            source,
        })
}

/// Sets the inheritable set to `set` and the permitted and effective sets to `set` plus
/// `extra` (what the process still needs before `execve`, see [`super::apply`]). At
/// `execve` the kernel then gives a root app permitted = effective = inheritable ∪
/// bounding = `set`.
pub fn limit_process_sets(
    sys: &dyn Syscall,
    set: CapSet,
    extra: CapSet,
) -> Result<(), IsolationError> {
    sys.set_capabilities(CapSet(set.0 | extra.0), set)
        .map_err(|source| IsolationError::Capability {
            what: format!("narrow the capability sets to {set} with capset(2)"),
            source,
        })
}

/// Raises every capability of `set` into the ambient set (a non-root app keeps them across
/// `execve`); the set must be permitted and inheritable already.
pub fn raise_ambient(sys: &dyn Syscall, set: CapSet) -> Result<(), IsolationError> {
    for cap in (0..NAMES.len() as u8).filter(|&c| set.contains(c)) {
        sys.raise_ambient(cap)
            .map_err(|source| IsolationError::Capability {
                what: format!("keep {} as an ambient capability", cap_name(cap)),
                source,
            })?;
    }
    Ok(())
}
