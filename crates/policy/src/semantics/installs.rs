//! Package installs, and names one or two letters away from a popular package's: the
//! classic typosquat (`pip install reqeusts`, `npm i lodahs`).
//!
//! The lists are the most downloaded packages of each registry, bundled; a name on the list
//! is never a typosquat of another (`boto` and `boto3` are both real).

use crate::command::{is_unknown, Command};

/// Popular PyPI projects (normalised: lower case, `-` for `_` and `.`).
#[rustfmt::skip]
const PYPI: &[&str] = &[
    "boto3", "botocore", "boto", "urllib3", "requests", "setuptools", "certifi",
    "charset-normalizer", "idna", "typing-extensions", "python-dateutil", "s3transfer",
    "packaging", "aiobotocore", "six", "numpy", "pyyaml", "pyaml", "grpcio", "pip", "cryptography",
    "fsspec", "s3fs", "wheel", "pydantic", "pydantic-core", "attrs", "protobuf", "cffi",
    "pycparser", "jmespath", "google-api-core", "pandas", "rsa", "pyasn1", "markupsafe", "jinja2",
    "click", "platformdirs", "importlib-metadata", "zipp", "pytz", "filelock", "tomli", "colorama",
    "wrapt", "pluggy", "pytest", "virtualenv", "awscli", "aiohttp", "multidict", "yarl",
    "frozenlist", "aiosignal", "psutil", "pyjwt", "jsonschema", "requests-oauthlib", "oauthlib",
    "sqlalchemy", "greenlet", "tqdm", "scipy", "pillow", "httpx", "httpcore", "anyio", "sniffio",
    "h11", "werkzeug", "flask", "django", "fastapi", "starlette", "uvicorn", "gunicorn", "lxml",
    "beautifulsoup4", "soupsieve", "openpyxl", "matplotlib", "scikit-learn", "joblib",
    "threadpoolctl", "tensorflow", "torch", "torchvision", "transformers", "tokenizers",
    "huggingface-hub", "safetensors", "regex", "rich", "pygments", "markdown", "docutils",
    "sphinx", "black", "isort", "flake8", "pycodestyle", "pyflakes", "mypy", "mypy-extensions",
    "pylint", "coverage", "pytest-cov", "tox", "nox", "poetry", "pipenv", "twine", "build",
    "hatchling", "redis", "celery", "kombu", "psycopg2", "psycopg2-binary", "pymysql", "pymongo",
    "paramiko", "bcrypt", "pynacl", "docker", "kubernetes", "openai", "anthropic", "langchain",
    "tiktoken", "sentry-sdk", "opentelemetry-api", "prometheus-client", "websockets",
    "websocket-client", "pyparsing", "decorator", "simplejson", "ujson", "orjson", "toml",
    "tomlkit", "ruff", "pre-commit", "ipython", "jupyter", "notebook", "nbformat", "selenium",
    "playwright", "scrapy", "twisted", "pyopenssl", "dnspython", "python-dotenv", "dotenv",
    "colorlog", "loguru", "structlog", "arrow", "pendulum", "babel", "mock", "responses",
    "freezegun", "faker", "hypothesis", "typer", "fire", "tabulate", "termcolor", "pexpect",
    "ptyprocess", "invoke", "fabric", "ansible", "jira", "slack-sdk", "discord-py", "tornado",
    "moto", "psycopg", "scapy", "numba", "attr", "jinja", "djongo", "pyjwt", "jwt",
];

