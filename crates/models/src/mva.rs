//! ALL89 §V: exact mean value analysis (MVA) of closed queueing networks,
//! and the paper's hierarchical model of a thread package on a bus.
//!
//! # Exact MVA
//!
//! A [`Network`] has service centres, each a queueing centre (one server,
//! first come first served or processor sharing: the customers ahead of
//! an arrival delay it) or a delay centre (no queueing: every customer is
//! served at once), and customer classes, each with a service demand at
//! every centre (its visits times its service time per visit, in any time
//! unit). A closed network keeps a fixed population of each class cycling
//! through the centres. [`Network::solve`] computes, for that population,
//! each class's throughput, each class's residence time at each centre and
//! the mean queue length at each centre, by the exact MVA recursion over
//! every smaller population (Reiser and Lavenberg):
//!
//! * residence of class c at queueing centre k: `R_ck(n) = D_ck (1 + Q_k(n - e_c))`
//!   (the arrival theorem: an arriving customer sees the queue of the
//!   network with itself removed); at a delay centre `R_ck(n) = D_ck`;
//! * throughput `X_c(n) = n_c / Σ_k R_ck(n)` (Little's law on the cycle);
//! * queue length `Q_k(n) = Σ_c X_c(n) R_ck(n)` (Little's law per centre).
//!
//! The recursion visits every population vector below the one asked for,
//! `Π (n_c + 1)` of them; [`MAX_STATES`] bounds that product.
//!
//! # The hierarchical model
//!
//! [`Hierarchical`] is the model of ALL89 §V-A and §V-B:
//!
//! * The **high-level model** has one customer per processor, a queueing
//!   centre per lock on the thread-management path (a lock may come in
//!   identical copies, e.g. one ready queue per processor, each visited
//!   with equal probability) and a delay centre for the time spent holding
//!   no lock. Its solution gives the throughput and the time each processor
//!   waits at the locks; a waiting processor spins.
//! * The **low-level model** has the bus as a queueing centre and the
//!   processors' cache-local work as a delay centre, with two customer
//!   classes: processors doing work (whose bus demand per unit of work is
//!   fixed by the work) and processors spinning (whose bus demand depends
//!   on the spin lock). Its solution gives the response time of a bus
//!   access for a working processor.
//! * The levels meet in two quantities. The high level's demands have a
//!   bus part, which is inflated by the low level's bus response time over
//!   its service time (ALL89: "the part of each service demand due to bus
//!   accesses was inflated by the bus response time of the low-level
//!   model"); the low level's population is split into working and
//!   spinning processors by the high level's solution. The two are
//!   iterated to a fixed point within a stated relative tolerance.
//!
//! The spinning population is a mean, not an integer; the low level is
//! solved exactly at the two integer splits around it and its bus
//! response interpolated linearly between them.
//!
//! The iteration is monotone: more spinning processors load the bus more,
//! which inflates the critical sections, which makes more processors wait.
//! Starting from no inflation, the inflation factor rises to the least
//! fixed point, and it is bounded (a finite population can queue only so
//! long at the bus), so the iteration converges; [`MvaError::NotConverged`]
//! reports a case that did not within [`Hierarchical::max_iterations`].
//!
//! [`systems`] builds the two systems the paper models (a thread
//! package's ready queue, a spin lock) from measured costs.

use std::fmt;

pub mod systems;

/// Most population vectors [`Network::solve`] visits (the product of each
/// class's population plus one): 4 Mi states, about 64 MiB of queue
/// lengths for two centres.
pub const MAX_STATES: usize = 1 << 22;

/// The kind of a service centre.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Centre {
    /// One server: customers queue for it.
    Queueing,
    /// As many servers as customers: no customer ever waits.
    Delay,
}

/// Why a model could not be solved.
#[derive(Debug, Clone, PartialEq)]
pub enum MvaError {
    /// A network needs at least one centre and one class.
    Empty,
    /// A class's demands do not name every centre once, or the population
    /// does not name every class once.
    Shape {
        /// What was wrong.
        what: String,
    },
    /// A demand or parameter is negative, NaN or infinite.
    BadValue {
        /// Which one.
        what: String,
        /// Its value.
        value: f64,
    },
    /// A class with customers has zero demand at every centre: its
    /// throughput would be infinite.
    NoDemand {
        /// The class.
        class: usize,
    },
    /// The population lattice has more states than [`MAX_STATES`].
    TooLarge {
        /// States it would have.
        states: u128,
    },
    /// The hierarchical iteration did not reach its tolerance.
    NotConverged {
        /// Iterations done.
        iterations: u32,
        /// The last relative change of the bus inflation factor.
        last_change: f64,
    },
}

