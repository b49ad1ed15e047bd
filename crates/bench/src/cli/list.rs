//! `symmetry list` and `symmetry locks`: the experiment catalogue and the
//! lock registry, one entry per line.

use crate::experiments;

/// `symmetry list`: id, then title and source, tab-separated.
pub fn list() {
    for e in experiments::ALL {
        println!("{}\t{} ({})", e.id, e.title, e.source);
    }
}

/// `symmetry locks`: name, family and whether it is FIFO, tab-separated.
pub fn locks() {
    for l in symmetry_locks::registry::ALL {
        println!(
            "{}\t{:?}\t{}",
            l.name,
            l.kind,
            if l.fifo { "fifo" } else { "unordered" }
        );
    }
}
