//! The shape of the code, read from its own imports (SPEC §1, "arrows
//! point down"):
//!
//! - inside the harness, a module imports only modules below it: the CLI,
//!   then the experiments, then the registries and peers, then the harness
//!   framework, then the kernels, then output, then the plain helpers
//!   (`stats`, `scratch`); and no experiment imports another;
//! - inside every crate, no two source files import each other, directly
//!   or through others (a file cycle), so that each file can be read after
//!   the ones it uses;
//! - no source file of any crate is over 1,000 lines.
//!
//! An import is a `use` of `crate::` / `super::` / `self::` paths, or such
//! a path in code, outside comments, string and character literals and the
//! file's `#[cfg(test)]` modules: test code may reach up for fixtures (a
//! kernel's test may run every lock of the registry), as it is built only
//! into the test binary, but every other line of the file is checked,
//! wherever the test module sits. For file cycles, `pub use` lines do not
//! count: a module that re-exports its children's items is their façade,
//! not their user.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The harness's layers, top first; a module may import only the ones
/// after its own. `registry` and `peers` share a rank and do not import
/// each other.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["experiments"],
    &["registry", "peers"],
    &["harness"],
    &["kernels"],
    &["output"],
    &["stats", "scratch"],
];

/// A source file: its module path in its crate and its code.
struct Source {
    module: Vec<String>,
    path: PathBuf,
    code: String,
}

/// One import of a file: the path it names (from the crate root) and
/// whether it is a `pub use` (a re-export).
struct Import {
    path: Vec<String>,
    reexport: bool,
    line: String,
}

/// Every `.rs` file under `src`, with its module path (`lib.rs` and
/// `main.rs` are the root; `a/mod.rs` is `a`).
fn sources(src: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.push(Source {
                module,
                code: code_only(&without_tests(&text)),
                path,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `text` with comments (doc comments included) and the contents of
/// string and character literals blanked to spaces, newlines kept: every
/// byte keeps its offset, and braces, attributes and paths are found only
/// in code. A lifetime (`'a`) is code; a character literal (`'}'`) is not.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            rest.iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |e| i + e)
        } else if rest.starts_with(b"/*") {
            // Block comments nest.
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            j
        } else if b[i] == b'r'
            && (i == 0 || !ident(b[i - 1]) || b[i - 1] == b'b' && (i < 2 || !ident(b[i - 2])))
            && rest[1..]
                .iter()
                .position(|&c| c != b'#')
                .is_some_and(|h| rest[1 + h] == b'"')
        {
            // A raw string: `r"…"`, `r#"…"#`, `br"…"`; ends at `"` and
            // as many `#`.
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body = i + 2 + hashes;
            b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |e| body + e + close.len())
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        } else if b[i] == b'\'' {
            // A character literal: an escape, or one character and the
            // closing quote; anything else is a lifetime or a label.
            let ch = text[i + 1..].chars().next().map_or(0, char::len_utf8);
            if rest.get(1) == Some(&b'\\') {
                let close = rest[3..].iter().position(|&c| c == b'\'');
                close.map_or(i + 1, |e| i + 3 + e + 1)
            } else if ch > 0 && rest.get(1 + ch) == Some(&b'\'') {
                i + 2 + ch
            } else {
                i + 1
            }
        } else {
            i + 1
        };
        if end > i + 1 || b[i] == b'"' {
            blank(&mut out, i, end);
        }
        i = end.max(i + 1);
    }
    String::from_utf8(out).expect("whole characters are blanked")
}

/// `text` without its `#[cfg(test)]` modules (`mod tests { … }` or
/// `mod tests;`, after any further attributes and a visibility), wherever
/// they sit in the file: the code before and after them is kept.
fn without_tests(text: &str) -> String {
    let code = code_only(text);
    let b = code.as_bytes();
    let skip_ws = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        j
    };
    // The end of the bracketed group that opens at `j` (`open`), if any.
    let group = |j: usize, open: u8, close: u8| {
        let mut depth = 0usize;
        for (k, &c) in b.iter().enumerate().skip(j) {
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
        }
        None
    };
    let mut cuts = Vec::new();
    for (i, _) in code.match_indices("#[cfg(test)]") {
        if cuts.last().is_some_and(|&(_, e)| i < e) {
            continue; // inside a test module already cut
        }
        let mut j = skip_ws(i + "#[cfg(test)]".len());
        while b[j..].starts_with(b"#[") {
            j = skip_ws(group(j + 1, b'[', b']').unwrap_or(b.len()));
        }
        if b[j..].starts_with(b"pub") {
            j = skip_ws(j + 3);
            if b[j..].starts_with(b"(") {
                j = skip_ws(group(j, b'(', b')').unwrap_or(b.len()));
            }
        }
        if !(b[j..].starts_with(b"mod") && b.get(j + 3).is_some_and(u8::is_ascii_whitespace)) {
            continue; // a test-only item that is no module
        }
        let Some(k) = b[j..].iter().position(|&c| c == b'{' || c == b';') else {
            continue;
        };
        let end = if b[j + k] == b';' {
            j + k + 1
        } else {
            group(j + k, b'{', b'}').unwrap_or(b.len())
        };
        cuts.push((i, end));
    }
    let mut out = String::new();
    let mut at = 0;
    for (from, to) in cuts {
        out.push_str(&text[at..from]);
        at = to;
    }
    out.push_str(&text[at..]);
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or("").trim();
        return vec![path.to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| {
            if p == "self" {
                prefix.trim_end_matches("::").to_string()
            } else {
                format!("{prefix}{p}")
            }
        })
        .collect()
}