impl fmt::Display for MvaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MvaError::Empty => write!(f, "a network needs at least one centre and one class"),
            MvaError::Shape { what } => write!(f, "malformed network: {what}"),
            MvaError::BadValue { what, value } => {
                write!(f, "{what} must be finite and not negative, got {value}")
            }
            MvaError::NoDemand { class } => write!(
                f,
                "class {class} has customers but no demand at any centre (infinite throughput)"
            ),
            MvaError::TooLarge { states } => write!(
                f,
                "the population lattice has {states} states, more than the {MAX_STATES} allowed"
            ),
            MvaError::NotConverged {
                iterations,
                last_change,
            } => write!(
                f,
                "the hierarchical model did not converge in {iterations} iterations (last relative \
                 change {last_change:e})"
            ),
        }
    }
}

impl std::error::Error for MvaError {}

fn check(what: impl FnOnce() -> String, value: f64) -> Result<(), MvaError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(MvaError::BadValue {
            what: what(),
            value,
        })
    }
}

/// A closed network: centres and, per class, a demand at every centre.
///
/// ```
/// use symmetry_models::mva::{Centre, Network};
///
/// // One class: 1 unit at a server, 4 units of think time.
/// let net = Network::single(vec![Centre::Queueing, Centre::Delay], vec![1.0, 4.0])?;
/// let alone = net.solve(&[1])?;
/// assert!((alone.throughput[0] - 1.0 / 5.0).abs() < 1e-12);
/// // Ten customers saturate the server: one cycle per unit.
/// let busy = net.solve(&[10])?;
/// assert!(busy.throughput[0] > 0.99 && busy.throughput[0] <= 1.0);
/// # Ok::<(), symmetry_models::mva::MvaError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    kinds: Vec<Centre>,
    /// `demands[c][k]`: class c's service demand at centre k.
    demands: Vec<Vec<f64>>,
}

/// The solution of a network for one population.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Solution {
    /// Customers of each class.
    pub population: Vec<u32>,
    /// Completed cycles per time unit, per class (0 for an empty class).
    pub throughput: Vec<f64>,
    /// `residence[c][k]`: time a class-c customer spends at centre k per
    /// cycle, queueing and in service.
    pub residence: Vec<Vec<f64>>,
    /// Mean number of customers at each centre, all classes.
    pub queue: Vec<f64>,
}

impl Solution {
    /// A class's cycle time: the sum of its residence times.
    pub fn cycle(&self, class: usize) -> f64 {
        self.residence[class].iter().sum()
    }

    /// A class's time queueing (residence beyond its demand) at a centre.
    pub fn waiting(&self, net: &Network, class: usize, centre: usize) -> f64 {
        (self.residence[class][centre] - net.demands[class][centre]).max(0.0)
    }

    /// A centre's utilisation: `Σ_c X_c D_ck` (at most 1 at a queueing
    /// centre).
    pub fn utilization(&self, net: &Network, centre: usize) -> f64 {
        self.throughput
            .iter()
            .zip(&net.demands)
            .map(|(x, d)| x * d[centre])
            .sum()
    }
}

impl Network {
    /// A network of `kinds` centres with `demands[class][centre]`.
    pub fn new(kinds: Vec<Centre>, demands: Vec<Vec<f64>>) -> Result<Network, MvaError> {
        if kinds.is_empty() || demands.is_empty() {
            return Err(MvaError::Empty);
        }
        for (c, d) in demands.iter().enumerate() {
            if d.len() != kinds.len() {
                return Err(MvaError::Shape {
                    what: format!(
                        "class {c} has {} demands for {} centres",
                        d.len(),
                        kinds.len()
                    ),
                });
            }
            for (k, &v) in d.iter().enumerate() {
                check(|| format!("demand of class {c} at centre {k}"), v)?;
            }
        }
        Ok(Network { kinds, demands })
    }

    /// A one-class network.
    pub fn single(kinds: Vec<Centre>, demands: Vec<f64>) -> Result<Network, MvaError> {
        Network::new(kinds, vec![demands])
    }

    /// Number of centres.
    pub fn centres(&self) -> usize {
        self.kinds.len()
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.demands.len()
    }

