//! The run's certificate authority, made when a credential is declared: the egress proxy
//! presents a certificate it signs for each host whose credential it injects, and the
//! agent's tree trusts it through the CA bundle its variables name ([`RunCa::trust`]).
//!
//! Its private key is made at start and never leaves the wrapper's memory: it is written
//! nowhere, so no process of the tree can read it, and it dies with the run. Only the
//! certificate is written, into the run directory, for the tree to read.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// Where this machine's roots usually are, as OpenSSL's builds look for them: the first that
/// exists is the base of the tree's bundle when no variable names one.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The variables that name a CA bundle, each ecosystem's: OpenSSL and what links it (Python's
/// `ssl`, Ruby, PHP), Go and rustls-native-certs (`SSL_CERT_FILE`); curl; git; Python's
/// requests, pip and httplib2; AWS's tools; Cargo; Deno; Nix; gRPC; the Google Cloud CLI;
/// Node (`NODE_EXTRA_CA_CERTS`, which adds to Node's own roots; it is given the run's CA
/// alone).
const BUNDLE_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "HTTPLIB2_CA_CERTS",
    "AWS_CA_BUNDLE",
    "CARGO_HTTP_CAINFO",
    "DENO_CERT",
    "NIX_SSL_CERT_FILE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
];

/// A certificate authority for one run.
pub(crate) struct RunCa {
    cert: rcgen::Certificate,
    key: KeyPair,
    /// The TLS server side for each host, made once.
    servers: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    /// The TLS client side to the real hosts, verified against this machine's roots.
    client: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl RunCa {
    /// A new authority, its key in memory only.
    pub(crate) fn new() -> Result<RunCa, String> {
        let key = KeyPair::generate().map_err(|e| format!("the run's CA key: {e}"))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| format!("the run's CA: {e}"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(
            DnType::CommonName,
            format!("ahp-wrap run CA {}", crate::random_hex(4)),
        );
        params
            .distinguished_name
            .push(DnType::OrganizationName, "ahp-wrap");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("the run's CA: {e}"))?;
        Ok(RunCa {
            cert,
            key,
            servers: Mutex::default(),
            client: OnceLock::new(),
        })
    }

    /// The authority's certificate, PEM.
    pub(crate) fn pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes the CA's certificate and the tree's bundle (the roots the tree trusted, plus
    /// the run's CA) into `run_dir`; returns the variables that make the tree trust them.
    /// The roots the tree trusted: the files its bundle variables named (it inherits them),
    /// else this machine's bundle.
    pub(crate) fn trust(&self, run_dir: &Path) -> std::io::Result<Vec<(OsString, OsString)>> {
        let pem = self.pem();
        let mut bundle = String::new();
        let mut bases: Vec<PathBuf> = BUNDLE_VARS
            .iter()
            .filter_map(std::env::var_os)
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .collect();
        if bases.is_empty() {
            bases.extend(
                SYSTEM_BUNDLES
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| p.is_file()),
            );
        }
        bases.dedup();
        for base in &bases {
            if let Ok(text) = std::fs::read_to_string(base) {
                bundle.push_str(text.trim_end());
                bundle.push('\n');
            }
        }
        bundle.push_str(&pem);
        let ca_file = run_dir.join("run-ca.pem");
        let bundle_file = run_dir.join("ca-bundle.pem");
        std::fs::write(&ca_file, &pem)?;
        std::fs::write(&bundle_file, bundle)?;
        let mut node = pem;
        if let Some(extra) = std::env::var_os("NODE_EXTRA_CA_CERTS") {
            if let Ok(text) = std::fs::read_to_string(extra) {
                node = format!("{}\n{node}", text.trim_end());
                std::fs::write(&ca_file, &node)?;
            }
        }
        let mut env: Vec<(OsString, OsString)> = BUNDLE_VARS
            .iter()
            .map(|v| ((*v).into(), bundle_file.clone().into_os_string()))
            .collect();
        env.push(("NODE_EXTRA_CA_CERTS".into(), ca_file.into_os_string()));
        Ok(env)
    }

    /// The TLS server side presenting a certificate for `host` (a name or an address), made
    /// the first time it is asked for.
    pub(crate) fn server(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        if let Some(made) = self.servers.lock().ok().and_then(|s| s.get(host).cloned()) {
            return Ok(made);
        }
        let key = KeyPair::generate().map_err(|e| format!("a key for {host}: {e}"))?;
        let mut params = CertificateParams::new(vec![host.to_owned()])
            .map_err(|e| format!("a certificate for {host}: {e}"))?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(|e| format!("a certificate for {host}: {e}"))?;
        let chain = vec![cert.der().clone(), self.cert.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("a certificate for {host}: {e}"))?;
        // HTTP/1.1 only: each request is read, rewritten and forwarded on its own.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        if let Ok(mut servers) = self.servers.lock() {
            servers.insert(host.to_owned(), config.clone());
        }
        Ok(config)
    }

    /// The TLS client side to the real hosts: this machine's roots (`SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` of the wrapper's environment name others), read the first time.
    pub(crate) fn client(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.client.get_or_init(client_config).clone()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(format!(
            "no root certificates on this machine ({})",
            why.join("; ")
        ));
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