/// Popular npm packages.
#[rustfmt::skip]
const NPM: &[&str] = &[
    "lodash", "react", "react-dom", "chalk", "express", "axios", "commander", "debug", "tslib",
    "moment", "uuid", "typescript", "request", "async", "fs-extra", "bluebird", "prop-types",
    "underscore", "vue", "classnames", "yargs", "dotenv", "webpack", "jquery", "glob", "rimraf",
    "mkdirp", "semver", "minimist", "colors", "inquirer", "body-parser", "core-js", "rxjs",
    "babel-core", "@babel/core", "eslint", "prettier", "jest", "mocha", "chai", "sinon", "next",
    "node-fetch", "cross-env", "nodemon", "ws", "socket.io", "redux", "react-redux",
    "styled-components", "graphql", "apollo-server", "mongoose", "mongodb", "mysql", "mysql2",
    "pg", "sequelize", "redis", "ioredis", "jsonwebtoken", "bcrypt", "bcryptjs", "passport",
    "cors", "helmet", "morgan", "winston", "pino", "dayjs", "date-fns", "luxon", "zod", "yup",
    "joi", "ajv", "cheerio", "puppeteer", "playwright", "vite", "rollup", "esbuild", "parcel",
    "babel-loader", "css-loader", "style-loader", "sass", "less", "postcss", "tailwindcss",
    "autoprefixer", "nuxt", "svelte", "angular", "@angular/core", "ember-source", "three", "d3",
    "chart.js", "immer", "mobx", "zustand", "swr", "react-query", "@tanstack/react-query",
    "react-router", "react-router-dom", "formik", "react-hook-form", "lerna", "nx", "turbo",
    "husky", "lint-staged", "concurrently", "npm-run-all", "shelljs", "execa", "cross-spawn",
    "ora", "boxen", "figlet", "nanoid", "shortid", "qs", "querystring", "form-data", "got",
    "superagent", "supertest", "ts-node", "tsx", "nodemailer", "sharp", "jimp", "multer", "busboy",
    "cookie-parser", "express-session", "compression", "http-proxy", "http-proxy-middleware",
    "electron", "electron-builder", "typeorm", "prisma", "@prisma/client", "knex", "openai",
    "@anthropic-ai/sdk", "eslint-plugin-react", "@types/node", "@types/react", "ethers", "web3",
    "crypto-js", "node-sass", "pm2", "forever", "coffee-script", "coffeescript", "event-stream",
    "flatmap-stream", "left-pad", "is-odd", "is-even", "colors.js", "faker", "@faker-js/faker",
    "ua-parser-js", "node-ipc", "vitest", "preact", "nest", "nestjs", "koa", "hapi", "fastify",
    "debug-js", "chai-http",
];

/// Popular crates.
#[rustfmt::skip]
const CRATES: &[&str] = &[
    "serde", "serde_json", "serde_derive", "tokio", "rand", "syn", "quote", "proc-macro2", "libc",
    "log", "regex", "clap", "anyhow", "thiserror", "futures", "bytes", "hyper", "reqwest",
    "chrono", "time", "lazy_static", "once_cell", "itertools", "bitflags", "base64", "uuid", "url",
    "http", "tracing", "tracing-subscriber", "env_logger", "num", "num-traits", "rayon",
    "crossbeam", "parking_lot", "smallvec", "indexmap", "hashbrown", "ahash", "memchr",
    "byteorder", "sha2", "hmac", "digest", "ring", "rustls", "openssl", "toml", "tempfile",
    "walkdir", "glob", "nix", "which", "dirs", "async-trait", "axum", "actix-web", "warp", "tower",
    "tonic", "prost", "diesel", "sqlx", "rusqlite", "criterion", "proptest", "structopt",
    "color-eyre", "eyre", "tokio-util", "mio", "socket2", "flate2", "zip", "tar", "csv", "bincode",
    "postcard", "semver", "cc", "cmake", "pkg-config", "bindgen", "wasm-bindgen", "js-sys",
    "web-sys", "getrandom", "fastrand", "arrayvec", "either", "strum", "derive_more", "dashmap",
    "bstr", "unicode-width", "console", "indicatif", "dialoguer", "colored", "termcolor",
    "crossterm", "ratatui", "tui",
];

/// Popular gems.
#[rustfmt::skip]
const GEMS: &[&str] = &[
    "rails", "rake", "bundler", "rack", "activesupport", "activerecord", "actionpack", "nokogiri",
    "json", "rspec", "rspec-core", "minitest", "puma", "thor", "i18n", "tzinfo", "concurrent-ruby",
    "rubocop", "faraday", "httparty", "devise", "sidekiq", "redis", "pg", "mysql2", "sqlite3",
    "aws-sdk", "aws-sdk-s3", "jwt", "bcrypt", "sinatra", "capistrano", "pry", "byebug",
    "rest-client", "mime-types", "multi_json", "addressable", "public_suffix", "builder", "erubi",
    "mail", "net-http", "colorize", "rainbow", "ffi", "racc", "zeitwerk",
];