    /// Class `c`'s demand at centre `k`.
    pub fn demand(&self, class: usize, centre: usize) -> f64 {
        self.demands[class][centre]
    }

    /// Exact MVA at `population` (one count per class).
    pub fn solve(&self, population: &[u32]) -> Result<Solution, MvaError> {
        Ok(self.lattice(population)?.at(population))
    }

    /// Solves every population up to `max` (per class) and keeps the queue
    /// lengths, so that any of them can be read back ([`Lattice::at`]).
    pub fn lattice(&self, max: &[u32]) -> Result<Lattice<'_>, MvaError> {
        let classes = self.classes();
        if max.len() != classes {
            return Err(MvaError::Shape {
                what: format!(
                    "population names {} classes, the network has {classes}",
                    max.len()
                ),
            });
        }
        for (c, &n) in max.iter().enumerate() {
            if n > 0 && self.demands[c].iter().all(|&d| d == 0.0) {
                return Err(MvaError::NoDemand { class: c });
            }
        }
        let states: u128 = max.iter().map(|&n| u128::from(n) + 1).product();
        if states > MAX_STATES as u128 {
            return Err(MvaError::TooLarge { states });
        }
        let states = states as usize;
        // Mixed-radix strides: index(n) = Σ n_c stride_c, stride_0 = 1.
        let mut stride = vec![1usize; classes];
        for c in 1..classes {
            stride[c] = stride[c - 1] * (max[c - 1] as usize + 1);
        }
        let k = self.centres();
        let mut queue = vec![0.0f64; states * k];
        let mut n = vec![0u32; classes];
        // Index order visits n - e_c (a smaller index) before n.
        for idx in 1..states {
            // Next population vector in mixed radix.
            for c in 0..classes {
                if n[c] < max[c] {
                    n[c] += 1;
                    break;
                }
                n[c] = 0;
            }
            let (before, here) = queue.split_at_mut(idx * k);
            let here = &mut here[..k];
            for (c, &nc) in n.iter().enumerate() {
                if nc == 0 {
                    continue;
                }
                let prev = &before[(idx - stride[c]) * k..][..k];
                let res = self.residence_row(c, prev);
                let cycle: f64 = res.iter().sum();
                let x = f64::from(nc) / cycle;
                for (q, r) in here.iter_mut().zip(&res) {
                    *q += x * r;
                }
            }
        }
        Ok(Lattice {
            net: self,
            max: max.to_vec(),
            stride,
            queue,
        })
    }

    /// Class c's residence at every centre, given the queue lengths of the
    /// population with one class-c customer removed.
    fn residence_row(&self, class: usize, prev_queue: &[f64]) -> Vec<f64> {
        self.kinds
            .iter()
            .zip(&self.demands[class])
            .zip(prev_queue)
            .map(|((kind, &d), &q)| match kind {
                Centre::Queueing => d * (1.0 + q),
                Centre::Delay => d,
            })
            .collect()
    }
}

/// Every population of a network up to a maximum, solved.
#[derive(Debug, Clone)]
pub struct Lattice<'n> {
    net: &'n Network,
    max: Vec<u32>,
    stride: Vec<usize>,
    /// Queue lengths, `centres` per population, in index order.
    queue: Vec<f64>,
}

impl Lattice<'_> {
    /// The solution at `population` (each count at most the lattice's).
    ///
    /// # Panics
    /// If `population` has the wrong length or exceeds the lattice.
    pub fn at(&self, population: &[u32]) -> Solution {
        assert_eq!(population.len(), self.max.len(), "one count per class");
        assert!(
            population.iter().zip(&self.max).all(|(n, m)| n <= m),
            "population {population:?} is outside the lattice {:?}",
            self.max
        );
        let k = self.net.centres();
        let idx = |n: &[u32]| -> usize {
            n.iter()
                .zip(&self.stride)
                .map(|(&n, &s)| n as usize * s)
                .sum()
        };
        let here = idx(population);
        let mut throughput = Vec::with_capacity(population.len());
        let mut residence = Vec::with_capacity(population.len());
        for (c, &nc) in population.iter().enumerate() {
            if nc == 0 {
                throughput.push(0.0);
                // An arriving customer of an empty class sees the whole
                // network's queues.
                residence.push(self.net.residence_row(c, &self.queue[here * k..][..k]));
                continue;
            }
            let prev = here - self.stride[c];
            let res = self.net.residence_row(c, &self.queue[prev * k..][..k]);
            throughput.push(f64::from(nc) / res.iter().sum::<f64>());
            residence.push(res);
        }
        Solution {
            population: population.to_vec(),
            throughput,
            residence,
            queue: self.queue[here * k..][..k].to_vec(),
        }
    }
}

