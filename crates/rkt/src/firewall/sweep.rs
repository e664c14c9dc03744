//! Firewall rules a plugin's DEL left behind for one pod attachment, found and removed.
//!
//! The reference plugins tag every NAT rule they make for an attachment with the comment
//! `name: "<network>" id: "<container id>"`. Some of them can only undo those rules while
//! the pod's interface still exists: ptp and bridge learn the addresses to unmasquerade from
//! the interface, so a DEL after the interface vanished (removed by hand, or the namespace
//! destroyed first) succeeds but leaves the `CNI-…` chain and the jump to it. After a DEL
//! succeeded, rkt removes what still carries that exact comment, in the `nat` table of
//! iptables and ip6tables. Nothing else is touched: a chain is deleted only when every rule
//! in it carries the comment and nothing else jumps to it.
//!
//! portmap tags only the jump into its per-attachment chain, with `dnat ` before the same
//! comment; the chain (`CNI-DN-<hash of network and id>`) holds untagged DNAT rules. Its
//! DEL removes both by name, whatever state the pod is in; should it not run (the plugin
//! is gone at teardown), the jump is removed here and the `CNI-DN-` chain it leads to,
//! when nothing else jumps to it.
//!
//! The plugins name an attachment's chains after it ([`chain_names`]: `CNI-`, `CNI-DN-` or
//! `CNI-SN-` and the start of the SHA-512 of network name and container id), and create a
//! chain before the rules that tag it. A plugin killed between the two (its `rkt run` was
//! killed during ADD) leaves an empty chain that carries no comment. Such a chain is ours
//! by its name alone: it is flushed and deleted, together with any rule that jumps to it.

use std::process::Command;

use sha2::{Digest, Sha512};

/// Removing leftover rules failed.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// `<tool> <args>` failed (the message includes its stderr).
    #[error("removing leftover firewall rules of network {net:?}: `{command}` failed: {stderr}")]
    Command {
        net: String,
        command: String,
        stderr: String,
    },
}

/// What to run to remove the leftovers: rule deletions, then chain flushes and deletions,
/// each as arguments after `<tool> -w -t nat`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub commands: Vec<Vec<String>>,
}

/// What portmap puts before the comment of its jump rule.
const PORTMAP_PREFIX: &str = "dnat ";
/// portmap's per-attachment DNAT chains.
const PORTMAP_CHAIN_PREFIX: &str = "CNI-DN-";

/// The comment the reference plugins put on an attachment's rules.
pub fn comment(net: &str, container_id: &str) -> String {
    format!("name: {net:?} id: {container_id:?}")
}

/// The names the reference plugins give attachment (`net`, `container_id`)'s own chains:
/// masquerading (ptp, bridge), portmap's DNAT and its older SNAT chain. iptables limits a
/// chain name to 28 characters, so the hex digest is cut to fit.
pub fn chain_names(net: &str, container_id: &str) -> [String; 3] {
    let digest = Sha512::new()
        .chain_update(net)
        .chain_update(container_id)
        .finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    ["", "DN-", "SN-"].map(|prefix| {
        let mut name = format!("CNI-{prefix}{hex}");
        name.truncate(MAX_CHAIN_NAME);
        name
    })
}

/// iptables' longest chain name.
const MAX_CHAIN_NAME: usize = 28;

/// Splits one `iptables-save` line into arguments: whitespace-separated, with `"…"` quoting
/// and `\"` / `\\` escapes inside quotes.
fn split_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            '\\' if quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// A rule of the `nat` table: its chain, its arguments after the chain, and its target.
struct Rule {
    chain: String,
    args: Vec<String>,
    target: Option<String>,
    ours: bool,
}

/// Plans the removal of attachment's leftovers in an `iptables-save -t nat` dump: the rules
/// tagged with `comment`, and `own_chains` (the attachment's [`chain_names`]) with every
/// jump to them.
pub fn plan(save: &str, comment: &str, own_chains: &[String]) -> Plan {
    let mut declared: Vec<&str> = Vec::new();
    let mut rules = Vec::new();
    for line in save.lines() {
        if let Some(decl) = line.strip_prefix(':') {
            declared.extend(decl.split_whitespace().next());
            continue;
        }
        let words = split_line(line);
        if words.len() < 2 || words[0] != "-A" {
            continue;
        }
        let args = words[2..].to_vec();
        let target = args
            .windows(2)
            .find(|w| w[0] == "-j" || w[0] == "-g")
            .map(|w| w[1].clone());
        let tagged = args.windows(2).any(|w| {
            w[0] == "--comment"
                && (w[1] == comment || w[1].strip_prefix(PORTMAP_PREFIX) == Some(comment))
        });
        let own = |c: &String| own_chains.contains(c);
        let ours = tagged || own(&words[1]) || target.as_ref().is_some_and(own);
        rules.push(Rule {
            chain: words[1].clone(),
            args,
            target,
            ours,
        });
    }
    // The attachment's own chains, and chains that only hold our rules and are only jumped
    // to by our rules.
    let mut chains: Vec<String> = own_chains
        .iter()
        .filter(|c| declared.contains(&c.as_str()))
        .cloned()
        .collect();
    for r in rules.iter().filter(|r| r.ours) {
        let Some(t) = &r.target else { continue };
        if !t.starts_with("CNI-") || chains.contains(t) {
            continue;
        }
        let only_ours = t.starts_with(PORTMAP_CHAIN_PREFIX)
            || rules.iter().filter(|x| &x.chain == t).all(|x| x.ours);
        let only_our_jumps = rules
            .iter()
            .filter(|x| x.target.as_ref() == Some(t))
            .all(|x| x.ours);
        if only_ours && only_our_jumps {
            chains.push(t.clone());
        }
    }
    let mut commands: Vec<Vec<String>> = rules
        .iter()
        .filter(|r| r.ours && !chains.contains(&r.chain))
        .map(|r| {
            let mut c = vec!["-D".to_string(), r.chain.clone()];
            c.extend(r.args.iter().cloned());
            c
        })
        .collect();
    for chain in &chains {
        commands.push(vec!["-F".into(), chain.clone()]);
    }
    for chain in &chains {
        commands.push(vec!["-X".into(), chain.clone()]);
    }
    Plan { commands }
}

