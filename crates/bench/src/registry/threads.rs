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

/// Calls `$kernel::<Strategy>(args...)` for the strategy named `$name`
/// with ready pools `$pool` (and `Tas` locks); evaluates to
/// `Some(result)`, or `None` for an unknown name. `with_strategy!` and
/// `with_strategy_newest!` name the pool.
#[macro_export]
macro_rules! with_strategy_pool {
    ($name:expr, $pool:ty, $kernel:ident ( $($arg:expr),* $(,)? )) => {
        match $name {
            "single-lock" => Some($kernel::<symmetry_threads::SingleLock<symmetry_locks::Tas, $pool>>($($arg),*)),
            "multi-lock" => Some($kernel::<symmetry_threads::MultiLock<symmetry_locks::Tas, $pool>>($($arg),*)),
            "local-freelist" => Some($kernel::<symmetry_threads::LocalFreelist<symmetry_locks::Tas, $pool>>($($arg),*)),
            "idle-queue" => Some($kernel::<symmetry_threads::IdleQueue<symmetry_locks::Tas, $pool>>($($arg),*)),
            "local-readyq" => Some($kernel::<symmetry_threads::LocalReadyq<symmetry_locks::Tas, $pool>>($($arg),*)),
            _ => None,
        }
    };
}

/// `with_strategy_pool!` with ALL89's FIFO ready pools
/// ([`symmetry_threads::Fifo`], what the papers' experiments measure).
///
/// ```ignore
/// let out = with_strategy!(name, null_chain(procs, total));
/// ```
#[macro_export]
macro_rules! with_strategy {
    ($name:expr, $kernel:ident ( $($arg:expr),* $(,)? )) => {
        $crate::with_strategy_pool!($name, symmetry_threads::Fifo, $kernel($($arg),*))
    };
}

/// `with_strategy_pool!` with the pools the strategies ship with
/// ([`symmetry_threads::NewestFirst`]).
#[macro_export]
macro_rules! with_strategy_newest {
    ($name:expr, $kernel:ident ( $($arg:expr),* $(,)? )) => {
        $crate::with_strategy_pool!($name, symmetry_threads::NewestFirst, $kernel($($arg),*))
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
