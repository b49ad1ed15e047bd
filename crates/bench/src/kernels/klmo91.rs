//! KLMO91 workloads (a Regsim-like and a Hanoi-like program) run under
//! every spin-then-block policy, shared by the KLMO91 experiments.
