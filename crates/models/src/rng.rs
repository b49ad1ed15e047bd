//! The models' random-number generator: the workspace's one seeded
//! SplitMix64 ([`symmetry_locks::platform::rng`]), so every Monte Carlo estimate
//! and every replay is reproducible.

pub use symmetry_locks::platform::rng::SplitMix64;
