//! Other tools' config setters: `npm config set`, `yarn config set`, `pip config set` (and
//! `pip install --target`), `go env -w` of a key that decides what the toolchain runs or
//! fetches, `gh alias set --shell`, `conda config --add channels`, `gem sources --add`,
//! `bundle config mirror.*`: the tool's own settings file each writes.
//!
//! Owns: which of these subcommands set something and where each tool keeps it. Must not
//! touch: git's settings (`git`), or what a later install fetches (`semantics::installs`).

use std::path::{Path, PathBuf};

use super::{has, option_value, positionals};

/// `npm config set K V` / `npm set K=V` (and pnpm's): the user's `~/.npmrc` (its token and
/// the settings that run code: `script-shell`, `node-options`, `registry`), or the global one
/// with `-g`/`--location=global`, or `--userconfig FILE`. pnpm's own settings go to its rc.
pub(super) fn npm_config(program: &str, args: &[String], home: &Path) -> Vec<PathBuf> {
    let pos = positionals(
        args,
        &["--location", "--userconfig", "--globalconfig", "-C"],
    );
    let setting = matches!(pos.as_slice(), ["config" | "c", "set", ..] | ["set", ..]);
    if !setting {
        return Vec::new();
    }
    if let Some(f) = option_value(args, &["--userconfig"]) {
        return vec![PathBuf::from(f)];
    }
    let location = option_value(args, &["--location"]);
    if has(args, &["-g", "--global"]) || location == Some("global") {
        return vec![
            PathBuf::from("/usr/local/etc/npmrc"),
            PathBuf::from("/etc/npmrc"),
        ];
    }
    if location == Some("project") {
        return vec![PathBuf::from(".npmrc")];
    }
    let mut out = vec![home.join(".npmrc")];
    if program == "pnpm" {
        out.push(home.join(".config/pnpm/rc"));
    }
    out
}

/// `yarn config set K V`: classic yarn's `~/.yarnrc`, or berry's `~/.yarnrc.yml` with
/// `-H`/`--home`.
pub(super) fn yarn_config(args: &[String], home: &Path) -> Vec<PathBuf> {
    let pos = positionals(args, &[]);
    if !matches!(pos.as_slice(), ["config", "set", ..]) {
        return Vec::new();
    }
    if has(args, &["-H", "--home"]) {
        vec![home.join(".yarnrc.yml")]
    } else {
        vec![home.join(".yarnrc")]
    }
}

/// `pip config [--user|--global] set K V`: the user's `pip.conf` (which index the next
/// install trusts), or the machine's with `--global`. And `pip install --target DIR`: the
/// packages land in DIR (the user's site-packages, say), whatever they are.
pub(super) fn pip_config(args: &[String], home: &Path) -> Vec<PathBuf> {
    if args.first().is_some_and(|a| a == "install") {
        return option_value(args, &["--target", "-t"])
            .map(|t| vec![PathBuf::from(t).join("*")])
            .unwrap_or_default();
    }
    let pos = positionals(args, &["--editor"]);
    if !matches!(pos.as_slice(), ["config", "set", ..]) {
        return Vec::new();
    }
    if has(args, &["--global"]) {
        vec![
            PathBuf::from("/etc/pip.conf"),
            PathBuf::from("/etc/xdg/pip/pip.conf"),
        ]
    } else if has(args, &["--site"]) {
        Vec::new()
    } else {
        vec![home.join(".config/pip/pip.conf")]
    }
}

/// `go env -w K=V` of a variable that decides what the go command runs (`GOFLAGS`'s
/// `-toolexec`, `CC`, `GOROOT`, `GOTOOLCHAIN`) or where modules come from unchecked
/// (`GOPROXY`, `GOSUMDB`, `GONOSUMDB`, `GOINSECURE`): go's own environment file.
pub(super) fn go_env(args: &[String], home: &Path) -> Vec<PathBuf> {
    let pos = positionals(args, &[]);
    if pos.first() != Some(&"env") || !has(args, &["-w"]) {
        return Vec::new();
    }
    const KEYS: &[&str] = &[
        "GOFLAGS",
        "GOPROXY",
        "GOSUMDB",
        "GONOSUMDB",
        "GONOSUMCHECK",
        "GOINSECURE",
        "GONOPROXY",
        "CC",
        "CXX",
        "AR",
        "PKG_CONFIG",
        "GCCGO",
        "CGO_CFLAGS",
        "CGO_CPPFLAGS",
        "CGO_CXXFLAGS",
        "CGO_FFLAGS",
        "CGO_LDFLAGS",
        "GOROOT",
        "GOTOOLCHAIN",
        "GOCACHE",
        "GOMODCACHE",
        "GOENV",
    ];
    let sets = pos[1..].iter().any(|a| {
        a.split_once('=')
            .is_some_and(|(k, _)| KEYS.contains(&k.to_ascii_uppercase().as_str()))
    });
    if sets {
        vec![home.join(".config/go/env")]
    } else {
        Vec::new()
    }
}

