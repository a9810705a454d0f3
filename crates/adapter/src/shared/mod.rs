//! Helpers more than one framework's shim needs, named by the contract shape they serve.
//!
//! Nothing here names a framework: each shim passes its own name, event names and
//! contract decisions in. What lives here is the scaffolding that was the same in every
//! shim — the event table (`hook_events!`), the `Shim` constant that names errors and
//! hook commands, reading a hook payload, building hook output, hook timeouts, merging
//! hook settings.

mod events;
pub mod output;
pub mod payload;
pub mod settings;
mod shim;
pub mod system_file;
pub mod timeout;
mod verdict;

pub use crate::updated_input;
pub use shim::Shim;
pub use verdict::additional_context;
