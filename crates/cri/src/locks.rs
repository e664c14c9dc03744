//! One lock per pod sandbox: RPCs on the same pod run one at a time, RPCs on different pods
//! at once. The locks are the server's own (the library's file locks guard the pod store
//! against other processes); a lock whose pod is gone is dropped when nobody holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The pods' locks.
#[derive(Debug, Default)]
pub struct PodLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl PodLocks {
    /// Waits for pod `id`'s lock.
    pub async fn lock(&self, id: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut map = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            // Locks nobody holds or waits for are dropped, so the map does not grow with
            // every pod ever run.
            map.retain(|_, l| Arc::strong_count(l) > 1);
            map.entry(id.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_pod_at_a_time_different_pods_at_once() {
        let locks = Arc::new(PodLocks::default());
        let a = locks.lock("a").await;
        // Another pod's lock is free.
        let b = tokio::time::timeout(Duration::from_millis(100), locks.lock("b")).await;
        assert!(b.is_ok());
        // The same pod's waits until the first is dropped.
        let again = tokio::time::timeout(Duration::from_millis(100), locks.lock("a")).await;
        assert!(again.is_err());
        drop(a);
        let again = tokio::time::timeout(Duration::from_millis(100), locks.lock("a")).await;
        assert!(again.is_ok());
    }
}
