//! Image gc: [`Store::gc`] removes the images not used for a while, then every blob, unpacked
//! layer and partial write that no remaining image needs. It sits above the store (images,
//! blobs, `tmp/`) and [`crate::layers`] (unpacked layers), each of which removes its own.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::digest::Digest;
use crate::layers;
use crate::lock::LockKind;
use crate::store::{now_secs, Store, StoreError};

/// What [`Store::gc`] removed, and what it could not.
#[derive(Debug, Default)]
pub struct GcReport {
    /// IDs of the images removed.
    pub images: Vec<Digest>,
    /// Blobs removed because no image refers to them.
    pub blobs: Vec<Digest>,
    /// Partial downloads removed from `tmp/`.
    pub partials: usize,
    /// Unpacked layer directories removed because no image has the layer.
    pub layers: usize,
    /// Every step that failed; gc goes on past each.
    pub errors: Vec<StoreError>,
}

impl Store {
    /// Removes images not used for longer than `grace` that are not in `in_use`, then every
    /// blob no remaining image refers to, every unpacked layer no remaining image has, then
    /// every partial write. Holds the store lock exclusively, so no fetch or unpack is under
    /// way. Goes on past failures and reports them all.
    pub fn gc(&self, grace: Duration, in_use: &BTreeSet<Digest>) -> GcReport {
        let mut report = GcReport::default();
        let _lock = match self.lock(LockKind::Exclusive) {
            Ok(l) => l,
            Err(e) => {
                report.errors.push(e);
                return report;
            }
        };
        let cutoff = now_secs().saturating_sub(grace.as_secs());
        let kept = match self.remove_stale(cutoff, in_use) {
            Ok(gone) => {
                report.images = gone.into_iter().map(|r| r.id).collect();
                match self.images() {
                    Ok(kept) => kept,
                    Err(e) => {
                        report.errors.push(e);
                        return report;
                    }
                }
            }
            Err(e) => {
                // Without a readable index no blob can be known unreferenced.
                report.errors.push(e);
                return report;
            }
        };
        let mut referenced = BTreeSet::new();
        let mut diff_ids = BTreeSet::new();
        for image in &kept {
            // Without knowing what a kept image needs, nothing can be known unneeded.
            match self.referenced_blobs(image) {
                Ok(blobs) => referenced.extend(blobs),
                Err(e) => {
                    report.errors.push(e);
                    return report;
                }
            }
            match self.diff_ids(image) {
                Ok(ids) => diff_ids.extend(ids),
                Err(e) => {
                    report.errors.push(e);
                    return report;
                }
            }
        }
        let (layers, errors) = layers::remove_unused(self, &diff_ids);
        report.layers = layers;
        report.errors.extend(errors);
        let (blobs, errors) = self.remove_unreferenced_blobs(&referenced);
        report.blobs = blobs;
        report.errors.extend(errors);
        let (partials, errors) = self.remove_partials();
        report.partials = partials;
        report.errors.extend(errors);
        report
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::store::tests::{add, store};

    #[test]
    fn gc_removes_unused_images_unreferenced_blobs_and_partials() {
        let (_d, store) = store();
        let a = add(&store, b"{\"a\":1}", b"la", &["a"]);
        let b = add(&store, b"{\"b\":1}", b"lb", &["b"]);
        let c = add(&store, b"{\"c\":1}", b"lc", &["c"]);
        fs::write(store.tmp_dir().join("blob-x.partial"), b"half").unwrap();
        // Everything is fresh: a long grace period keeps all images.
        let report = store.gc(Duration::from_secs(3600), &BTreeSet::new());
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(report.images.is_empty());
        assert_eq!(report.partials, 1);
        store.remove("a", &BTreeSet::new()).unwrap();
        let in_use = BTreeSet::from([b.id.clone()]);
        // Zero grace removes c, but b is in use and a is already out of the index.
        std::thread::sleep(Duration::from_millis(1100));
        let report = store.gc(Duration::ZERO, &in_use);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.images, vec![c.id.clone()]);
        assert!(!store.has_blob(&a.id) && !store.has_blob(&c.id));
        assert!(store.has_blob(&b.id));
        assert!(store.has_blob(&Digest::of(b"lb")));
        assert!(!store.has_blob(&Digest::of(b"la")));
        assert_eq!(store.images().unwrap().len(), 1);
    }
}
