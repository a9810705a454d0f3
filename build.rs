//! Links the `ahp-wrap` executable as a position-dependent (non-PIE) binary on Linux.
//!
//! Why: the agent runs `ahp-wrap hook …` once per tool call, so its start-up is the hook
//! path's largest cost. As a PIE, the dynamic loader must apply ~20,000 relative relocations
//! to a ~360 KiB `.data.rel.ro` before `main`, copying every page it touches: a third of the
//! hook process's instructions and ~90 of its ~220 page faults. Without PIE those are gone
//! (measured in BENCHMARKS.md: the added latency per hook call roughly halves on a loaded
//! machine). The price: the executable's own code and data sit at a fixed address (the
//! stack, heap, mmap regions and shared libraries are still randomized). Build with
//! `AHP_WRAP_PIE=1` to keep PIE.

fn main() {
    println!("cargo:rerun-if-env-changed=AHP_WRAP_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let keep_pie = std::env::var_os("AHP_WRAP_PIE").is_some_and(|v| !v.is_empty() && v != "0");
    if linux && !keep_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