/// Removes the leftover `nat` rules of attachment (`net`, `container_id`) from iptables and
/// ip6tables. Tools that are not installed are skipped.
pub fn sweep(net: &str, container_id: &str) -> Result<(), SweepError> {
    let comment = comment(net, container_id);
    let own_chains = chain_names(net, container_id);
    for (save, tool) in [
        ("iptables-save", "iptables"),
        ("ip6tables-save", "ip6tables"),
    ] {
        let Ok(out) = Command::new(save).args(["-t", "nat"]).output() else {
            continue; // not installed
        };
        if !out.status.success() {
            continue; // e.g. the table is not available in this kernel
        }
        let dump = String::from_utf8_lossy(&out.stdout);
        if !dump.contains(container_id) && !own_chains.iter().any(|c| dump.contains(c.as_str())) {
            continue;
        }
        for args in plan(&dump, &comment, &own_chains).commands {
            let out = Command::new(tool)
                .args(["-w", "-t", "nat"])
                .args(&args)
                .output();
            let failed = match &out {
                Ok(o) if o.status.success() => None,
                Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
                Err(e) => Some(e.to_string()),
            };
            let Some(stderr) = failed else { continue };
            // Another teardown of the same attachment (a killed rkt's plugin still running
            // its DEL) may have removed it since the dump: only what is still there counts.
            if !still_planned(save, &comment, &own_chains, &args) {
                continue;
            }
            return Err(SweepError::Command {
                net: net.to_string(),
                command: format!("{tool} -w -t nat {}", args.join(" ")),
                stderr,
            });
        }
    }
    Ok(())
}

