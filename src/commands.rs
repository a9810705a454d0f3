//! The subcommands other than running an agent: `serve`, `audit verify|summary`.

use std::sync::Arc;

use crate::audit::{self, load_key, KEY_ENV};
use crate::cli::{AuditCommand, ServeArgs};
use crate::decide::Embedded;
use crate::policy::Policy;
use crate::serve::{Advertised, Engine, Listen};

/// Exit code of a check that found a problem.
pub const EXIT_PROBLEM: u8 = 1;
/// Exit code when the command itself cannot run.
pub const EXIT_ERROR: u8 = 2;

pub fn audit(cmd: AuditCommand) -> u8 {
    match cmd {
        AuditCommand::Verify { path, key_file } => {
            let key = match load_key(key_file.as_deref(), std::env::var(KEY_ENV).ok()) {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("ahp-wrap: {}", crate::error_chain(&e));
                    return EXIT_ERROR;
                }
            };
            let report = audit::verify(&path, key.as_deref());
            print!("{}", report.to_text());
            if report.is_ok() {
                0
            } else {
                EXIT_PROBLEM
            }
        }
        AuditCommand::Summary { path, markdown } => match audit::summary(&path) {
            Ok(s) => {
                print!(
                    "{}",
                    if markdown {
                        s.to_markdown()
                    } else {
                        s.to_text()
                    }
                );
                0
            }
            Err(e) => {
                eprintln!("ahp-wrap: {}", crate::error_chain(&e));
                EXIT_ERROR
            }
        },
    }
}

/// Loads `--policy FILE`, or the default policy.
pub fn load_policy(file: Option<&std::path::Path>) -> Result<Policy, String> {
    match file {
        Some(f) => Policy::load(f).map_err(|e| crate::error_chain(&e)),
        None => Ok(Policy::default_policy()),
    }
}

pub fn serve(args: ServeArgs) -> u8 {
    let listen = match Listen::parse(&args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ahp-wrap: {e}");
            return EXIT_ERROR;
        }
    };
    let policy = match load_policy(args.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ahp-wrap: {e}");
            return EXIT_ERROR;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ahp-wrap: cannot start the runtime: {e}");
            return EXIT_ERROR;
        }
    };
    runtime.block_on(async move {
        let audit =
            match crate::run::open_audit(args.audit_log.as_deref(), args.audit_key_file.as_deref())
            {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("ahp-wrap: {e}");
                    return EXIT_ERROR;
                }
            };
        let engine = Arc::new(Engine {
            embedded: Arc::new(Embedded {
                policy,
                mode: args.mode,
            }),
            audit,
            advertised: Advertised {
                timeout_ms: args.timeout,
                batch_size: args.batch_size.max(1),
                max_depth: args.max_depth,
            },
        });
        let announce = |addr: String| eprintln!("ahp-wrap serve: listening on {addr}");
        match crate::serve::serve(
            engine,
            listen,
            args.token.filter(|t| !t.is_empty()),
            announce,
        )
        .await
        {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("ahp-wrap: {}", crate::error_chain(&e));
                EXIT_ERROR
            }
        }
    })
}
