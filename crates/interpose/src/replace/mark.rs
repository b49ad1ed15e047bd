//! The mark that makes a mutex replace mode's: two words in its
//! `pthread_mutex_t` that name its lock, made once per mutex's memory
//! ([`replace`](super)'s docs, "Mutexes").

use std::sync::atomic::{AtomicUsize, Ordering};

use super::kind::{Note, classify, glibc_kind, note};
use super::mode::Mode;
use super::replaced::Replaced;
use super::wait::release;

// The mark lives in bytes 24..40 (`replace`'s docs).
const _: () = assert!(std::mem::size_of::<libc::pthread_mutex_t>() >= 40);
const _: () = assert!(std::mem::align_of::<libc::pthread_mutex_t>() >= 8);

/// The mark's constant ("SYMMETRY"); the mark of the mutex at `addr` is
/// `MARK ^ addr` (odd: mutexes are 8-byte aligned and `MARK` is odd).
const MARK: usize = 0x5359_4D4D_4554_5259u64 as usize;

#[inline]
pub(super) fn mark_of(addr: usize) -> usize {
    MARK ^ addr
}

/// The mark word while one thread is marking the mutex (even).
#[inline]
fn busy_of(addr: usize) -> usize {
    MARK ^ addr ^ 1
}

/// The mark word and the `Replaced` pointer word of mutex `m`: glibc's
/// `__list.__prev` and `__list.__next`.
#[inline]
pub(super) fn words(m: *mut libc::pthread_mutex_t) -> (&'static AtomicUsize, &'static AtomicUsize) {
    // SAFETY: a pthread_mutex_t is at least 40 bytes and 8-aligned (the
    // assertions above), so bytes 24..32 and 32..40 are aligned words
    // inside it. The program's mutex outlives each call made on it; the
    // `'static` never leaves this module's calls. glibc touches these
    // bytes only for robust mutexes, which are never marked.
    unsafe {
        let b = m.cast::<u8>();
        (
            &*b.add(24).cast::<AtomicUsize>(),
            &*b.add(32).cast::<AtomicUsize>(),
        )
    }
}

/// The replaced mutex at `m`, or `None` for a mutex left to glibc.
#[inline]
pub(super) fn replaced(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<&'static Replaced> {
    let addr = m as usize;
    let (mark, ptr) = words(m);
    // Acquire: pairs with the Release store of the mark in `install`, so
    // the pointer stored before it is seen.
    if mark.load(Ordering::Acquire) == mark_of(addr) {
        // SAFETY: the marker stored this pointer to a leaked `Replaced`
        // (never freed) before the mark.
        return Some(unsafe { &*(ptr.load(Ordering::Relaxed) as *const Replaced) });
    }
    install(mode, m)
}

/// Marks mutex `m` (new memory: no mark) with a lock, or leaves it to
/// glibc by its kind (`replace`'s docs).
#[cold]
fn install(mode: &Mode, m: *mut libc::pthread_mutex_t) -> Option<&'static Replaced> {
    let addr = m as usize;
    let (mark, ptr) = words(m);
    let mut waits = 0u32;
    loop {
        // The kind first: the mark words of a robust mutex are glibc's.
        if let Err(n) = classify(glibc_kind(m)) {
            note(n);
            return None;
        }
        // Acquire: as in `replaced`.
        let w = mark.load(Ordering::Acquire);
        if w == mark_of(addr) {
            // SAFETY: as in `replaced`.
            return Some(unsafe { &*(ptr.load(Ordering::Relaxed) as *const Replaced) });
        }
        if w == busy_of(addr) {
            // Another thread is marking it: a few instructions, unless
            // that thread was descheduled.
            waits += 1;
            if waits < 100 {
                std::hint::spin_loop();
            } else {
                // SAFETY: no preconditions.
                unsafe { libc::sched_yield() };
            }
            continue;
        }
        // A handler cannot interrupt its own thread while it marks a mutex
        // (and then wait for that mark).
        let _masked = symmetry_locks::SignalsBlocked::new();
        // Relaxed: the CAS only elects the marker; what it publishes goes
        // out with the Release store below.
        if mark
            .compare_exchange(w, busy_of(addr), Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        let r = lock_for(mode, addr);
        ptr.store(r as usize, Ordering::Relaxed);
        // Release: publishes the pointer, and the `Replaced` behind it, to
        // `replaced` and `install`.
        mark.store(mark_of(addr), Ordering::Release);
        // SAFETY: a leaked `Replaced`, never freed.
        return Some(unsafe { &*r });
    }
}

/// The lock for a new mutex at `addr`: the last one made there if it is
/// free, else a fresh one (`replace`'s docs).
fn lock_for(mode: &Mode, addr: usize) -> *mut Replaced {
    let Some(r) = mode
        .mutexes
        .get_or_insert(addr, || Replaced::fresh(mode.algo))
    else {
        note(Note::MutexesFull);
        return Replaced::fresh(mode.algo);
    };
    // SAFETY: a leaked `Replaced`, never freed; no mutex uses it now (its
    // last one's memory was made anew), so trying it takes nobody's lock.
    let old = unsafe { &*r };
    // SAFETY: the lock object is the algorithm's own.
    if unsafe { (mode.algo.try_lock)(old.lock) } {
        release(mode, old);
        return r;
    }
    // Held: the memory was made anew while its mutex was locked.
    let f = Replaced::fresh(mode.algo);
    mode.mutexes.set(addr, f);
    f
}
