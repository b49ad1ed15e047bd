//! The registry's locks, type-erased so that one mutex entry point runs
//! any of them: each [`Algo`] is four functions on a leaked lock object
//! that keeps its holder's token between `lock` and `unlock`.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;

use lock_api::RawMutex;

/// A lock algorithm, type-erased: functions on a leaked lock object.
#[derive(Clone, Copy)]
pub struct Algo {
    /// Registry name.
    pub name: &'static str,
    /// Whether the registry calls the lock FIFO: such a lock waits
    /// politely unless told to be pure (see [`Waiting`](super::Waiting)).
    pub fifo: bool,
    pub(super) new: fn() -> *mut (),
    pub(super) lock: unsafe fn(*mut ()),
    pub(super) try_lock: unsafe fn(*mut ()) -> bool,
    pub(super) unlock: unsafe fn(*mut ()),
}

impl std::fmt::Debug for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A lock and the token of its current holder.
struct Held<L: RawMutex> {
    raw: L,
    token: UnsafeCell<MaybeUninit<L::Guard>>,
}

fn new_held<L: RawMutex>() -> *mut () {
    Box::into_raw(Box::new(Held::<L> {
        raw: L::INIT,
        token: UnsafeCell::new(MaybeUninit::uninit()),
    }))
    .cast()
}

/// # Safety
/// `p` came from `new_held::<L>`.
unsafe fn lock_held<L: RawMutex>(p: *mut ()) {
    // SAFETY: per the contract; the token is written only by the holder.
    unsafe {
        let h = &*(p as *const Held<L>);
        let g = h.raw.lock();
        (*h.token.get()).write(g);
    }
}

/// # Safety
/// As `lock_held`.
unsafe fn try_lock_held<L: RawMutex>(p: *mut ()) -> bool {
    // SAFETY: as in `lock_held`.
    unsafe {
        let h = &*(p as *const Held<L>);
        match h.raw.try_lock() {
            Some(g) => {
                (*h.token.get()).write(g);
                true
            }
            None => false,
        }
    }
}

/// # Safety
/// As `lock_held`, and the caller holds the lock (POSIX: the owner
/// unlocks a normal mutex).
unsafe fn unlock_held<L: RawMutex>(p: *mut ()) {
    // SAFETY: the holder wrote the token when it acquired the lock and
    // nobody else touches it until this unlock.
    unsafe {
        let h = &*(p as *const Held<L>);
        let g = (*h.token.get()).assume_init_read();
        h.raw.unlock(g);
    }
}

const fn algo<L: RawMutex + 'static>(name: &'static str, fifo: bool) -> Algo {
    Algo {
        name,
        fifo,
        new: new_held::<L>,
        lock: lock_held::<L>,
        try_lock: try_lock_held::<L>,
        unlock: unlock_held::<L>,
    }
}

macro_rules! registry_algos {
    ($($name:literal => $t:ty, kind = $kind:ident, fifo = $fifo:literal;)*) => {
        /// Every registry lock that can stand in for a pthread mutex: all
        /// but those built on the pthread mutex itself (which would call
        /// back into this library).
        const REGISTRY: &[Algo] = &[$(algo::<$t>($name, $fifo),)*];
    };
}
symmetry_locks::for_each_lock!(registry_algos);

macro_rules! spin_then_block_algos {
    ($($name:literal => $p:ty;)*) => {
        /// KLMO91's lock with each spin policy, blocking on a futex.
        const SPIN_THEN_BLOCK: &[Algo] = &[$(
            algo::<symmetry_locks::spin_then_block::SpinThenBlock<
                $p,
                symmetry_locks::spin_then_block::Futex,
            >>(concat!("spin-then-block:", $name), false),
        )*];
    };
}
symmetry_locks::for_each_spin_policy!(spin_then_block_algos);

/// Registry locks that wrap the pthread mutex: refused in replace mode.
const WRAPS_PTHREAD: &[&str] = &["pthread", "pthread-adaptive", "native-np"];

/// The algorithms replace mode accepts.
pub fn algorithms() -> impl Iterator<Item = &'static Algo> {
    REGISTRY
        .iter()
        .filter(|a| !WRAPS_PTHREAD.contains(&a.name))
        .chain(SPIN_THEN_BLOCK.iter())
}

/// The algorithm named `name`, if replace mode accepts it.
pub fn algorithm(name: &str) -> Option<&'static Algo> {
    algorithms().find(|a| a.name == name)
}
