//! Constants of the machine a run is on: atomic RMW cost, cache-line
//! round trip between cores, block+wake cost (`symmetry calibrate`).
