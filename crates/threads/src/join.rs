//! Join handles: a thread's result (or panic) delivered to whoever joins.
//!
//! The packet is shared by the thread (which completes it) and the handle
//! (which waits for it). The waiter, a user thread or an OS thread, is
//! recorded under the packet's spin lock (a few instructions are held
//! under it) and woken after the result is stored.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;
use symmetry_locks::sync::{AtomicBool, Ordering};

use symmetry_locks::Tas;

use crate::cb::CbRef;
use crate::stack::StackError;

/// The result payload of a thread that could not start (distinct from
/// any panic payload a user could throw).
pub(crate) struct NoStack(pub(crate) StackError);

enum Waiter {
    User(CbRef),
    Os(std::thread::Thread),
}

struct Inner<T> {
    result: Option<std::thread::Result<T>>,
    done: bool,
    waiter: Option<Waiter>,
}

pub(crate) struct Packet<T> {
    inner: lock_api::Mutex<Tas, Inner<T>>,
}

impl<T> Packet<T> {
    pub(crate) fn new() -> Self {
        Packet {
            inner: lock_api::Mutex::new(Inner {
                result: None,
                done: false,
                waiter: None,
            }),
        }
    }

    /// Stores the result and wakes the joiner, if one waits.
    pub(crate) fn complete(&self, r: std::thread::Result<T>) {
        let w = {
            let mut g = self.inner.lock();
            g.result = Some(r);
            g.done = true;
            g.waiter.take()
        };
        match w {
            Some(Waiter::User(cb)) => crate::runtime::context::unpark(cb),
            Some(Waiter::Os(t)) => t.unpark(),
            None => {}
        }
    }
}

/// Why [`JoinHandle::join`] has no value.
#[derive(Debug)]
#[non_exhaustive]
pub enum JoinError {
    /// The thread panicked; the payload is the panic's.
    Panicked {
        /// The thread's name, if it had one.
        name: Option<Arc<str>>,
        /// The panic payload.
        payload: Box<dyn Any + Send + 'static>,
    },
    /// The runtime shut down while the thread was blocked or had not
    /// started; it will never finish.
    Abandoned,
    /// The thread never started: no stack could be had for it (see
    /// [`StackError`]).
    NoStack(StackError),
}

impl JoinError {
    /// The panic message, if the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked { payload, .. } => payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str)),
            JoinError::Abandoned | JoinError::NoStack(_) => None,
        }
    }
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Panicked { name, .. } => {
                write!(
                    f,
                    "user thread '{}' panicked",
                    name.as_deref().unwrap_or("<unnamed>")
                )?;
                if let Some(m) = self.panic_message() {
                    write!(f, ": {m}")?;
                }
                Ok(())
            }
            JoinError::Abandoned => {
                f.write_str("the runtime shut down before the user thread finished")
            }
            JoinError::NoStack(e) => write!(f, "the user thread could not start: {e}"),
        }
    }
}

impl std::error::Error for JoinError {}

/// An owned permission to wait for a user thread's result.
///
/// ```
/// use symmetry_threads::{JoinHandle, LocalReadyq, Runtime};
///
/// let mut rt: Runtime<LocalReadyq> = Runtime::new(2)?;
/// let sum: JoinHandle<u64> = rt.spawn(|| (1..=10).sum());
/// assert_eq!(sum.join().unwrap(), 55);
/// // A panic comes back from `join` as an error naming the thread.
/// let bad = rt.handle().builder().name("parser").spawn(|| -> u64 { panic!("bad input") });
/// let err = bad.join().unwrap_err();
/// assert_eq!(err.to_string(), "user thread 'parser' panicked: bad input");
/// rt.shutdown();
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinHandle<T> {
    packet: Arc<Packet<T>>,
    name: Option<Arc<str>>,
    stopped: Arc<AtomicBool>,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("name", &self.name)
            .finish()
    }
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(
        packet: Arc<Packet<T>>,
        name: Option<Arc<str>>,
        stopped: Arc<AtomicBool>,
    ) -> Self {
        JoinHandle {
            packet,
            name,
            stopped,
        }
    }

    /// Whether the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.packet.inner.lock().done
    }

    /// Waits for the thread and returns its result. From a user thread
    /// this blocks only the user thread (its processor runs others); from
    /// any other thread it blocks the OS thread.
    pub fn join(self) -> Result<T, JoinError> {
        let me = crate::runtime::context::current_cb();
        loop {
            {
                let mut g = self.packet.inner.lock();
                if let Some(r) = g.result.take() {
                    return r.map_err(|payload| match payload.downcast::<NoStack>() {
                        Ok(e) => JoinError::NoStack(e.0),
                        Err(payload) => JoinError::Panicked {
                            name: self.name.clone(),
                            payload,
                        },
                    });
                }
                g.waiter = Some(match me {
                    Some(cb) => Waiter::User(cb),
                    None => Waiter::Os(std::thread::current()),
                });
            }
            match me {
                Some(cb) => crate::runtime::context::park_current(cb),
                None => {
                    // Acquire: pairs with the Release store at the end of
                    // `Runtime::shutdown`; abandoned threads never complete.
                    if self.stopped.load(Ordering::Acquire) {
                        let g = self.packet.inner.lock();
                        if !g.done {
                            return Err(JoinError::Abandoned);
                        }
                        continue;
                    }
                    std::thread::park_timeout(Duration::from_millis(20));
                }
            }
        }
    }
}
