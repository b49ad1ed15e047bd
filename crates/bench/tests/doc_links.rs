//! Every relative link of the repository's Markdown resolves: the README,
//! the guides (`docs/*.md`), the crates' READMEs and `reference/README.md`.
//!
//! A link (or image) whose target has no URL scheme is resolved against
//! its file's directory and must name a file or directory that exists; a
//! `#fragment` must match a heading of the target Markdown file (or of the
//! file itself for `#fragment` alone), slugged as GitHub does. Links with a
//! scheme (`https:`, `mailto:`, ...) are not checked.

mod common;

use std::collections::HashSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

/// The Markdown files whose links are checked, relative to the root:
/// `README.md`, `docs/*.md`, `crates/*/README.md`, `reference/README.md`.
fn files(root: &Path) -> Vec<PathBuf> {
    let listed = |dir: &str| -> Vec<PathBuf> {
        let mut names: Vec<PathBuf> = fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .filter_map(|e| Some(Path::new(dir).join(e.ok()?.file_name())))
            .collect();
        names.sort();
        names
    };
    let mut out = vec![PathBuf::from("README.md")];
    out.extend(
        listed("docs")
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    out.extend(listed("crates").into_iter().map(|c| c.join("README.md")));
    out.push(PathBuf::from("reference/README.md"));
    out.retain(|p| root.join(p).is_file());
    out
}

/// GitHub's anchor for a heading: lower case, every character that is not
/// alphanumeric, `-`, `_` or a space dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings, with GitHub's `-1`, `-2`, ...
/// suffixes for repeated ones.
fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let base = slug(&h);
                    let mut anchor = base.clone();
                    let mut n = 1;
                    while !out.insert(anchor.clone()) {
                        anchor = format!("{base}-{n}");
                        n += 1;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Link and image targets of a Markdown text, in order.
fn targets(text: &str) -> Vec<String> {
    Parser::new(text)
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.into_string()),
            _ => None,
        })
        .collect()
}

/// Whether a target names a scheme (`https:`, `mailto:`): not a relative link.
fn has_scheme(target: &str) -> bool {
    target.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

/// Lexically normalized `base/rel` (`..` and `.` removed), so that a link
/// that climbs out of the repository is reported rather than followed.
fn join_normalized(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Every broken relative link of `file` (relative to `root`), one line each.
fn broken_links(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let dir = file.parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for target in targets(text) {
        if target.is_empty() || has_scheme(&target) {
            continue;
        }
        let (path, fragment) = match target.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            Some(file.to_path_buf())
        } else {
            join_normalized(dir, path)
        };
        let Some(resolved) = resolved else {
            broken.push(format!(
                "{}: `{target}` leaves the repository",
                file.display()
            ));
            continue;
        };
        let full = root.join(&resolved);
        if !full.exists() {
            broken.push(format!(
                "{}: `{target}` -> {} does not exist",
                file.display(),
                resolved.display()
            ));
            continue;
        }
        if let Some(fragment) = fragment.filter(|f| !f.is_empty())
            && full.extension().is_some_and(|e| e == "md")
        {
            // A bare `#fragment` names a heading of this very text.
            let target_text = if path.is_empty() {
                text.to_owned()
            } else {
                fs::read_to_string(&full).unwrap_or_default()
            };
            let fragment = fragment.to_lowercase();
            if !anchors(&target_text).contains(&fragment) {
                broken.push(format!(
                    "{}: `{target}` -> no heading with anchor #{fragment} in {}",
                    file.display(),
                    resolved.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_resolves() {
    let root = common::workspace();
    let files = files(&root);
    assert!(
        files.iter().any(|f| f.starts_with("docs")),
        "no guide found under docs/"
    );
    let mut broken = Vec::new();
    for file in &files {
        let text = fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        broken.extend(broken_links(&root, file, &text));
    }
    assert!(
        broken.is_empty(),
        "{} broken link(s) in the Markdown files:\n  {}",
        broken.len(),
        broken.join("\n  ")
    );
}

#[test]
fn the_checker_reports_what_is_broken() {
    let root = common::workspace();
    let text = "# Top\n\n## Two words `code`\n\n[ok](docs/README.md) [dir](docs/) \
                [web](https://example.com/x) [mail](mailto:a@b.c) [self](#two-words-code) \
                [missing](docs/nope.md) [bad anchor](README.md#no-such-heading) \
                ![img](reference/none.svg) [out](../../x)";
    let broken = broken_links(&root, Path::new("README.md"), text);
    assert_eq!(broken.len(), 4, "{broken:#?}");
    assert!(broken[0].contains("docs/nope.md") && broken[0].contains("does not exist"));
    assert!(broken[1].contains("#no-such-heading"));
    assert!(broken[2].contains("reference/none.svg"));
    assert!(broken[3].contains("leaves the repository"));
}

#[test]
fn anchors_follow_github() {
    let a = anchors("# Set-up: the two commands\n## lock_api 0.4 and 0.5\n## A b\n## A b\n");
    for expected in [
        "set-up-the-two-commands",
        "lock_api-04-and-05",
        "a-b",
        "a-b-1",
    ] {
        assert!(a.contains(expected), "{expected} not in {a:?}");
    }
}