/// Whether a fresh dump still calls for `command` (false when it cannot be read).
fn still_planned(save: &str, comment: &str, own_chains: &[String], command: &[String]) -> bool {
    match Command::new(save).args(["-t", "nat"]).output() {
        Ok(out) if out.status.success() => {
            plan(&String::from_utf8_lossy(&out.stdout), comment, own_chains)
                .commands
                .iter()
                .any(|c| c == command)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "8af9a76a-7d40-4084-ab4e-73145ac3ca99";

    fn dump() -> String {
        format!(
            r#"# Generated by iptables-save
*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:CNI-5f5f4e7b772405a2597683c7 - [0:0]
:CNI-other - [0:0]
-A POSTROUTING -s 172.16.28.5/32 -m comment --comment "name: \"default\" id: \"{ID}\"" -j CNI-5f5f4e7b772405a2597683c7
-A POSTROUTING -s 172.16.28.6/32 -m comment --comment "name: \"default\" id: \"someone-else\"" -j CNI-other
-A CNI-5f5f4e7b772405a2597683c7 -d 172.16.28.0/24 -m comment --comment "name: \"default\" id: \"{ID}\"" -j ACCEPT
-A CNI-5f5f4e7b772405a2597683c7 ! -d 224.0.0.0/4 -m comment --comment "name: \"default\" id: \"{ID}\"" -j MASQUERADE
-A CNI-other -d 172.16.28.0/24 -m comment --comment "name: \"default\" id: \"someone-else\"" -j ACCEPT
COMMIT
"#
        )
    }

    #[test]
    fn comment_matches_the_plugins_format() {
        assert_eq!(comment("default", "abc"), r#"name: "default" id: "abc""#);
    }

    #[test]
    fn chain_names_are_the_plugins() {
        // Seen on a host: ptp's masquerading chain for this network and container.
        let [masq, dnat, snat] =
            chain_names("r3a879a74-ptp", "153dc30c-0c9e-4d4f-bd42-8f018e7fad02");
        assert_eq!(masq, "CNI-22977c8163dc354bd8c96d0d");
        assert_eq!(dnat, "CNI-DN-22977c8163dc354bd8c96");
        assert_eq!(snat, "CNI-SN-22977c8163dc354bd8c96");
    }

    /// What a plugin killed after creating its chain and before tagging it leaves: an
    /// empty chain that only its name ties to the attachment.
    #[test]
    fn an_untagged_chain_named_after_the_attachment_is_removed() {
        let own = chain_names("default", ID);
        let dump = format!(
            "*nat\n:POSTROUTING ACCEPT [0:0]\n:{} - [0:0]\n:CNI-0123456789abcdef01234567 - [0:0]\nCOMMIT\n",
            own[0]
        );
        let p = plan(&dump, &comment("default", ID), &own);
        assert_eq!(
            p.commands,
            [
                vec!["-F".to_string(), own[0].clone()],
                vec!["-X".to_string(), own[0].clone()]
            ]
        );
    }

    /// Jumps into the attachment's chain go first, tagged or not, and the chain's own rules
    /// go with the chain.
    #[test]
    fn jumps_to_an_own_chain_are_removed_with_it() {
        let own = chain_names("default", ID);
        let dump = format!(
            "*nat\n:POSTROUTING ACCEPT [0:0]\n:{c} - [0:0]\n-A POSTROUTING -s 172.16.28.5/32 -j {c}\n-A {c} -d 172.16.28.0/24 -j ACCEPT\nCOMMIT\n",
            c = own[0]
        );
        let p = plan(&dump, &comment("default", ID), &own);
        let shown: Vec<String> = p.commands.iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            shown,
            [
                format!("-D POSTROUTING -s 172.16.28.5/32 -j {}", own[0]),
                format!("-F {}", own[0]),
                format!("-X {}", own[0]),
            ]
        );
        // Another attachment's chains are not ours.
        let theirs = chain_names("default", "someone-else");
        assert!(plan(&dump, &comment("default", "someone-else"), &theirs)
            .commands
            .is_empty());
    }

    #[test]
    fn splits_quoted_comments() {
        assert_eq!(
            split_line(r#"-A X -m comment --comment "name: \"n\" id: \"i\"" -j Y"#),
            [
                "-A",
                "X",
                "-m",
                "comment",
                "--comment",
                r#"name: "n" id: "i""#,
                "-j",
                "Y"
            ]
        );
        let w = split_line(r#"-A X ! -d 1.2.3.4/32 --comment """#);
        assert_eq!(w.len(), 7);
        assert_eq!(w[2], "!");
        assert_eq!(w[6], "");
    }

    #[test]
    fn plans_jump_removal_then_chain_flush_and_delete() {
        let p = plan(&dump(), &comment("default", ID), &[]);
        let chain = "CNI-5f5f4e7b772405a2597683c7";
        assert_eq!(
            p.commands,
            vec![
                vec![
                    "-D".to_string(),
                    "POSTROUTING".into(),
                    "-s".into(),
                    "172.16.28.5/32".into(),
                    "-m".into(),
                    "comment".into(),
                    "--comment".into(),
                    format!(r#"name: "default" id: "{ID}""#),
                    "-j".into(),
                    chain.into()
                ],
                vec!["-F".to_string(), chain.into()],
                vec!["-X".to_string(), chain.into()],
            ]
        );
    }

    #[test]
    fn other_pods_and_other_networks_are_left_alone() {
        assert!(plan(&dump(), &comment("other-net", ID), &[])
            .commands
            .is_empty());
        assert!(plan(&dump(), &comment("default", "nobody"), &[])
            .commands
            .is_empty());
    }

    #[test]
    fn portmap_jump_and_its_dnat_chain_are_removed_but_not_shared_chains() {
        let dump = format!(
            r#"*nat
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-HOSTPORT-SETMARK - [0:0]
:CNI-DN-88f306f5924ccb9381686 - [0:0]
:CNI-DN-other - [0:0]
-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A CNI-DN-88f306f5924ccb9381686 -s 172.16.28.0/24 -p tcp -m tcp --dport 28081 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-88f306f5924ccb9381686 -p tcp -m tcp --dport 28081 -j DNAT --to-destination 172.16.28.136:80
-A CNI-DN-other -p tcp -m tcp --dport 9 -j DNAT --to-destination 172.16.28.9:80
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"default\" id: \"{ID}\"" -m multiport --dports 28081 -j CNI-DN-88f306f5924ccb9381686
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"default\" id: \"x\"" -m multiport --dports 9 -j CNI-DN-other
-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
COMMIT
"#
        );
        let p = plan(&dump, &comment("default", ID), &[]);
        let chain = "CNI-DN-88f306f5924ccb9381686";
        let shown: Vec<String> = p.commands.iter().map(|c| c[..2].join(" ")).collect();
        assert_eq!(
            shown,
            [
                "-D CNI-HOSTPORT-DNAT".to_string(),
                format!("-F {chain}"),
                format!("-X {chain}")
            ]
        );
        assert!(p.commands[0].contains(&chain.to_string()));
    }

    #[test]
    fn shared_chain_is_not_deleted() {
        let shared = format!(
            "{}-A CNI-5f5f4e7b772405a2597683c7 -j RETURN\n",
            dump().replace("COMMIT\n", "")
        );
        let p = plan(&shared, &comment("default", ID), &[]);
        assert!(p.commands.iter().all(|c| c[0] == "-D"), "{p:?}");
        assert_eq!(p.commands.len(), 3);
    }
}