/// How a spinning processor loads the bus (the spinning class of the
/// low-level model).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spinning {
    /// It spins in its own cache or on its own flag: no bus demand (a
    /// queue lock; its one transfer per hand-off is in the holder's
    /// demand).
    Local,
    /// One bus transaction after every `gap` of cache-local time, for as
    /// long as it waits (test-and-set: every attempt writes the line).
    Continuous {
        /// Cache-local time between two attempts.
        gap: f64,
    },
    /// `per_release` bus transactions each time the lock is released (test
    /// and test-and-set: the release invalidates every spinner's copy;
    /// each re-reads the line and attempts once). Modelled as that many
    /// transactions per critical section of the lock it waits for.
    PerRelease {
        /// Transactions per release.
        per_release: f64,
    },
}

/// A lock of the high-level model; see [`Hierarchical`] for an example.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Lock {
    /// Name, for the solution.
    pub name: String,
    /// Identical copies; a visit goes to each with equal probability
    /// (one ready queue per processor, a thread placed on a random one).
    pub copies: u32,
    /// Cache-local time held per cycle of a processor, over all copies.
    pub held_local: f64,
    /// Bus time (transactions x bus service time, uncontended) held per
    /// cycle, over all copies.
    pub held_bus: f64,
}

impl Lock {
    /// One copy of a lock held `held_local` of cache-local time and
    /// `held_bus` of bus time per cycle of a processor.
    pub fn new(name: impl Into<String>, held_local: f64, held_bus: f64) -> Lock {
        Lock {
            name: name.into(),
            copies: 1,
            held_local,
            held_bus,
        }
    }

    /// Splits the lock into `copies` identical copies (the times stay
    /// totals over all copies).
    #[must_use]
    pub fn with_copies(mut self, copies: u32) -> Lock {
        self.copies = copies;
        self
    }
}

/// ALL89's hierarchical model for one population of processors; see the
/// module docs.
///
/// A *cycle* is one unit of the work being modelled (one thread's life,
/// one lock acquisition); every time below is per cycle of one processor,
/// measured alone (no contention), in one time unit.
///
/// ```
/// use symmetry_models::mva::{Hierarchical, Lock, Spinning};
///
/// // One central lock held 2 units per cycle (1 of them bus time), 20
/// // units of work outside it, test-and-set spinners, 16 processors.
/// let p = Hierarchical::new(16, Spinning::Continuous { gap: 0.2 })
///     .with_lock(Lock::new("ready queue", 1.0, 1.0))
///     .with_free(20.0, 0.0)
///     .with_bus_service(0.1)
///     .solve()?;
/// assert!(p.throughput <= 0.5); // the lock's capacity: one cycle per 2 units
/// # Ok::<(), symmetry_models::mva::MvaError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Hierarchical {
    /// Processors (customers of both levels).
    pub processors: u32,
    /// The locks on the path.
    pub locks: Vec<Lock>,
    /// Cache-local time outside every lock.
    pub free_local: f64,
    /// Bus time outside every lock.
    pub free_bus: f64,
    /// Service time of one bus transaction.
    pub bus_service: f64,
    /// How a waiting processor loads the bus.
    pub spinning: Spinning,
    /// Relative change of the bus inflation factor at which the iteration
    /// stops.
    pub tolerance: f64,
    /// Iterations before [`MvaError::NotConverged`].
    pub max_iterations: u32,
}

/// What the hierarchical model predicts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Prediction {
    /// Processors.
    pub processors: u32,
    /// Cycles completed per time unit, all processors together.
    pub throughput: f64,
    /// Time per cycle of one processor (`processors / throughput`).
    pub cycle: f64,
    /// Time a processor waits (spins) at each lock per cycle, all copies.
    pub lock_wait: Vec<f64>,
    /// Mean number of processors spinning.
    pub spinning: f64,
    /// Bus response time of a working processor's transaction over the
    /// bus service time (1: no bus contention).
    pub bus_inflation: f64,
    /// Bus utilisation, both classes.
    pub bus_utilization: f64,
    /// Iterations between the levels.
    pub iterations: u32,
}

