//! What a mutex is, read from glibc's memory (its `__kind`), and what
//! replace mode leaves to glibc because of it, said once on stderr.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

/// glibc's `kind` field of a mutex (x86-64 and aarch64 layout: the fifth
/// int), 0 for a normal mutex.
pub(crate) fn glibc_kind(m: *mut libc::pthread_mutex_t) -> c_int {
    // SAFETY: a pthread_mutex_t is 40 (or more) bytes; offset 16 is inside.
    unsafe { m.cast::<u8>().add(16).cast::<c_int>().read_volatile() }
}

/// glibc's bit of `kind` for a `PTHREAD_PROCESS_SHARED` mutex.
pub(crate) const PSHARED_BIT: c_int = 128;
/// glibc's bit of `kind` for a robust mutex.
const ROBUST_BIT: c_int = 16;
/// glibc's bits of `kind` for the priority-inheritance and -protection
/// protocols.
const PROTOCOL_BITS: c_int = 32 | 64;
/// glibc's lock-elision hints in `kind`: no semantics, ignored here.
const ELISION_BITS: c_int = 256 | 512;

/// What replace mode does not serve itself, and says once on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Note {
    /// Recursive, error-checking or adaptive: left to glibc.
    Kind,
    /// Robust: left to glibc.
    Robust,
    /// Process-shared: left to glibc.
    Shared,
    /// Priority inheritance or protection: left to glibc.
    Protocol,
    /// A destroyed mutex used again: left to glibc (which refuses it).
    Destroyed,
    /// The mutex table is full: new mutexes get locks never reused.
    MutexesFull,
    /// The condition table is full: new conditions share one inner mutex.
    CondsFull,
}

impl Note {
    fn text(self) -> &'static [u8] {
        match self {
            Note::Kind => b"symmetry-interpose: a recursive, error-checking or adaptive mutex stays glibc's (replace mode runs normal mutexes)\n",
            Note::Robust => b"symmetry-interpose: a robust mutex stays glibc's\n",
            Note::Shared => b"symmetry-interpose: a process-shared mutex stays glibc's (a replacement lock lives in one process)\n",
            Note::Protocol => b"symmetry-interpose: a priority-inheritance or priority-protection mutex stays glibc's\n",
            Note::Destroyed => b"symmetry-interpose: a destroyed mutex was used; glibc answers for it, as without the library\n",
            Note::MutexesFull => b"symmetry-interpose: more than 1048576 mutex addresses; further mutexes get locks that are never reused\n",
            Note::CondsFull => b"symmetry-interpose: more than 1048576 condition variables waited on; further ones share one inner mutex\n",
        }
    }
}

/// Notes already written (bit `1 << Note`).
static NOTED: AtomicU32 = AtomicU32::new(0);

/// Writes `n` to stderr the first time it happens.
#[cold]
pub(super) fn note(n: Note) {
    let bit = 1u32 << (n as u32);
    // Relaxed: only which notes were written; no data is published.
    if NOTED.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
        let t = n.text();
        // SAFETY: a static buffer to stderr (write(2) takes no lock).
        unsafe { libc::write(2, t.as_ptr().cast(), t.len()) };
    }
}

/// Whether a mutex of glibc kind `kind` is replaced, or why not.
pub(super) fn classify(kind: c_int) -> Result<(), Note> {
    if kind < 0 {
        return Err(Note::Destroyed);
    }
    let k = kind & !ELISION_BITS;
    // Robust first: glibc also sets the process-shared bit of a robust
    // mutex (its futex operations are shared ones).
    if k == 0 {
        Ok(())
    } else if k & ROBUST_BIT != 0 {
        Err(Note::Robust)
    } else if k & PSHARED_BIT != 0 {
        Err(Note::Shared)
    } else if k & PROTOCOL_BITS != 0 {
        Err(Note::Protocol)
    } else {
        Err(Note::Kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc's initializers and `pthread_mutex_init` decide the kind
    /// replace mode reads.
    #[test]
    fn kinds_are_read_from_the_memory() {
        let init = |kind: Option<c_int>, pshared: bool, robust: bool| {
            // SAFETY: plain data, initialized by glibc below.
            let mut a: libc::pthread_mutexattr_t = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut m: libc::pthread_mutex_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to an attribute object and a mutex
            // (glibc's functions directly: this test binary preloads
            // nothing).
            unsafe {
                libc::pthread_mutexattr_init(&mut a);
                if let Some(k) = kind {
                    libc::pthread_mutexattr_settype(&mut a, k);
                }
                if pshared {
                    libc::pthread_mutexattr_setpshared(&mut a, libc::PTHREAD_PROCESS_SHARED);
                }
                if robust {
                    libc::pthread_mutexattr_setrobust(&mut a, libc::PTHREAD_MUTEX_ROBUST);
                }
                libc::pthread_mutex_init(&mut m, &a);
            }
            classify(glibc_kind(&mut m))
        };
        assert_eq!(init(None, false, false), Ok(()));
        assert_eq!(init(Some(libc::PTHREAD_MUTEX_NORMAL), false, false), Ok(()));
        assert_eq!(
            init(Some(libc::PTHREAD_MUTEX_RECURSIVE), false, false),
            Err(Note::Kind)
        );
        assert_eq!(
            init(Some(libc::PTHREAD_MUTEX_ERRORCHECK), false, false),
            Err(Note::Kind)
        );
        assert_eq!(init(None, true, false), Err(Note::Shared));
        assert_eq!(init(None, false, true), Err(Note::Robust));
        let mut m = libc::PTHREAD_MUTEX_INITIALIZER;
        assert_eq!(classify(glibc_kind(&mut m)), Ok(()));
        let mut r = libc::PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
        assert_eq!(classify(glibc_kind(&mut r)), Err(Note::Kind));
        let mut e = libc::PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
        assert_eq!(classify(glibc_kind(&mut e)), Err(Note::Kind));
        assert_eq!(classify(-1), Err(Note::Destroyed));
        assert_eq!(classify(256), Ok(()), "an elision hint is no kind");
    }
}