/// Resolves a path relative to `module` (`crate::`, `super::`, `self::`)
/// to segments from the crate root, or `None` for a path that is not the
/// crate's own (`std::`, another crate, `$crate::` in a macro).
fn resolve(module: &[String], path: &str) -> Option<Vec<String>> {
    let mut segs = path.split("::").map(str::trim).filter(|s| !s.is_empty());
    let mut base: Vec<String> = match segs.next()? {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => module[..module.len().checked_sub(1)?].to_vec(),
        _ => return None,
    };
    for s in segs {
        if s == "super" {
            base.pop();
        } else {
            base.push(s.to_string());
        }
    }
    Some(base)
}

/// True where `code[i..]` starts a word (not inside an identifier or a
/// longer path such as `$crate::`).
fn word_start(code: &str, i: usize) -> bool {
    code[..i]
        .chars()
        .next_back()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '$' || c == ':'))
}

/// The crate's own paths that `s` imports or names.
fn imports(s: &Source) -> Vec<Import> {
    let code = &s.code;
    let mut out = Vec::new();
    let mut in_use = vec![false; code.len()];
    for (i, _) in code.match_indices("use ") {
        if !word_start(code, i) {
            continue;
        }
        let end = code[i..].find(';').map_or(code.len(), |e| i + e);
        let head = code[..i].trim_end();
        let reexport = head.ends_with("pub") || head.ends_with(')') && head.contains("pub(");
        let stmt = &code[i + 4..end];
        // The word "use" in a string or a macro is no `use` statement.
        let tree = stmt.replace(" as ", " ");
        if !tree
            .chars()
            .all(|c| c.is_alphanumeric() || "_:{},* \n\t".contains(c))
        {
            continue;
        }
        for path in expand(stmt) {
            if let Some(p) = resolve(&s.module, &path) {
                out.push(Import {
                    path: p,
                    reexport,
                    line: format!(
                        "use {}",
                        stmt.split_whitespace().collect::<Vec<_>>().join(" ")
                    ),
                });
            }
        }
        in_use[i..end].iter_mut().for_each(|b| *b = true);
    }
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            if in_use[i] || !word_start(code, i) {
                continue;
            }
            let len = code[i..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(code.len() - i);
            let path = code[i..i + len].trim_end_matches(':');
            if let Some(p) = resolve(&s.module, path) {
                out.push(Import {
                    path: p,
                    reexport: false,
                    line: path.to_string(),
                });
            }
        }
    }
    out
}

/// The file (module path) a crate path lives in: its longest prefix that
/// is a file.
fn file_of<'a>(files: &'a BTreeSet<Vec<String>>, path: &[String]) -> Option<&'a Vec<String>> {
    (0..=path.len()).rev().find_map(|k| files.get(&path[..k]))
}

