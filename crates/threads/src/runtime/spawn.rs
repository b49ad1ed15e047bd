//! Spawning: [`Handle`] (create from anywhere), [`ThreadBuilder`] (a
//! name, a priority), [`Unstarted`] (PRESTO's create without start),
//! [`spawn_detached_here`], and the runtime's own spawn methods. A thread
//! spawned with a [`JoinHandle`] carries its join packet in its closure
//! (`StartFailure`), which completes it if the thread cannot start.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use symmetry_locks::sync::Ordering;

use super::Runtime;
use super::context::{ProcCtx, proc_header};
use super::processor::{DefaultProcessor, Processor};
use super::shared::Shared;
use super::stats::Stats;
use super::worker::START_FAILURE;
use crate::cb::CbRef;
use crate::join::{JoinHandle, NoStack, Packet};
use crate::strategy::{ProcStats, Strategy};

/// The join packet as the spawned closure holds it. If the closure is
/// dropped unrun because the thread could not start, the packet is
/// completed with the reason, so the joiner is told instead of waiting
/// for a thread that will never run. (Dropped unrun for any other reason,
/// a deleted or abandoned thread, it leaves the packet to the handle.)
struct StartFailure<T>(Option<Arc<Packet<T>>>);

impl<T> Drop for StartFailure<T> {
    fn drop(&mut self) {
        if let Some(p) = self.0.take()
            && let Some(e) = START_FAILURE.with(|f| f.take())
        {
            p.complete(Err(Box::new(NoStack(e))));
        }
    }
}

/// Spawns a detached thread on the runtime of the calling processor,
/// whose strategy must be `S` (and processor `P`): no handle to clone.
#[inline]
pub fn spawn_detached_here<S: Strategy, P: Processor, F: FnOnce() + Send + 'static>(
    f: F,
) -> Result<(), crate::NotInRuntime> {
    let h = proc_header();
    // SAFETY: a non-null PROC points at a live processor context whose
    // `rt` is a `Shared` of type `rt_type`; we cast only if it is ours, and
    // then the header is the first field of that runtime's `ProcCtx<S>`
    // (`repr(C)`).
    let (shared, ctx) = unsafe {
        if h.is_null() || (*h).rt_type != std::any::TypeId::of::<Shared<S, P>>() {
            return Err(crate::NotInRuntime {
                op: "spawn_detached_here",
            });
        }
        (
            &*((*h).rt as *const Shared<S, P>),
            &*(h as *const ProcCtx<S>),
        )
    };
    shared.create_here(ctx, f, None, 0);
    Ok(())
}

impl<S: Strategy, P: Processor> Runtime<S, P> {
    /// A cloneable handle for spawning (usable from any thread).
    pub fn handle(&self) -> Handle<S, P> {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Creates a thread that runs `f`; see [`Handle::spawn`].
    pub fn spawn<T, F>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.handle().spawn(f)
    }

    /// Creates a thread without a join handle; see [`Handle::spawn_detached`].
    pub fn spawn_detached<F: FnOnce() + Send + 'static>(&self, f: F) {
        self.handle().spawn_detached(f)
    }

    /// Runs `f` as a user thread and waits (blocking this OS thread) for
    /// its result. A panic in `f` comes back as `Err`.
    pub fn block_on<T, F>(&self, f: F) -> Result<T, crate::JoinError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn(f).join()
    }
}

/// A handle to a runtime: spawns threads from anywhere. Cloning is cheap.
///
/// ```
/// use symmetry_threads::{Handle, Runtime, SingleLock};
///
/// let mut rt: Runtime<SingleLock> = Runtime::new(2)?;
/// let h: Handle<SingleLock> = rt.handle();
/// // From an OS thread outside the runtime...
/// let outside = std::thread::spawn({
///     let h = h.clone();
///     move || h.spawn(|| 1).join().unwrap()
/// });
/// // ...and from a user thread, whose join blocks only that user thread.
/// let inside = h.spawn({
///     let h = h.clone();
///     move || h.builder().name("child").spawn(|| 2).join().unwrap()
/// });
/// assert_eq!(outside.join().unwrap() + inside.join().unwrap(), 3);
/// rt.shutdown();
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Handle<S: Strategy, P: Processor = DefaultProcessor> {
    shared: Arc<Shared<S, P>>,
}

