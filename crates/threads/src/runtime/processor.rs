//! PRESTO's processor object: the hooks a user can run on each processor
//! ([`Processor`]), and the built-in one that runs none
//! ([`DefaultProcessor`]).

use crate::cb::CbRef;

/// PRESTO's processor object, as hooks a user can implement: called on the
/// processor's OS thread at start, before each dispatch, and at exit. The
/// default does nothing and compiles to nothing.
pub trait Processor: Default + Send + Sync + 'static {
    /// The processor `index` starts (on its own OS thread).
    fn on_start(&self, _index: usize) {}
    /// Processor `index` is about to run thread `t`.
    #[inline(always)]
    fn on_dispatch(&self, _index: usize, _t: CbRef) {}
    /// The processor `index` exits.
    fn on_exit(&self, _index: usize) {}
}

/// The built-in processor: no hooks.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultProcessor;

impl Processor for DefaultProcessor {}
