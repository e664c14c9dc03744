//! How rkt's errors are printed: a message names its subject (the pod, network, path or
//! app) and leaves the cause to its [`Error::source`], so the whole story is the message
//! followed by each source's. The command line prints errors this way, and so does every
//! place that turns an error into text (the stage's status pipe, a list of failures).

use std::error::Error;

/// An error's message followed by each of its sources', joined with `": "`
/// (`cannot write /run/x: Permission denied (os error 13)`). An empty message adds nothing.
pub fn chain(err: &(dyn Error + 'static)) -> String {
    let mut out = String::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        next = e.source();
    }
    out
}