/// The registry a command installs from, and the names it installs.
fn installs(cmd: &Command) -> Option<(&'static [&'static str], Vec<String>)> {
    let args: Vec<&str> = cmd.args.iter().map(String::as_str).collect();
    let (list, rest): (&'static [&'static str], &[&str]) =
        match (cmd.program.as_str(), args.as_slice()) {
            ("pip" | "pip3" | "pipx", ["install", rest @ ..]) => (PYPI, rest),
            ("uv", ["pip", "install", rest @ ..]) | ("uv", ["add", rest @ ..]) => (PYPI, rest),
            ("poetry" | "pdm" | "rye", ["add", rest @ ..]) => (PYPI, rest),
            ("npm" | "pnpm" | "bun", [sub, rest @ ..])
                if matches!(*sub, "install" | "i" | "add" | "in") =>
            {
                (NPM, rest)
            }
            ("yarn", ["add", rest @ ..]) => (NPM, rest),
            ("cargo", [sub, rest @ ..]) if matches!(*sub, "add" | "install") => (CRATES, rest),
            ("gem", ["install", rest @ ..]) => (GEMS, rest),
            _ => return None,
        };
    // Options that take a value, per tool.
    const WITH_VALUE: &[&str] = &[
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-t",
        "--target",
        "--prefix",
        "-e",
        "--editable",
        "--registry",
        "--version",
        "--features",
        "-F",
        "--git",
        "--path",
        "--branch",
        "--tag",
        "--rev",
        "--root",
        "-v",
        "--group",
        "-G",
        "--source",
        "-w",
        "--workspace",
        "--filter",
    ];
    let mut names = Vec::new();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        if WITH_VALUE.contains(a) {
            it.next();
            continue;
        }
        if a.starts_with('-')
            || is_unknown(a)
            || a.contains("://")
            || a.starts_with('.')
            || a.starts_with('/')
            || a.ends_with(".whl")
            || a.ends_with(".tgz")
            || a.ends_with(".tar.gz")
            || a.contains(':')
        {
            continue;
        }
        names.push(package_name(a, list == NPM));
    }
    Some((list, names))
}

/// A requirement's bare name: `requests[socks]>=2` → `requests`, `lodash@4` → `lodash`,
/// `@babel/core@7` → `@babel/core`.
fn package_name(spec: &str, npm: bool) -> String {
    if npm {
        let (scope, rest) = match spec.strip_prefix('@') {
            Some(r) => ("@", r),
            None => ("", spec),
        };
        let name = rest.split('@').next().unwrap_or(rest);
        return format!("{scope}{name}").to_lowercase();
    }
    let end = spec
        .find(['[', '=', '<', '>', '!', '~', ';', ' ', '@'])
        .unwrap_or(spec.len());
    spec[..end].to_lowercase()
}

/// Edit distance with adjacent transpositions (optimal string alignment), stopping past `max`.
pub(super) fn distance(a: &str, b: &str, max: usize) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > max {
        return max + 1;
    }
    let mut prev2: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        prev2 = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

/// Why `cmd` installs a likely typosquat (`reqeusts` is one edit from `requests`), if it does.
pub(crate) fn typosquat(cmd: &Command) -> Option<String> {
    let (list, names) = installs(cmd)?;
    // PyPI, crates.io and RubyGems do not tell `-`, `_` and `.` apart in a name (npm does).
    let same = |a: &str, b: &str| {
        a == b || (list != NPM && a.replace(['_', '.'], "-") == b.replace(['_', '.'], "-"))
    };
    names.iter().find_map(|name| {
        if list.iter().any(|p| same(p, name)) || name.len() < 4 {
            return None;
        }
        // Two edits only between long names of the same length (two letters swapped or
        // replaced): an added suffix is usually another package (`vite`, `vitest`).
        list.iter().find_map(|popular| {
            let max = if name.len() >= 8 && name.len() == popular.len() {
                2
            } else {
                1
            };
            let d = distance(name, popular, max);
            (d <= max).then(|| {
                format!(
                    "`{name}` is {} from the popular package `{popular}`",
                    if d == 1 { "one edit" } else { "two edits" }
                )
            })
        })
    })
}
