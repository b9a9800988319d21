//! Ordering of imported bundles: unique keys, parents before children, cycles located.

use super::*;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::SystemTime;

use baton_error::Result;

/// One bundle for ordering: its key, parents, and where to point errors.
pub(super) struct Node {
    pub(super) key: String,
    pub(super) parents: Vec<String>,
    pub(super) created: Option<SystemTime>,
    /// Tie-break after `created`: the file or directory name.
    pub(super) name: String,
    pub(super) file: PathBuf,
    pub(super) key_line: usize,
    pub(super) parent_line: usize,
}

pub(super) fn check_unique_keys(nodes: &[&Node], what: &str) -> Result<HashMap<String, usize>> {
    let mut index: HashMap<String, usize> = HashMap::new();
    // Report the later file (by name) as the duplicate, whatever the listing order.
    let mut by_name: Vec<usize> = (0..nodes.len()).collect();
    by_name.sort_by(|&a, &b| nodes[a].name.cmp(&nodes[b].name));
    for i in by_name {
        let n = nodes[i];
        if let Some(&first) = index.get(&n.key) {
            let f = nodes[first];
            return Err(line_error(
                &n.file,
                n.key_line,
                format!(
                    "duplicate id `{}`: the {what} {}:{} has it too",
                    n.key,
                    f.file.display(),
                    f.key_line
                ),
            ));
        }
        index.insert(n.key.clone(), i);
    }
    Ok(index)
}

/// Parents before children; ties by creation time, then name. Refuses duplicate keys,
/// parents outside the set, and cycles.
pub(super) fn topological_order(nodes: &[&Node], what: &str) -> Result<Vec<usize>> {
    let index = check_unique_keys(nodes, what)?;
    let mut pending = vec![0usize; nodes.len()];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for p in &n.parents {
            let Some(&pi) = index.get(p) else {
                return Err(line_error(
                    &n.file,
                    n.parent_line,
                    format!("parent `{p}` is not the id of any {what} here"),
                ));
            };
            pending[i] += 1;
            children[pi].push(i);
        }
    }
    let rank = |i: usize| (nodes[i].created, nodes[i].name.clone(), i);
    let mut ready: BTreeSet<(Option<SystemTime>, String, usize)> = (0..nodes.len())
        .filter(|&i| pending[i] == 0)
        .map(rank)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some((_, _, i)) = ready.pop_first() {
        order.push(i);
        for &c in &children[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.insert(rank(c));
            }
        }
    }
    if order.len() == nodes.len() {
        return Ok(order);
    }
    // Every node left has a parent left: walk parent links until one repeats.
    let Some(start) = (0..nodes.len())
        .filter(|&i| pending[i] > 0)
        .min_by_key(|&i| rank(i))
    else {
        return Ok(order);
    };
    let mut path = vec![start];
    let mut current = start;
    loop {
        let next = nodes[current]
            .parents
            .iter()
            .filter_map(|p| index.get(p).copied())
            .find(|&p| pending[p] > 0);
        let Some(next) = next else { break };
        if let Some(pos) = path.iter().position(|&p| p == next) {
            let cycle: Vec<&str> = path[pos..]
                .iter()
                .chain(std::iter::once(&next))
                .map(|&i| nodes[i].key.as_str())
                .collect();
            let n = nodes[next];
            return Err(line_error(
                &n.file,
                n.parent_line,
                format!(
                    "parent links form a cycle: {} (each names the next as its parent)",
                    cycle.join(" -> ")
                ),
            ));
        }
        path.push(next);
        current = next;
    }
    let n = nodes[start];
    Err(line_error(
        &n.file,
        n.parent_line,
        "parent links form a cycle",
    ))
}

pub(super) fn first_duplicate(items: &[String]) -> Option<&str> {
    let mut seen = BTreeSet::new();
    items
        .iter()
        .find(|i| !seen.insert(i.as_str()))
        .map(String::as_str)
}
