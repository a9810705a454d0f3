//! The agent's process tree, seen and ended with safe system calls (nix's, and `/proc`):
//! what `crates/confine` spawns is followed here, with no `unsafe` code.
//!
//! - [`procfs`]: the process table from `/proc`: who descends from whom, and the tree's
//!   resource use.
//! - [`tree`]: the whole tree, including what tried to leave it (the wrapper is a child
//!   subreaper), and its end.
//! - [`cgroup`]: a cgroup v2 sub-group for the agent, where the machine lets us make one.
//! - [`fds`]: a process's descriptors (flags, sockets) and Unix sockets, as `/proc` shows them.
//! - [`signals`]: where the agent lives among process groups, and the signals we receive
//!   forwarded to it.
//! - [`sockets`]: TCP sockets as `/proc` and the kernel's socket diagnostics show them.
//!
//! Owns: reading and signalling processes. Must not touch: spawning them (`crates/confine`),
//! events or decisions.

#![forbid(unsafe_code)]

pub mod cgroup;
pub mod fds;
pub mod procfs;
pub mod signals;
pub mod sockets;
pub mod tree;
