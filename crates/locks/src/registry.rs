//! The lock registry: every lock named once, with what it promises.
//!
//! [`for_each_lock!`](crate::for_each_lock) calls a macro of the caller's
//! with one entry per lock,
//! `"name" => Type, kind = spin|queue|baseline, fifo = bool;`. The generic
//! test suite (`tests/locks.rs`) and the harness's name table both expand
//! from it, so a new algorithm is added in exactly one place.

/// What family a registered lock belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// Spins on one shared word (TAS, TTAS, backoff).
    Spin,
    /// Grants the lock in arrival order (ticket, array and list locks).
    Queue,
    /// A lock of another library or of the OS, wrapped for comparison.
    Baseline,
    /// A preemption-safe lock of SMARTQ's family (scheduler interface or
    /// time publishing); listed here over [`crate::sched::Stock`].
    PreemptSafe,
}

/// Static facts about one registered lock.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct LockInfo {
    /// Registry name (CLI, CSV `series` column).
    pub name: &'static str,
    /// Family.
    pub kind: LockKind,
    /// Whether the algorithm grants the lock in FIFO order of arrival.
    pub fifo: bool,
}

/// A lock guard state that fits in one machine word, so that a lock can be
/// driven through a `dyn` interface ([`crate::DynLock`]) without boxing.
///
/// # Safety
///
/// `from_word(into_word(g))` must give back a guard state equivalent to `g`.
pub unsafe trait GuardWord: Sized {
    /// Encodes the guard state.
    fn into_word(self) -> usize;
    /// Decodes a guard state.
    ///
    /// # Safety
    ///
    /// `w` must come from [`GuardWord::into_word`] of the same type.
    unsafe fn from_word(w: usize) -> Self;
}

// SAFETY: stateless guards carry no information.
unsafe impl GuardWord for lock_api::GuardSend {
    #[inline(always)]
    fn into_word(self) -> usize {
        0
    }
    #[inline(always)]
    unsafe fn from_word(_: usize) -> Self {
        lock_api::GuardSend::new()
    }
}

// SAFETY: stateless guards carry no information.
unsafe impl GuardWord for lock_api::GuardNoSend {
    #[inline(always)]
    fn into_word(self) -> usize {
        0
    }
    #[inline(always)]
    unsafe fn from_word(_: usize) -> Self {
        lock_api::GuardNoSend::new()
    }
}

/// Calls `$callback! { "name" => Type, kind = K, fifo = B; ... }` with every
/// lock of the crate, algorithms first, then baselines.
///
/// ```
/// macro_rules! names {
///     ($($name:literal => $ty:ty, kind = $kind:ident, fifo = $fifo:literal;)*) => {
///         &[$($name),*]
///     };
/// }
/// let all: &[&str] = symmetry_locks::for_each_lock!(names);
/// assert!(all.contains(&"mcs"));
/// ```
#[macro_export]
macro_rules! for_each_lock {
    ($callback:ident) => {
        $callback! {
            "tas" => $crate::Tas, kind = Spin, fifo = false;
            "ttas" => $crate::Ttas, kind = Spin, fifo = false;
            "backoff" => $crate::Backoff, kind = Spin, fifo = false;
            "backoff-persistent" => $crate::BackoffPersistent, kind = Spin, fifo = false;
            "ticket" => $crate::Ticket, kind = Queue, fifo = true;
            "ticket-proportional" => $crate::TicketProportional, kind = Queue, fifo = true;
            "anderson" => $crate::Anderson, kind = Queue, fifo = true;
            "graunke-thakkar" => $crate::GraunkeThakkar, kind = Queue, fifo = true;
            "mcs" => $crate::Mcs, kind = Queue, fifo = true;
            "clh" => $crate::Clh, kind = Queue, fifo = true;
            "tas-np" => $crate::TasNp, kind = PreemptSafe, fifo = false;
            // Over `Stock`, mcs-np and smart-q skip waiters whose heartbeat
            // is stale (time publishing): FIFO among running waiters only.
            "mcs-np" => $crate::McsNp, kind = PreemptSafe, fifo = false;
            "handshake" => $crate::Handshake, kind = PreemptSafe, fifo = false;
            "smart-q" => $crate::SmartQ, kind = PreemptSafe, fifo = false;
            "native-np" => $crate::NativeNp, kind = PreemptSafe, fifo = false;
            "mcs-tp" => $crate::McsTp, kind = PreemptSafe, fifo = false;
            "std" => $crate::StdMutex, kind = Baseline, fifo = false;
            "parking_lot" => $crate::ParkingLot, kind = Baseline, fifo = false;
            "pthread" => $crate::Pthread, kind = Baseline, fifo = false;
            "pthread-adaptive" => $crate::PthreadAdaptive, kind = Baseline, fifo = false;
        }
    };
}

/// Calls `$callback! { "name" => Type; ... }` with the locks of SMARTQ's
/// experiments over scheduler interface `$sched`: its eight locks (`tas`,
/// `tas-np`, `mcs` as "Queued", `mcs-np`, `handshake`, `smart-q`, `native`
/// as the platform's pthread mutex, `native-np`), then `mcs-tp` and
/// `parking_lot`.
///
/// ```
/// macro_rules! names {
///     ($($name:literal => $ty:ty;)*) => { &[$($name),*] };
/// }
/// let all: &[&str] = symmetry_locks::for_each_preempt_lock!(names, symmetry_locks::sched::Stock);
/// assert_eq!(all.len(), 10);
/// ```
#[macro_export]
macro_rules! for_each_preempt_lock {
    ($callback:ident, $sched:ty) => {
        $callback! {
            "tas" => $crate::Tas;
            "tas-np" => $crate::TasNp<$sched>;
            "mcs" => $crate::Mcs;
            "mcs-np" => $crate::McsNp<$sched>;
            "handshake" => $crate::Handshake<$sched>;
            "smart-q" => $crate::SmartQ<$sched>;
            "native" => $crate::Pthread;
            "native-np" => $crate::NativeNp<$sched>;
            "mcs-tp" => $crate::McsTp;
            "parking_lot" => $crate::ParkingLot;
        }
    };
}

macro_rules! info_table {
    ($($name:literal => $ty:ty, kind = $kind:ident, fifo = $fifo:literal;)*) => {
        &[$(LockInfo { name: $name, kind: LockKind::$kind, fifo: $fifo }),*]
    };
}

/// Every registered lock, in registry order.
pub const ALL: &[LockInfo] = for_each_lock!(info_table);

/// Looks a lock up by registry name.
pub fn find(name: &str) -> Option<&'static LockInfo> {
    ALL.iter().find(|l| l.name == name)
}
