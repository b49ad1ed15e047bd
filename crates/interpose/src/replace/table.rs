//! The address tables of replace mode: a fixed open-address map from an
//! address (a mutex's, a condition variable's) to a leaked value, keys
//! never removed ([`replace`](super)'s docs).

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Entries of the address tables (mutexes; condition variables).
pub const SLOTS: usize = 1 << 20;

/// One address table: keys (0 = free) and values (null = being filled).
pub(super) struct Table<T> {
    keys: Box<[AtomicUsize]>,
    vals: Box<[AtomicPtr<T>]>,
}

impl<T> Table<T> {
    pub(super) fn new() -> Self {
        Table {
            keys: zeroed_slice(),
            vals: zeroed_slice(),
        }
    }

    fn start(addr: usize) -> usize {
        // Fibonacci hashing of the address (mutexes are 8-byte aligned).
        ((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44) as usize & (SLOTS - 1)
    }

    /// The value of `addr`, if mapped.
    #[inline]
    pub(super) fn get(&self, addr: usize) -> Option<*mut T> {
        let mut i = Self::start(addr);
        for _ in 0..SLOTS {
            // Acquire: pairs with the Release CAS that inserted the key.
            match self.keys[i].load(Ordering::Acquire) {
                0 => return None,
                k if k == addr => return Some(self.wait_val(i)),
                _ => i = (i + 1) & (SLOTS - 1),
            }
        }
        None
    }

    fn wait_val(&self, i: usize) -> *mut T {
        loop {
            // Acquire: pairs with the Release store of the value.
            let v = self.vals[i].load(Ordering::Acquire);
            if !v.is_null() {
                return v;
            }
            std::hint::spin_loop();
        }
    }

    /// The value of `addr`, mapping it to `make()` if it is not mapped;
    /// `None` when the table is full.
    pub(super) fn get_or_insert(
        &self,
        addr: usize,
        make: impl FnOnce() -> *mut T,
    ) -> Option<*mut T> {
        let mut i = Self::start(addr);
        for _ in 0..SLOTS {
            // Acquire: as in `get`.
            let k = self.keys[i].load(Ordering::Acquire);
            if k == addr {
                return Some(self.wait_val(i));
            }
            if k == 0 {
                // AcqRel: Release publishes the key; Acquire (on failure)
                // reads the winner's key.
                match self.keys[i].compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        let v = make();
                        // Release: publishes the lock object to `wait_val`.
                        self.vals[i].store(v, Ordering::Release);
                        return Some(v);
                    }
                    Err(k) if k == addr => return Some(self.wait_val(i)),
                    Err(_) => {}
                }
            }
            i = (i + 1) & (SLOTS - 1);
        }
        None
    }

    /// Maps `addr` to `v`; `false` when the table is full.
    pub(super) fn set(&self, addr: usize, v: *mut T) -> bool {
        let Some(old) = self.get_or_insert(addr, || v) else {
            return false;
        };
        if old != v {
            let mut i = Self::start(addr);
            // Acquire: as in `get`.
            while self.keys[i].load(Ordering::Acquire) != addr {
                i = (i + 1) & (SLOTS - 1);
            }
            // Release: as in `get_or_insert`.
            self.vals[i].store(v, Ordering::Release);
        }
        true
    }
}

/// `SLOTS` zeroed atomics, from zero pages: untouched entries cost no
/// memory.
fn zeroed_slice<T>() -> Box<[T]> {
    let layout = std::alloc::Layout::array::<T>(SLOTS).expect("table layout");
    // SAFETY: a non-zero layout; the result is checked for null.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `T` is `AtomicUsize` or `AtomicPtr<_>`, for which all-zero
    // bytes are a valid value (0, null); the allocation holds `SLOTS` of
    // them with `T`'s layout, and the Box frees it with that layout.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, SLOTS)) }
}