impl Hierarchical {
    /// Default tolerance: a relative change of `1e-9`.
    pub const TOLERANCE: f64 = 1e-9;
    /// Default iteration limit.
    pub const MAX_ITERATIONS: u32 = 10_000;

    /// `processors` processors spinning as `spinning` says, with no locks,
    /// no time outside them and a free bus: add them with the `with_*`
    /// methods. Iterates to [`Hierarchical::TOLERANCE`], at most
    /// [`Hierarchical::MAX_ITERATIONS`] times.
    pub fn new(processors: u32, spinning: Spinning) -> Hierarchical {
        Hierarchical {
            processors,
            locks: Vec::new(),
            free_local: 0.0,
            free_bus: 0.0,
            bus_service: 0.0,
            spinning,
            tolerance: Self::TOLERANCE,
            max_iterations: Self::MAX_ITERATIONS,
        }
    }

    /// Adds a lock on the path.
    #[must_use]
    pub fn with_lock(mut self, lock: Lock) -> Hierarchical {
        self.locks.push(lock);
        self
    }

    /// Sets the cache-local and the bus time outside every lock.
    #[must_use]
    pub fn with_free(mut self, local: f64, bus: f64) -> Hierarchical {
        self.free_local = local;
        self.free_bus = bus;
        self
    }

    /// Sets the service time of one bus transaction.
    #[must_use]
    pub fn with_bus_service(mut self, bus_service: f64) -> Hierarchical {
        self.bus_service = bus_service;
        self
    }

    /// Sets the relative change at which the iteration stops.
    #[must_use]
    pub fn with_tolerance(mut self, tolerance: f64) -> Hierarchical {
        self.tolerance = tolerance;
        self
    }

    /// Sets the iteration limit.
    #[must_use]
    pub fn with_max_iterations(mut self, max_iterations: u32) -> Hierarchical {
        self.max_iterations = max_iterations;
        self
    }

    fn validate(&self) -> Result<(), MvaError> {
        if self.processors == 0 {
            return Err(MvaError::Shape {
                what: "no processors".into(),
            });
        }
        for l in &self.locks {
            if l.copies == 0 {
                return Err(MvaError::Shape {
                    what: format!("lock `{}` has no copies", l.name),
                });
            }
            check(|| format!("held_local of `{}`", l.name), l.held_local)?;
            check(|| format!("held_bus of `{}`", l.name), l.held_bus)?;
        }
        check(|| "free_local".into(), self.free_local)?;
        check(|| "free_bus".into(), self.free_bus)?;
        check(|| "bus_service".into(), self.bus_service)?;
        match self.spinning {
            Spinning::Local => {}
            Spinning::Continuous { gap } => check(|| "spinning gap".into(), gap)?,
            Spinning::PerRelease { per_release } => {
                check(|| "spinning per_release".into(), per_release)?
            }
        }
        if !(self.tolerance > 0.0 && self.tolerance.is_finite()) {
            return Err(MvaError::BadValue {
                what: "tolerance (must be above zero)".into(),
                value: self.tolerance,
            });
        }
        let total = self.free_local
            + self.free_bus
            + self
                .locks
                .iter()
                .map(|l| l.held_local + l.held_bus)
                .sum::<f64>();
        if total <= 0.0 {
            return Err(MvaError::NoDemand { class: 0 });
        }
        Ok(())
    }

    /// Bus transactions of a working processor per cycle.
    fn bus_per_cycle(&self) -> f64 {
        self.free_bus + self.locks.iter().map(|l| l.held_bus).sum::<f64>()
    }

    /// The low-level network: bus (queueing) and cache (delay), classes
    /// working and spinning, per bus transaction of each.
    fn low_level(&self) -> Result<Option<Network>, MvaError> {
        let bus = self.bus_per_cycle();
        if self.bus_service == 0.0 || bus == 0.0 {
            // Working processors never touch the bus: nothing to inflate.
            return Ok(None);
        }
        let local = self.free_local + self.locks.iter().map(|l| l.held_local).sum::<f64>();
        // A working processor: one transaction, then the cache-local time
        // that goes with it in its cycle.
        let work = vec![self.bus_service, self.bus_service * local / bus];
        let spin = match self.spinning {
            Spinning::Local => vec![0.0, 1.0],
            Spinning::Continuous { gap } => vec![self.bus_service, gap],
            Spinning::PerRelease { per_release } => {
                // per_release transactions per critical section: the
                // gap between two is the mean time a lock is held over
                // per_release (at least the service itself).
                let held: f64 = self
                    .locks
                    .iter()
                    .map(|l| l.held_local + l.held_bus)
                    .sum::<f64>();
                if per_release == 0.0 {
                    vec![0.0, 1.0]
                } else {
                    vec![self.bus_service, held / per_release]
                }
            }
        };
        Network::new(vec![Centre::Queueing, Centre::Delay], vec![work, spin]).map(Some)
    }

