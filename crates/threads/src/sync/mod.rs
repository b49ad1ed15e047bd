//! Blocking synchronization for user threads (filled in by the sync
//! objects issue work).
