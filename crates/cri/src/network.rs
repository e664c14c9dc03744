//! The pod network: the network `--net-name` names, else the first network of the CNI
//! configuration directory in file-name order (kubelet's and containerd's rule), read again
//! at every RunPodSandbox and Status, so that a configuration written after the server
//! started is used without a restart.

use std::path::Path;

/// The pod network's name (`named`, else the directory's first), or why there is none (for
/// `NetworkReady=false`).
pub fn pod_network(conf_dir: &Path, named: Option<&str>) -> Result<String, String> {
    let loaded = cni::conf::load_dir(conf_dir).map_err(|e| {
        format!(
            "cannot read the CNI configuration directory {}: {}",
            conf_dir.display(),
            rkt::error::chain(&e)
        )
    })?;
    if let Some(name) = named {
        if loaded.find(name).is_some() {
            return Ok(name.to_string());
        }
        let found: Vec<&str> = loaded.networks.iter().map(|n| n.name.as_str()).collect();
        let mut why = format!(
            "network {name:?} (--net-name) is not in the CNI configuration directory {} \
             (it has {}): write its .conflist there; it is used without a restart",
            conf_dir.display(),
            if found.is_empty() {
                "none".to_string()
            } else {
                found.join(", ")
            }
        );
        if let Some(e) = loaded.failed.first() {
            why.push_str(&format!(
                " (a file there failed to load: {})",
                rkt::error::chain(e)
            ));
        }
        return Err(why);
    }
    if let Some(first) = loaded.networks.first() {
        return Ok(first.name.clone());
    }
    let mut why = format!(
        "no CNI network configuration in {} (kubelet's \"cni config uninitialized\"): write a \
         .conflist there; it is used without a restart",
        conf_dir.display()
    );
    if let Some(e) = loaded.failed.first() {
        why.push_str(&format!(
            " (a file there failed to load: {})",
            rkt::error::chain(e)
        ));
    }
    Err(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_file_by_name_gives_the_network_and_a_late_one_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let e = pod_network(dir.path(), None).unwrap_err();
        assert!(e.contains("no CNI network"), "{e}");
        let conf = |name: &str| {
            format!(r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[{{"type":"bridge"}}]}}"#)
        };
        std::fs::write(dir.path().join("20-b.conflist"), conf("bee")).unwrap();
        assert_eq!(pod_network(dir.path(), None).unwrap(), "bee");
        std::fs::write(dir.path().join("10-a.conflist"), conf("ay")).unwrap();
        assert_eq!(pod_network(dir.path(), None).unwrap(), "ay");
    }

    #[test]
    fn a_named_network_is_used_once_there() {
        let dir = tempfile::tempdir().unwrap();
        let conf = |name: &str| {
            format!(r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[{{"type":"bridge"}}]}}"#)
        };
        std::fs::write(dir.path().join("10-a.conflist"), conf("ay")).unwrap();
        let e = pod_network(dir.path(), Some("bee")).unwrap_err();
        assert!(
            e.contains("\"bee\" (--net-name)") && e.contains("it has ay"),
            "{e}"
        );
        std::fs::write(dir.path().join("20-b.conflist"), conf("bee")).unwrap();
        assert_eq!(pod_network(dir.path(), Some("bee")).unwrap(), "bee");
        assert_eq!(pod_network(dir.path(), None).unwrap(), "ay");
    }
}