impl<S: Strategy, P: Processor> Clone for Handle<S, P> {
    fn clone(&self) -> Self {
        Handle {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: Strategy, P: Processor> std::fmt::Debug for Handle<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("strategy", &S::NAME)
            .finish()
    }
}

impl<S: Strategy, P: Processor> Handle<S, P> {
    /// Creates and starts a thread running `f` (Table I create). No join
    /// handle, no allocation beyond the free lists: ALL89's null thread.
    #[inline]
    pub fn spawn_detached<F: FnOnce() + Send + 'static>(&self, f: F) {
        self.shared.create(f, None, 0);
    }

    /// Creates and starts a thread running `f`; its result (or panic)
    /// comes back through the [`JoinHandle`].
    pub fn spawn<T, F>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.builder().spawn(f)
    }

    /// A builder for a thread with a name or a priority.
    pub fn builder(&self) -> ThreadBuilder<'_, S, P> {
        ThreadBuilder {
            handle: self,
            name: None,
            priority: 0,
        }
    }

    /// PRESTO's create without start: allocates a control block and
    /// stores `f` in it, without making it ready. Start it with
    /// [`Unstarted::start`]; dropping it deletes the thread.
    pub fn create<F: FnOnce() + Send + 'static>(&self, f: F) -> Unstarted<S, P> {
        let sh = &*self.shared;
        let cb = sh.with_local(|l| sh.strategy.alloc_cb(l));
        let id = sh.outside_thread_id();
        // SAFETY: a freshly allocated cb is ours.
        unsafe { cb.init(f, id, None, 0, &sh.hooks) };
        Unstarted {
            handle: self.clone(),
            cb: Some(cb),
        }
    }

    /// The runtime's counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Whether the calling code runs on one of this runtime's processors.
    pub fn is_current(&self) -> bool {
        self.shared.local_ctx().is_some()
    }
}

/// A created thread that has not been started (PRESTO §3.3).
pub struct Unstarted<S: Strategy, P: Processor = DefaultProcessor> {
    handle: Handle<S, P>,
    cb: Option<CbRef>,
}

impl<S: Strategy, P: Processor> std::fmt::Debug for Unstarted<S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unstarted").field("cb", &self.cb).finish()
    }
}

impl<S: Strategy, P: Processor> Unstarted<S, P> {
    /// Makes the thread ready (PRESTO's start). It counts as created in
    /// [`Stats`] from here on (a thread deleted unstarted never runs).
    pub fn start(mut self) {
        if let Some(cb) = self.cb.take() {
            let sh = &*self.handle.shared;
            match sh.local_ctx() {
                Some(ctx) => ProcStats::bump(&sh.env.stats[ctx.header.index].created, 1),
                // Relaxed: a statistic.
                None => {
                    sh.created_outside.fetch_add(1, Ordering::Relaxed);
                }
            }
            sh.make_ready(cb);
        }
    }
}

impl<S: Strategy, P: Processor> Drop for Unstarted<S, P> {
    fn drop(&mut self) {
        if let Some(cb) = self.cb.take() {
            let sh = &*self.handle.shared;
            // SAFETY: the cb never started; we own it.
            unsafe {
                cb.drop_entry();
                cb.reset();
            }
            sh.with_local(|l| sh.strategy.release_cb(l, cb));
        }
    }
}

/// Builds a thread with a name and a priority.
pub struct ThreadBuilder<'a, S: Strategy, P: Processor = DefaultProcessor> {
    handle: &'a Handle<S, P>,
    name: Option<Box<str>>,
    priority: i64,
}

impl<S: Strategy, P: Processor> std::fmt::Debug for ThreadBuilder<'_, S, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadBuilder")
            .field("name", &self.name)
            .finish()
    }
}

impl<S: Strategy, P: Processor> ThreadBuilder<'_, S, P> {
    /// Names the thread (shown in panics at join and stack-overflow
    /// reports).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into().into_boxed_str());
        self
    }

    /// Sets the priority a custom [`crate::ReadyPool`] may use.
    pub fn priority(mut self, p: i64) -> Self {
        self.priority = p;
        self
    }

    /// Spawns without a join handle.
    pub fn spawn_detached<F: FnOnce() + Send + 'static>(self, f: F) {
        self.handle.shared.create(f, self.name, self.priority);
    }

    /// Spawns with a join handle.
    pub fn spawn<T, F>(self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let name: Option<Arc<str>> = self.name.as_deref().map(Arc::from);
        let packet = Arc::new(Packet::new());
        let mut done = StartFailure(Some(Arc::clone(&packet)));
        self.handle.shared.create(
            move || {
                let r = catch_unwind(AssertUnwindSafe(f));
                if let Some(p) = done.0.take() {
                    p.complete(r);
                }
            },
            self.name,
            self.priority,
        );
        JoinHandle::new(packet, name, Arc::clone(&self.handle.shared.stopped))
    }
}
