//! The shape of the harness: experiment files import the harness, kernels,
//! registries, peers and output, never another experiment module.

use std::path::Path;

#[test]
fn no_experiment_imports_another() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/experiments");
    let ids: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|s| s != "mod")
        .collect();
    let mut offences = Vec::new();
    for id in &ids {
        let text = std::fs::read_to_string(dir.join(format!("{id}.rs"))).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for other in ids.iter().filter(|o| *o != id) {
                if code.contains(&format!("super::{other}"))
                    || code.contains(&format!("experiments::{other}"))
                {
                    offences.push(format!("{id}.rs:{}: {}", i + 1, line.trim()));
                }
            }
            if code.contains("use super::") && !code.contains("use super::*") {
                offences.push(format!("{id}.rs:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "experiments importing experiments:\n{}",
        offences.join("\n")
    );
}