    /// The high-level network for a bus inflation factor: a queueing
    /// centre per lock copy and the delay centre.
    fn high_level(&self, inflation: f64) -> Result<Network, MvaError> {
        let mut kinds = Vec::new();
        let mut demands = Vec::new();
        for l in &self.locks {
            let d = (l.held_local + l.held_bus * inflation) / f64::from(l.copies);
            for _ in 0..l.copies {
                kinds.push(Centre::Queueing);
                demands.push(d);
            }
        }
        kinds.push(Centre::Delay);
        demands.push(self.free_local + self.free_bus * inflation);
        Network::single(kinds, demands)
    }

    /// Solves the model: the two levels iterated until the bus inflation
    /// factor changes by less than the tolerance.
    pub fn solve(&self) -> Result<Prediction, MvaError> {
        self.validate()?;
        let p = self.processors;
        let low = self.low_level()?;
        let lattice = match &low {
            Some(net) => Some(net.lattice(&[p, p])?),
            None => None,
        };
        // Bus response of a working transaction over its service time,
        // with `spinning` of the processors spinning (interpolated between
        // the integer splits around it), and the bus utilisation.
        let inflate = |spinning: f64| -> (f64, f64) {
            let Some(l) = &lattice else {
                return (1.0, 0.0);
            };
            let s = spinning.clamp(0.0, f64::from(p) - 1.0);
            let lo = s.floor() as u32;
            let frac = s - f64::from(lo);
            let at = |k: u32| {
                let sol = l.at(&[p - k, k]);
                (
                    sol.residence[0][0] / self.bus_service,
                    sol.utilization(l.net, 0),
                )
            };
            let (f0, u0) = at(lo);
            if frac == 0.0 || lo + 1 > p - 1 {
                return (f0, u0);
            }
            let (f1, u1) = at(lo + 1);
            (f0 + frac * (f1 - f0), u0 + frac * (u1 - u0))
        };
        let mut f = 1.0f64;
        let mut last_change = f64::INFINITY;
        for iteration in 1..=self.max_iterations {
            let high = self.high_level(f)?;
            let sol = high.solve(&[p])?;
            let x = sol.throughput[0];
            let lock_centres = high.centres() - 1;
            let waits: Vec<f64> = (0..lock_centres)
                .map(|k| sol.waiting(&high, 0, k))
                .collect();
            let spinning = x * waits.iter().sum::<f64>();
            let (next, bus_utilization) = inflate(spinning);
            last_change = ((next - f) / f).abs();
            f = next;
            if last_change <= self.tolerance {
                // Per-lock waits, copies added up.
                let mut lock_wait = Vec::with_capacity(self.locks.len());
                let mut at = 0;
                for l in &self.locks {
                    let n = l.copies as usize;
                    lock_wait.push(waits[at..at + n].iter().sum());
                    at += n;
                }
                return Ok(Prediction {
                    processors: p,
                    throughput: x,
                    cycle: f64::from(p) / x,
                    lock_wait,
                    spinning,
                    bus_inflation: f,
                    bus_utilization,
                    iterations: iteration,
                });
            }
        }
        Err(MvaError::NotConverged {
            iterations: self.max_iterations,
            last_change,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn two_customers_by_hand() {
        // D = [2, 3] queueing, N = 2. N = 1: R = [2, 3], X = 1/5,
        // Q = [0.4, 0.6]. N = 2: R = [2.8, 4.8], X = 2/7.6.
        let net = Network::single(vec![Centre::Queueing; 2], vec![2.0, 3.0]).unwrap();
        let s = net.solve(&[2]).unwrap();
        assert!(close(s.residence[0][0], 2.8));
        assert!(close(s.residence[0][1], 4.8));
        assert!(close(s.throughput[0], 2.0 / 7.6));
        assert!(close(s.queue.iter().sum::<f64>(), 2.0));
    }

    #[test]
    fn delay_centre_never_queues() {
        let net = Network::single(vec![Centre::Delay], vec![5.0]).unwrap();
        for n in 1..10u32 {
            let s = net.solve(&[n]).unwrap();
            assert!(close(s.throughput[0], f64::from(n) / 5.0));
        }
    }

    #[test]
    fn an_empty_class_changes_nothing() {
        let one = Network::single(vec![Centre::Queueing, Centre::Delay], vec![1.0, 4.0]).unwrap();
        let two = Network::new(
            vec![Centre::Queueing, Centre::Delay],
            vec![vec![1.0, 4.0], vec![3.0, 0.5]],
        )
        .unwrap();
        for n in 0..8u32 {
            let a = one.solve(&[n]).unwrap();
            let b = two.solve(&[n, 0]).unwrap();
            assert!(close(a.throughput[0], b.throughput[0]));
            assert_eq!(b.throughput[1], 0.0);
        }
    }

    #[test]
    fn identical_classes_are_one_class() {
        let kinds = vec![Centre::Queueing, Centre::Queueing, Centre::Delay];
        let d = vec![1.0, 0.5, 3.0];
        let one = Network::single(kinds.clone(), d.clone()).unwrap();
        let two = Network::new(kinds, vec![d.clone(), d]).unwrap();
        for (a, b) in [(1u32, 2u32), (3, 3), (0, 5), (4, 1)] {
            let merged = one.solve(&[a + b]).unwrap();
            let split = two.solve(&[a, b]).unwrap();
            let total = split.throughput[0] + split.throughput[1];
            assert!(close(merged.throughput[0], total), "{a},{b}");
            for k in 0..3 {
                assert!(close(merged.queue[k], split.queue[k]));
            }
        }
    }

    #[test]
    fn bad_networks_are_refused() {
        assert_eq!(Network::new(vec![], vec![]), Err(MvaError::Empty));
        assert!(matches!(
            Network::single(vec![Centre::Queueing], vec![1.0, 2.0]),
            Err(MvaError::Shape { .. })
        ));
        assert!(matches!(
            Network::single(vec![Centre::Queueing], vec![f64::NAN]),
            Err(MvaError::BadValue { .. })
        ));
        assert!(matches!(
            Network::single(vec![Centre::Queueing], vec![-1.0]),
            Err(MvaError::BadValue { .. })
        ));
        let zero = Network::single(vec![Centre::Queueing], vec![0.0]).unwrap();
        assert_eq!(zero.solve(&[1]), Err(MvaError::NoDemand { class: 0 }));
        assert!(zero.solve(&[0]).is_ok());
        let net = Network::single(vec![Centre::Queueing], vec![1.0]).unwrap();
        assert!(matches!(net.solve(&[1, 1]), Err(MvaError::Shape { .. })));
        let big = Network::new(vec![Centre::Queueing], vec![vec![1.0]; 3]).unwrap();
        assert!(matches!(
            big.solve(&[1000, 1000, 1000]),
            Err(MvaError::TooLarge { .. })
        ));
        let mut h = tm(4, 0.0);
        h.tolerance = 0.0;
        assert!(matches!(h.solve(), Err(MvaError::BadValue { .. })));
        h.tolerance = 1e-9;
        h.locks[0].copies = 0;
        assert!(matches!(h.solve(), Err(MvaError::Shape { .. })));
        assert!(MvaError::TooLarge { states: 5 }.to_string().contains('5'));
    }

    /// A thread package: one central lock held 2 units (1 of it bus) per
    /// cycle, 20 units of local work plus `bus` units of bus work outside.
    fn tm(p: u32, bus: f64) -> Hierarchical {
        Hierarchical::new(p, Spinning::Continuous { gap: 0.2 })
            .with_lock(Lock::new("ready", 1.0, 1.0))
            .with_free(20.0, bus)
            .with_bus_service(0.1)
    }

    #[test]
    fn one_processor_pays_its_demands() {
        for bus in [0.0, 1.0, 5.0] {
            let h = tm(1, bus);
            let p = h.solve().unwrap();
            assert!(close(p.cycle, 22.0 + bus), "{}", p.cycle);
            assert_eq!(p.spinning, 0.0);
            assert!(close(p.bus_inflation, 1.0));
        }
    }

    #[test]
    fn spinning_that_loads_the_bus_costs_more_than_local_spinning() {
        let tas = tm(32, 1.0).solve().unwrap();
        let mut q = tm(32, 1.0);
        q.spinning = Spinning::Local;
        let queue = q.solve().unwrap();
        assert!(tas.bus_inflation > queue.bus_inflation);
        assert!(tas.throughput < queue.throughput);
        // The central lock bounds both.
        assert!(queue.throughput <= 1.0 / 2.0 + 1e-12);
    }

    #[test]
    fn per_processor_copies_remove_the_bottleneck() {
        let central = tm(16, 0.0).solve().unwrap();
        let mut local = tm(16, 0.0);
        local.locks[0].copies = 16;
        let local = local.solve().unwrap();
        assert!(local.throughput > 1.5 * central.throughput);
        assert!(local.lock_wait[0] < central.lock_wait[0]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Throughput never exceeds a queueing centre's capacity nor the
        /// population over the total demand, rises with the population,
        /// and one customer takes exactly the sum of its demands.
        #[test]
        fn single_class_bounds(
            demands in prop::collection::vec(0.0f64..10.0, 1..6),
            delay in 0.0f64..50.0,
            n in 1u32..40,
        ) {
            let mut kinds = vec![Centre::Queueing; demands.len()];
            let mut d = demands.clone();
            kinds.push(Centre::Delay);
            d.push(delay);
            let total: f64 = d.iter().sum();
            prop_assume!(total > 1e-6);
            let net = Network::single(kinds, d).unwrap();
            let one = net.solve(&[1]).unwrap();
            prop_assert!(close(1.0 / one.throughput[0], total));
            let dmax = demands.iter().copied().fold(0.0, f64::max);
            let mut last = 0.0;
            for m in 1..=n {
                let s = net.solve(&[m]).unwrap();
                let x = s.throughput[0];
                prop_assert!(x <= f64::from(m) / total * (1.0 + 1e-9));
                if dmax > 0.0 {
                    prop_assert!(x <= (1.0 / dmax) * (1.0 + 1e-9));
                }
                prop_assert!(x >= last * (1.0 - 1e-12));
                prop_assert!(close(s.queue.iter().sum::<f64>(), f64::from(m)));
                last = x;
            }
        }

        /// Two classes: every queueing centre's utilisation is at most 1,
        /// queue lengths add up to the population, and adding a customer
        /// of one class never lowers that class's throughput nor raises
        /// the other's. (The total may fall: a slow customer added to one
        /// class delays the fast cycles of the other.)
        #[test]
        fn two_class_bounds(
            a in prop::collection::vec(0.01f64..5.0, 3),
            b in prop::collection::vec(0.01f64..5.0, 3),
            n0 in 0u32..12,
            n1 in 0u32..12,
        ) {
            let kinds = vec![Centre::Queueing, Centre::Queueing, Centre::Delay];
            let net = Network::new(kinds, vec![a, b]).unwrap();
            let l = net.lattice(&[n0 + 1, n1 + 1]).unwrap();
            let s = l.at(&[n0, n1]);
            for k in 0..2 {
                prop_assert!(s.utilization(&net, k) <= 1.0 + 1e-9);
            }
            prop_assert!(close(s.queue.iter().sum::<f64>(), f64::from(n0 + n1)));
            let more0 = l.at(&[n0 + 1, n1]);
            let more1 = l.at(&[n0, n1 + 1]);
            prop_assert!(more0.throughput[0] >= s.throughput[0] * (1.0 - 1e-12));
            prop_assert!(more0.throughput[1] <= s.throughput[1] * (1.0 + 1e-12));
            prop_assert!(more1.throughput[1] >= s.throughput[1] * (1.0 - 1e-12));
            prop_assert!(more1.throughput[0] <= s.throughput[0] * (1.0 + 1e-12));
        }

        /// The hierarchical model converges, its throughput is bounded by
        /// the central lock (inflation only lengthens it), and it rises
        /// with the processors while the lock is not saturated.
        #[test]
        fn hierarchical_bounds(
            p in 1u32..48,
            bus in 0.0f64..4.0,
            gap in 0.01f64..5.0,
        ) {
            let mut h = tm(p, bus);
            h.spinning = Spinning::Continuous { gap };
            let pred = h.solve().unwrap();
            prop_assert!(pred.throughput <= 0.5 * (1.0 + 1e-9));
            prop_assert!(pred.throughput <= f64::from(p) / (22.0 + bus) * (1.0 + 1e-9));
            prop_assert!(pred.bus_inflation >= 1.0 - 1e-12);
            prop_assert!(pred.bus_utilization <= 1.0 + 1e-9);
            prop_assert!(pred.spinning <= f64::from(p));
        }
    }
}
