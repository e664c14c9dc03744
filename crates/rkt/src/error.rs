//! How rkt's errors are printed: a message names its subject (the pod, network, path or
//! app) and leaves the cause to its [`Error::source`](std::error::Error::source), so the whole story is the message
//! followed by each source's. The command line prints errors this way, and so does every
//! place that turns an error into text (the stage's status pipe, a list of failures).

/// An error's message followed by each of its sources', joined with `": "`
/// (`cannot write /run/x: Permission denied (os error 13)`). An empty message adds nothing.
/// The CNI library's, which prints its own errors the same way.
pub use cni::error::chain;
