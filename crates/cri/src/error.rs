//! How the server's errors reach a CRI client: a `tonic::Status` whose message is the whole
//! chain (the message, then each source's), with a code that says whose fault it is.

use tonic::{Code, Status};

/// An error's message followed by each source's.
pub fn describe(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !cause.is_empty() && !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// The request asked for something wrong (a bad value, a feature this host lacks).
pub fn invalid(message: impl Into<String>) -> Status {
    Status::new(Code::InvalidArgument, message.into())
}

/// No such pod sandbox, container or image.
pub fn not_found(message: impl Into<String>) -> Status {
    Status::new(Code::NotFound, message.into())
}

/// The library failed at it.
pub fn internal(e: &anyhow::Error) -> Status {
    Status::new(Code::Internal, describe(e))
}

/// A library error, as a status whose code is `Internal`.
pub fn lib(e: impl std::error::Error + Send + Sync + 'static) -> Status {
    internal(&anyhow::Error::new(e))
}

/// Not done by this server (yet): says what and why.
pub fn unimplemented(what: &str, why: &str) -> Status {
    Status::new(Code::Unimplemented, format!("{what}: {why}"))
}