#[test]
fn no_experiment_imports_another() {
    let src = common::workspace().join("crates/bench/src");
    let mut offences = Vec::new();
    for s in sources(&src) {
        if s.module.first().map(String::as_str) != Some("experiments") || s.module.len() != 2 {
            continue;
        }
        for i in imports(&s) {
            if i.path.first().map(String::as_str) == Some("experiments")
                && i.path.get(1).is_some_and(|m| *m != s.module[1])
            {
                offences.push(format!("{}: {}", s.path.display(), i.line));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "experiments importing experiments:\n{}",
        offences.join("\n")
    );
}

/// The rank of a top-level module of the harness (0 = top), if it has one.
fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

#[test]
fn harness_arrows_point_down() {
    let src = common::workspace().join("crates/bench/src");
    let mut offences = Vec::new();
    for s in sources(&src) {
        let Some(own) = s.module.first() else {
            continue; // lib.rs, main.rs: the root
        };
        let own_rank = rank(own).unwrap_or_else(|| panic!("{own}: a module of no layer"));
        for i in imports(&s) {
            let Some(to) = i.path.first() else { continue };
            if to == own {
                continue;
            }
            let Some(to_rank) = rank(to) else { continue }; // a macro at the root
            if to_rank <= own_rank {
                offences.push(format!("{} ({own}) -> {to}: {}", s.path.display(), i.line));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "imports that point up or across the harness's layers ({LAYERS:?}):\n{}",
        offences.join("\n")
    );
}

/// The file cycles of the crate whose sources are in `src` (each a list
/// of files that reach each other).
fn cycles(src: &Path) -> Vec<Vec<String>> {
    let sources = sources(src);
    let files: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for s in &sources {
        let to: BTreeSet<Vec<String>> = imports(s)
            .iter()
            .filter(|i| !i.reexport)
            .filter_map(|i| file_of(&files, &i.path))
            .filter(|f| **f != s.module)
            .cloned()
            .collect();
        edges.entry(s.module.clone()).or_default().extend(to);
    }
    // Strongly connected components (Tarjan), iteratively small enough to
    // recurse: a crate has at most a few hundred files.
    struct Tarjan<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a Vec<String>) {
            self.index.insert(v, (self.next, self.next));
            self.next += 1;
            self.stack.push(v);
            self.on.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[v].1.min(self.index[w].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.on.contains(w) {
                    let low = self.index[v].1.min(self.index[w].0);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(if w.is_empty() {
                        "lib".into()
                    } else {
                        w.join("/")
                    });
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.found.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges: &edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

/// The `src/` folder of every crate of the workspace.
fn crate_sources() -> Vec<PathBuf> {
    let crates = common::workspace().join("crates");
    let dirs = std::fs::read_dir(&crates).unwrap();
    let srcs = dirs.map(|e| e.unwrap().path().join("src"));
    srcs.filter(|src| src.is_dir()).collect()
}

#[test]
fn no_file_cycles_in_any_crate() {
    let mut found = Vec::new();
    for src in crate_sources() {
        for c in cycles(&src) {
            found.push(format!("{}: {}", src.display(), c.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other (directly or through others):\n{}",
        found.join("\n")
    );
}

/// The most lines a source file under a crate's `src/` may have, its
/// in-file tests included: past this a file holds more than one role
/// (issue 39 split `endpoint.rs`, `runtime.rs` and `report.rs` by role).
const MAX_LINES: usize = 1_000;

#[test]
fn no_source_file_over_a_thousand_lines() {
    let mut found = Vec::new();
    for s in crate_sources().iter().flat_map(|src| sources(src)) {
        let lines = std::fs::read_to_string(&s.path).unwrap().lines().count();
        if lines > MAX_LINES {
            found.push(format!("{}: {lines} lines", s.path.display()));
        }
    }
    assert!(
        found.is_empty(),
        "source files over {MAX_LINES} lines (split them by role):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert_eq!(
        expand("crate::a::{b, c::{d, e as f}, self}"),
        [
            "crate::a::b",
            "crate::a::c::d",
            "crate::a::c::e",
            "crate::a"
        ]
    );
    let m = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
    assert_eq!(resolve(&m("a/b"), "super::c"), Some(m("a/c")));
    assert_eq!(resolve(&m("a/b"), "crate::x::y"), Some(m("x/y")));
    assert_eq!(resolve(&m("a/b"), "std::fmt"), None);
    let got = imports_of(
        "kernels/x",
        "use crate::harness::Ctx; // crate::cli\nfn f() { crate::output::g(); }\n#[cfg(test)]\nmod tests { use crate::cli::x; }",
    );
    assert_eq!(got, ["harness/Ctx", "output/g"]);
}

/// The crate paths that the file of module `module` with source `text`
/// imports, as the checks read it.
fn imports_of(module: &str, text: &str) -> Vec<String> {
    let s = Source {
        module: module.split('/').map(String::from).collect(),
        path: PathBuf::from(format!("{module}.rs")),
        code: code_only(&without_tests(text)),
    };
    imports(&s).iter().map(|i| i.path.join("/")).collect()
}

#[test]
fn code_after_a_test_module_is_checked() {
    // The test module in the middle of the file, its braces unbalanced in
    // a string and a character literal, a lifetime beside them: what
    // follows it is code of the file and its imports count.
    let text = "use crate::output::Row;\n\
        #[cfg(test)]\n#[allow(unused)]\nmod tests {\n    use crate::cli::x;\n    \
        fn f<'a>(s: &'a str) -> char { let _ = \"}}\"; '}' }\n}\n\
        use crate::registry::locks;\nfn g() { crate::experiments::h(); }\n";
    assert_eq!(
        imports_of("kernels/x", text),
        ["output/Row", "registry/locks", "experiments/h"]
    );
    // A test module declared in a file of its own (`mod tests;`) and one
    // with a visibility are cut as well, and nothing after them.
    let text = "#[cfg(test)]\nmod tests;\nuse crate::cli::a;\n\
        #[cfg(test)]\npub(crate) mod fixtures { use crate::cli::b; }\nuse crate::cli::c;\n";
    assert_eq!(imports_of("kernels/x", text), ["cli/a", "cli/c"]);
    // A test-only item that is no module is code; comments, strings and
    // raw strings are not, nor a `#[cfg(test)]` inside them.
    let text = "#[cfg(test)]\nuse crate::cli::a;\n/* crate::cli::b /* nested */ crate::cli::c */\n\
        const S: &str = r#\"crate::cli::d \" #[cfg(test)] mod t {\"#;\nuse crate::cli::e;\n";
    assert_eq!(imports_of("kernels/x", text), ["cli/a", "cli/e"]);
}
