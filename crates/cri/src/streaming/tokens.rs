//! One-time tokens: the request an `Exec`, `Attach` or `PortForward` RPC accepted, kept
//! until its connection takes it or [`Tokens`]' lifetime passes. Tokens are 128 random
//! bits; a used or expired token is gone, so a URL serves exactly one connection.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The streams an exec or attach asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Streams {
    pub tty: bool,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// What a URL stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Exec {
        container_id: String,
        cmd: Vec<String>,
        streams: Streams,
    },
    Attach {
        container_id: String,
        streams: Streams,
    },
    PortForward {
        sandbox_id: String,
        /// The ports the RPC named (kubelet names none; each stream names its own).
        ports: Vec<u16>,
    },
}

impl Request {
    /// The streams of an exec or attach; `None` for a port-forward.
    pub fn streams(&self) -> Option<Streams> {
        match self {
            Request::Exec { streams, .. } | Request::Attach { streams, .. } => Some(*streams),
            Request::PortForward { .. } => None,
        }
    }

    /// The URL's first path element.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Exec { .. } => "exec",
            Request::Attach { .. } => "attach",
            Request::PortForward { .. } => "portforward",
        }
    }
}

pub struct Tokens {
    lifetime: Duration,
    pending: Mutex<HashMap<String, (Request, Instant)>>,
}

impl Tokens {
    pub fn new(lifetime: Duration) -> Tokens {
        Tokens {
            lifetime,
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Keeps `request` under a new token, dropping those expired meanwhile.
    pub fn insert(&self, request: Request) -> String {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        pending.retain(|_, (_, at)| now.duration_since(*at) < self.lifetime);
        pending.insert(token.clone(), (request, now));
        token
    }

    /// The request of `token`, once, if it is of `kind` and not expired.
    pub fn take(&self, kind: &str, token: &str) -> Option<Request> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let (request, at) = pending.get(token)?;
        if request.kind() != kind {
            return None;
        }
        let fresh = at.elapsed() < self.lifetime;
        let (request, _) = pending.remove(token)?;
        fresh.then_some(request)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pf() -> Request {
        Request::PortForward {
            sandbox_id: "s".into(),
            ports: vec![],
        }
    }

    #[test]
    fn a_token_serves_once_and_only_its_kind() {
        let t = Tokens::new(Duration::from_secs(60));
        let token = t.insert(pf());
        assert_eq!(token.len(), 32);
        assert_eq!(t.take("exec", &token), None);
        assert_eq!(t.take("portforward", &token), Some(pf()));
        assert_eq!(t.take("portforward", &token), None);
        assert_eq!(t.take("portforward", "nonsense"), None);
    }

    #[test]
    fn expired_tokens_are_refused_and_dropped() {
        let t = Tokens::new(Duration::from_millis(20));
        let old = t.insert(pf());
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(t.take("portforward", &old), None);
        let _ = t.insert(pf());
        let _ = t.insert(pf());
        std::thread::sleep(Duration::from_millis(40));
        let _ = t.insert(pf());
        assert_eq!(t.len(), 1, "expired tokens are dropped on insert");
    }
}
