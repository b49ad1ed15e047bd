//! Futex waits made through libc's `syscall()`: the locks of Rust's
//! `std` (`Mutex`, `RwLock`, `Condvar`), of `parking_lot`, and of any
//! program that builds its own locks on the futex system call.
//!
//! What is seen. Such locks take their fast path inline and spin in user
//! space without any call the library could see; only a wait that goes to
//! the kernel calls `syscall(SYS_futex, word, FUTEX_WAIT or
//! FUTEX_WAIT_BITSET, ...)`. Each of those calls is one recorded wait, from
//! the call to its return: the blocking part of a wait (a spin before it
//! is not seen, and an acquisition that waited twice is two waits). A wait
//! that returns `EAGAIN` (the word had already changed) is recorded as not
//! blocked; every other as blocked. Acquisitions are not seen at all, so a
//! futex lock's entry has none ([`LockKind::Futex`]).
//!
//! Which lock. A futex word is a lock's (or a condition's) own word,
//! known by its address, unless it lies in the waiting thread's own static
//! thread-local storage: `parking_lot` (and others built the same way)
//! park each thread on a word of its own, whatever lock it waits for.
//! Such waits are keyed by their call stack instead (walked at every such
//! wait, a few microseconds before the thread sleeps), so each lock site
//! is one entry.
//!
//! Hold times. A thread whose wait returned takes the lock next; its next
//! `FUTEX_WAKE` of the same word or the one beside it (std's `RwLock` wakes
//! its writers on a second word; after a wait on its own parking word, a
//! wake of another thread's parking word) is
//! its unlock handing the lock on. The time between is one hold sample:
//! only holds that followed a wait and ended in a wake-up are seen, and a
//! hold whose end was not seen before the thread's next futex wait is
//! dropped (a `parking_lot` lock released with nobody parked wakes
//! nobody).
//!
//! `errno` is kept as the real call left it.

use std::ffi::{c_long, c_void};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use symmetry_locks::platform::rng::mix;
use symmetry_locks::spin_then_block::profiler::LockKind;

use crate::profile::{self, Lock, Wait};
use crate::stack::{self, Frames};
use crate::{clock, next, replace};

type SyscallFn = unsafe extern "C" fn(c_long, ...) -> c_long;

/// glibc's `syscall`, once looked up (null before). Not a `OnceLock`: a
/// thread waiting for another's initialization waits with a futex, through
/// this very function, which must never wait.
static REAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// glibc's `syscall` (resolved by the library's constructor, or by the
/// first caller before it; every racer finds the same function).
pub(crate) fn real() -> SyscallFn {
    // Relaxed: the pointer is all there is to see, and every value stored
    // is the same.
    let mut p = REAL.load(Ordering::Relaxed);
    if p.is_null() {
        p = next(c"syscall");
        REAL.store(p, Ordering::Relaxed);
    }
    // SAFETY: glibc's `syscall` has this type.
    unsafe { std::mem::transmute::<*mut c_void, SyscallFn>(p) }
}

const FUTEX_WAIT: c_long = 0;
const FUTEX_WAKE: c_long = 1;
const FUTEX_WAIT_BITSET: c_long = 9;
const FUTEX_WAKE_BITSET: c_long = 10;
const FUTEX_PRIVATE_FLAG: c_long = 128;
const FUTEX_CLOCK_REALTIME: c_long = 256;
const FUTEX_CMD_MASK: c_long = !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);

/// How far below the thread pointer the static thread-local storage of a
/// thread may reach (the program's and its libraries' `thread_local`s).
const TLS_SPAN: usize = 64 * 1024;

/// How far a word of the same lock may lie from the waited one (the next
/// 32-bit word; two locks' words lie further apart: std's smallest
/// `Mutex<()>` takes 8 bytes).
const NEXT_WORD: usize = 4;

/// Where this library's own image lies in memory, `[start, end)`, once
/// found (0, 0 before): its statics hold the library's own locks (the
/// profile's tables, its `OnceLock`s), whose futex waits go through
/// [`syscall`] like the program's and must never be recorded (recording
/// one could wait for the lock being waited for).
static OWN: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Finds [`OWN`] (by the loader's list of objects, whose first is the
/// executable, with an empty name; called by the library's constructor,
/// or by the first wait before it), and makes the library inert
/// ([`crate::inert`]) if its code lies in the program's executable rather
/// than in a shared object: a program that links the crate (the
/// `symmetry` harness does, for its names and constants) instead of
/// preloading it gets its exported wrappers too, and they must then pass
/// every call straight through.
#[cold]
pub(crate) fn find_own_image() {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        here: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `dl_phdr_info` and its
        // program headers for the duration of the call.
        let info = unsafe { &*info };
        let base = info.dlpi_addr as usize;
        let here = here as usize;
        let (mut lo, mut hi) = (usize::MAX, 0);
        for i in 0..usize::from(info.dlpi_phnum) {
            // SAFETY: `dlpi_phdr` has `dlpi_phnum` entries.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD {
                lo = lo.min(base + ph.p_vaddr as usize);
                hi = hi.max(base + (ph.p_vaddr + ph.p_memsz) as usize);
            }
        }
        if (lo..hi).contains(&here) {
            // SAFETY: the loader's name of the object, a C string ("" for
            // the executable), valid for the call; null checked first.
            let unnamed = info.dlpi_name.is_null() || unsafe { *info.dlpi_name } == 0;
            // Relaxed: every finder stores the same values, and the
            // constructor stores them before the program's threads exist.
            if unnamed {
                crate::INERT.store(true, Ordering::Relaxed);
            }
            OWN[0].store(lo, Ordering::Relaxed);
            OWN[1].store(hi, Ordering::Relaxed);
            return 1;
        }
        0
    }
    let here = std::ptr::from_ref(&OWN) as *mut c_void;
    // SAFETY: `each` reads only what the loader passes it.
    unsafe { libc::dl_iterate_phdr(Some(each), here) };
}

