//! The models' random-number generator: the workspace's one seeded
//! SplitMix64 ([`symmetry_platform::rng`]), so every Monte Carlo estimate
//! and every replay is reproducible.

pub use symmetry_platform::rng::SplitMix64;
