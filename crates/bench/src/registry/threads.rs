//! The thread-management strategies by registry name, for the `tm-*`,
//! `presto-create-*` and `peer-threads` experiments.
//!
//! Kernels are generic functions over [`symmetry_threads::Strategy`];
//! [`with_strategy!`](crate::with_strategy) turns a name into a call of the
//! monomorphized kernel, so no virtual call sits inside a timed loop.

/// Registry names of the strategies, in ALL89's order (§III-A..E).
pub const NAMES: &[&str] = &[
    "single-lock",
    "multi-lock",
    "local-freelist",
    "idle-queue",
    "local-readyq",
];

/// Calls `$kernel::<Strategy>(args...)` for the strategy named `$name`,
/// with ALL89's FIFO ready pools ([`symmetry_threads::Fifo`], what the
/// papers' experiments measure); evaluates to `Some(result)`, or `None`
/// for an unknown name.
///
/// ```ignore
/// let out = with_strategy!(name, null_chain(procs, total));
/// ```
#[macro_export]
macro_rules! with_strategy {
    ($name:expr, $kernel:ident ( $($arg:expr),* $(,)? )) => {
        match $name {
            "single-lock" => Some($kernel::<symmetry_threads::SingleLock<symmetry_locks::Tas, symmetry_threads::Fifo>>($($arg),*)),
            "multi-lock" => Some($kernel::<symmetry_threads::MultiLock<symmetry_locks::Tas, symmetry_threads::Fifo>>($($arg),*)),
            "local-freelist" => Some($kernel::<symmetry_threads::LocalFreelist<symmetry_locks::Tas, symmetry_threads::Fifo>>($($arg),*)),
            "idle-queue" => Some($kernel::<symmetry_threads::IdleQueue<symmetry_locks::Tas, symmetry_threads::Fifo>>($($arg),*)),
            "local-readyq" => Some($kernel::<symmetry_threads::LocalReadyq<symmetry_locks::Tas, symmetry_threads::Fifo>>($($arg),*)),
            _ => None,
        }
    };
}

/// [`with_strategy!`] with the newest-created-thread-first ready pools
/// ([`symmetry_threads::NewestFirst`]).
#[macro_export]
macro_rules! with_strategy_newest {
    ($name:expr, $kernel:ident ( $($arg:expr),* $(,)? )) => {
        match $name {
            "single-lock" => Some($kernel::<symmetry_threads::SingleLock<symmetry_locks::Tas, symmetry_threads::NewestFirst>>($($arg),*)),
            "multi-lock" => Some($kernel::<symmetry_threads::MultiLock<symmetry_locks::Tas, symmetry_threads::NewestFirst>>($($arg),*)),
            "local-freelist" => Some($kernel::<symmetry_threads::LocalFreelist<symmetry_locks::Tas, symmetry_threads::NewestFirst>>($($arg),*)),
            "idle-queue" => Some($kernel::<symmetry_threads::IdleQueue<symmetry_locks::Tas, symmetry_threads::NewestFirst>>($($arg),*)),
            "local-readyq" => Some($kernel::<symmetry_threads::LocalReadyq<symmetry_locks::Tas, symmetry_threads::NewestFirst>>($($arg),*)),
            _ => None,
        }
    };
}

#[cfg(test)]
mod tests {
    /// The harness table and the crate's registry name the same strategies.
    #[test]
    fn names_match_registry() {
        let mut from_macro: Vec<&str> = Vec::new();
        macro_rules! collect {
            ($($n:literal => $t:ty,)*) => { $( from_macro.push($n); let _ = std::marker::PhantomData::<$t>; )* };
        }
        symmetry_threads::for_each_strategy!(collect);
        assert_eq!(from_macro, super::NAMES);
    }
}