/// `gh alias set NAME 'CMD' --shell` (or an expansion starting with `!`), `gh alias import`,
/// `gh config set editor|pager|browser CMD`: gh's `config.yml`, whose commands gh runs later.
pub(super) fn gh_config(args: &[String], home: &Path) -> Vec<PathBuf> {
    let pos = positionals(args, &["-h", "--hostname", "--clobber"]);
    let runs = match pos.as_slice() {
        ["alias", "set", _, expansion, ..] => {
            has(args, &["-s", "--shell"]) || expansion.starts_with('!')
        }
        ["alias", "import", ..] => true,
        ["config", "set", key, ..] => matches!(*key, "editor" | "pager" | "browser"),
        _ => false,
    };
    if runs {
        vec![home.join(".config/gh/config.yml")]
    } else {
        Vec::new()
    }
}

/// `conda config --add channels URL` (`--append`, `--prepend`, `--set channel_alias URL`):
/// where every later install fetches its packages.
pub(super) fn conda_config(args: &[String], home: &Path) -> Vec<PathBuf> {
    if args.first().map(String::as_str) != Some("config") {
        return Vec::new();
    }
    const KEYS: &[&str] = &[
        "channels",
        "channel_alias",
        "default_channels",
        "custom_channels",
        "custom_multichannels",
        "proxy_servers",
        "ssl_verify",
    ];
    let sets = args.windows(2).any(|w| {
        matches!(w[0].as_str(), "--add" | "--append" | "--prepend" | "--set")
            && KEYS.contains(&w[1].as_str())
    });
    if !sets {
        return Vec::new();
    }
    match option_value(args, &["--file"]) {
        Some(f) => vec![PathBuf::from(f)],
        None => vec![home.join(".condarc")],
    }
}

/// `gem sources --add URL`: the gem sources every later `gem install` trusts (`~/.gemrc`).
pub(super) fn gem_sources(args: &[String], home: &Path) -> Vec<PathBuf> {
    if args.first().map(String::as_str) == Some("sources") && has(args, &["-a", "--add"]) {
        vec![home.join(".gemrc")]
    } else {
        Vec::new()
    }
}

/// `bundle config [set] [--global] mirror.URL OTHER`: a mirror every later `bundle install`
/// fetches gems from (`~/.bundle/config`).
pub(super) fn bundle_config(args: &[String], home: &Path) -> Vec<PathBuf> {
    let pos = positionals(args, &[]);
    let key = match pos.as_slice() {
        ["config", "set", key, ..] => key,
        ["config", key, _, ..] => key,
        _ => return Vec::new(),
    };
    if key.to_ascii_lowercase().starts_with("mirror.") && !has(args, &["--local"]) {
        vec![home.join(".bundle/config")]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::args;
    use super::*;

    #[test]
    fn package_managers_config_setters() {
        let h = Path::new("/h");
        assert_eq!(
            npm_config("npm", &args("config set registry x"), h),
            [PathBuf::from("/h/.npmrc")]
        );
        assert!(npm_config("npm", &args("config get registry"), h).is_empty());
        assert_eq!(
            pip_config(&args("config set global.index-url x"), h),
            [PathBuf::from("/h/.config/pip/pip.conf")]
        );
        assert_eq!(
            pip_config(&args("install --target /t x"), h),
            [PathBuf::from("/t/*")]
        );
        assert!(pip_config(&args("install -r requirements.txt"), h).is_empty());
        assert_eq!(
            go_env(&args("env -w GOFLAGS=-toolexec=x"), h),
            [PathBuf::from("/h/.config/go/env")]
        );
        assert!(go_env(&args("env -w GOPRIVATE=github.com/acme"), h).is_empty());
        assert!(gh_config(&args("alias set co pr checkout"), h).is_empty());
        assert_eq!(
            gh_config(&args("alias set --shell co x"), h),
            [PathBuf::from("/h/.config/gh/config.yml")]
        );
    }
}
