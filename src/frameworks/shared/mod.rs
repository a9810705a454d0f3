//! Helpers more than one framework's shim needs, named by the contract shape they serve.
//!
//! Nothing here names a framework: each shim passes its own name, event names and
//! contract decisions in. What lives here is the scaffolding that was the same in every
//! shim — reading a hook payload, building hook output, merging hook settings.

pub mod output;
pub mod payload;
pub mod settings;
mod verdict;

pub use verdict::{additional_context, updated_input};
