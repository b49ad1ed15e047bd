//! The panic note: a panic on a processor is announced with the user
//! thread that panicked, in front of the panic hook in force.

use super::context::current_cb;

/// Chains a note in front of the panic hook in force (once per process):
/// a panic on a processor is announced with the user thread that
/// panicked (`user thread 'name' (id N)`), since the hook itself names
/// only the carrier OS thread (`symmetry-proc-0`). The previous hook still
/// runs, so a hook the program installed keeps working.
pub(super) fn install_panic_note() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(cb) = current_cb() {
                eprintln!(
                    "symmetry-threads: user thread '{}' (id {}) panicked:",
                    cb.name().unwrap_or("<unnamed>"),
                    cb.id()
                );
            }
            previous(info);
        }));
    });
}