/// Whether futex word `word` is one of this library's own.
#[inline]
fn own_word(word: usize) -> bool {
    // Relaxed: see `find_own_image`.
    if OWN[1].load(Ordering::Relaxed) == 0 {
        find_own_image();
    }
    (OWN[0].load(Ordering::Relaxed)..OWN[1].load(Ordering::Relaxed)).contains(&word)
}

/// Slots of [`PARKING_WORDS`] (a power of two).
const PARKING_SLOTS: usize = 1024;

/// The parking words threads have waited on, so that a wake can tell a
/// thread's parking word from a lock's: a set of addresses with insertion
/// and lookup by open addressing, without locks. Full, it takes no more
/// (a wake of a word left out ends no hold: a sample lost, none wrong).
struct ParkingWords([AtomicUsize; PARKING_SLOTS]);

static PARKING_WORDS: ParkingWords = ParkingWords([const { AtomicUsize::new(0) }; PARKING_SLOTS]);

impl ParkingWords {
    /// Slots probed from a word's home.
    const PROBE: usize = 8;

    fn home(word: usize) -> usize {
        (mix(word as u64) as usize) & (PARKING_SLOTS - 1)
    }

    fn insert(&self, word: usize) {
        let h = Self::home(word);
        for i in 0..Self::PROBE {
            let slot = &self.0[(h + i) & (PARKING_SLOTS - 1)];
            // Relaxed: a word is its own whole message; a wake that misses
            // a word being inserted just now loses one sample.
            match slot.compare_exchange(0, word, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(w) if w == word => return,
                Err(_) => {}
            }
        }
    }

    fn contains(&self, word: usize) -> bool {
        let h = Self::home(word);
        (0..Self::PROBE)
            // Relaxed: as in `insert`.
            .map(|i| self.0[(h + i) & (PARKING_SLOTS - 1)].load(Ordering::Relaxed))
            .take_while(|&w| w != 0)
            .any(|w| w == word)
    }
}

/// Whether `word` is in the calling thread's static thread-local storage,
/// which lies just below the thread pointer on x86-64 (glibc's variant II
/// layout). Elsewhere no word is taken for a parking word.
fn own_parking_word(word: usize) -> bool {
    if cfg!(target_arch = "x86_64") {
        // SAFETY: pthread_self has no preconditions; on glibc it is the
        // thread pointer.
        let tp = unsafe { libc::pthread_self() } as usize;
        word < tp && tp - word <= TLS_SPAN
    } else {
        false
    }
}

/// Interposed `syscall`: futex waits and wakes are profiled, every call
/// goes to glibc's `syscall` with the caller's arguments.
///
/// The variadic arguments are read as six `long`s, as glibc's own
/// `syscall` reads them (integer registers, then the stack): every system
/// call's arguments are integers or pointers.
///
/// # Safety
/// As glibc's: the arguments are those system call `n` takes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    n: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    let real = real();
    // SAFETY: the caller's arguments, unchanged, to glibc.
    let call = || unsafe { real(n, a1, a2, a3, a4, a5, a6) };
    // Nothing here may wait for a lock: the library's own locks (and
    // `OnceLock`s) wait through this function.
    if n != libc::SYS_futex || !replace::profiling_decided() {
        return call();
    }
    match a2 & FUTEX_CMD_MASK {
        FUTEX_WAIT | FUTEX_WAIT_BITSET if !profile::in_recording() && !own_word(a1 as usize) => {
            wait(a1 as usize, a2 & FUTEX_PRIVATE_FLAG == 0, call)
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let woken = a1 as usize;
            // After a wait on the thread's own parking word, the hold ends
            // at a wake of another thread's parking word.
            // Else a wake of the held word ends it, or of the word beside
            // it: std's `RwLock` wakes its writers on a second word next
            // to its state.
            let ends = |held: usize| {
                if own_parking_word(held) {
                    PARKING_WORDS.contains(woken)
                } else {
                    held.abs_diff(woken) <= NEXT_WORD
                }
            };
            profile::wake(ends);
            call()
        }
        _ => call(),
    }
}

/// A futex wait on `word`, timed and recorded.
#[cold]
#[inline(never)]
fn wait(word: usize, shared: bool, call: impl FnOnce() -> c_long) -> c_long {
    profile::futex_wait_begins();
    let parking = own_parking_word(word);
    let (lock, frames) = if parking {
        PARKING_WORDS.insert(word);
        let f = stack::walk();
        (Lock::by_stack(&f, LockKind::Futex), f)
    } else {
        let lock = Lock::at(word, LockKind::Futex);
        let f = if profile::unnamed(lock) {
            stack::walk()
        } else {
            Frames::EMPTY
        };
        (lock, f)
    };
    let t0 = clock::ticks();
    let rc = call();
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let t1 = clock::ticks();
    profile::walked(lock, frames);
    profile::record(Wait {
        lock,
        site: stack::first_outside(&frames),
        ticks: t1.saturating_sub(t0),
        acquired_at: t1,
        blocked: !(rc == -1 && errno == libc::EAGAIN),
        pshared: shared,
    });
    if rc == 0 {
        profile::hold_from_wait(lock, word, t1);
    }
    // SAFETY: errno is this thread's; restoring what the call left.
    unsafe { *libc::__errno_location() = errno };
    rc
}
