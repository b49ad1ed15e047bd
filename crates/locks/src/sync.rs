//! The one loom shim of the workspace (SPEC §1): `symmetry-locks`,
//! `symmetry-threads` and `symmetry-am` take their atomics, fences, spin
//! hints and the blocking primitives their protocols use from here.
//!
//! Every atomic and spin hint used by an algorithm comes from here (the
//! queue locks' one thread-local, in `node_pool`, declares std's or loom's
//! itself: natively it must be `const`, which loom's cannot be), so
//! `RUSTFLAGS="--cfg loom" cargo test --release -p symmetry-locks --test
//! loom` (and the threads and am crates' loom tests) model-check the same
//! code that ships. Under loom the atomics are loom's instrumented ones
//! (not `const`-constructible, which is why the `lock_api::RawMutex` impls
//! are compiled out under `cfg(loom)` and the loom tests construct locks
//! with `new()` and drive them through `lock_api::RawMutex`).

#[cfg(not(loom))]
pub use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, fence,
};
#[cfg(loom)]
pub use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, fence,
};

pub use core::sync::atomic::Ordering;

#[cfg(loom)]
pub use loom::sync::Mutex;
/// A mutex for the slow paths of the runtime's protocols (std's, or
/// loom's under `cfg(loom)`).
#[cfg(not(loom))]
pub use std::sync::Mutex;

/// OS-thread parking for the runtime's idle protocol (std's, or loom's).
pub mod thread {
    #[cfg(loom)]
    pub use loom::thread::{Thread, current, park};
    #[cfg(not(loom))]
    pub use std::thread::{Thread, current, park};
}

/// One iteration of a busy-wait loop.
///
/// Natively this is the CPU's spin-wait hint (`pause` on x86, `yield`/`isb`
/// on Arm); under loom it yields to the model checker so that spin loops
/// terminate in the explored schedules.
#[inline(always)]
pub fn spin_hint() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Busy-waits for `n` iterations of [`spin_hint`] (a backoff delay).
///
/// Under loom a delay is a single yield: loom explores interleavings, not
/// time, so a longer delay adds states without adding behaviours.
#[inline]
pub fn delay(n: u32) {
    #[cfg(not(loom))]
    for _ in 0..n {
        core::hint::spin_loop();
    }
    #[cfg(loom)]
    {
        let _ = n;
        loom::thread::yield_now();
    }
}

/// Release-stores `v` into a byte that other threads exchange (a lock's
/// state word being released): a plain store natively; under loom an
/// exchange, because loom 0.7.2 can let a plain store land inside a racing
/// exchange and lose it (tokio-rs/loom#254, fixed upstream but
/// unreleased). The RMW is an equivalent release and lets loom check the
/// rest of the protocol.
#[inline(always)]
pub fn release_store(word: &AtomicU8, v: u8) {
    #[cfg(not(loom))]
    word.store(v, Ordering::Release);
    #[cfg(loom)]
    word.swap(v, Ordering::Release);
}

/// Defines a constructor that is `const fn` natively and a plain `fn` under
/// loom (whose atomics have no `const` constructor). The body is written once.
macro_rules! maybe_const_fn {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $argty:ty),*) -> $ret:ty $body:block) => {
        #[cfg(not(loom))]
        $(#[$meta])* $vis const fn $name($($arg: $argty),*) -> $ret $body
        #[cfg(loom)]
        $(#[$meta])* $vis fn $name($($arg: $argty),*) -> $ret $body
    };
}
pub(crate) use maybe_const_fn;
