//! The injection's pieces on their own: where a value goes, where a placeholder is found.

use super::*;
use crate::floor::spec::CredentialSpec;

const REAL: &str = "glpat-RealValue0123456789abcd";

fn creds(query: &[&str]) -> Credentials {
    let spec = CredentialSpec {
        query: Some(query.iter().map(|q| (*q).to_owned()).collect()),
        ..CredentialSpec::new("GITLAB_TOKEN", vec!["gitlab.example".into()])
    };
    let env = |_: &str| Some(REAL.to_owned());
    let root = std::path::Path::new("/");
    Credentials::resolve(&[spec], &env, (root, root)).0
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn the_value_goes_in_its_headers_and_basic_auth_and_nowhere_else() {
    let creds = creds(&[]);
    let c = creds.iter().next().unwrap();
    let p = &c.placeholder;
    let mut headers = hyper::HeaderMap::new();
    headers.insert("private-token", HeaderValue::from_str(p).unwrap());
    let basic = format!("Basic {}", b64(&format!("oauth2:{p}")));
    headers.insert("authorization", HeaderValue::from_str(&basic).unwrap());
    headers.insert("x-note", HeaderValue::from_str(p).unwrap());
    assert!(put_in_headers(c, &mut headers));
    assert_eq!(headers["private-token"], REAL);
    let expected = format!("Basic {}", b64(&format!("oauth2:{REAL}")));
    assert_eq!(headers["authorization"], expected.as_str());
    assert!(headers["authorization"].is_sensitive());
    // A header it may not appear in keeps the placeholder.
    assert_eq!(headers["x-note"], p.as_str());
    // Nothing to put: nothing changes.
    let mut none = hyper::HeaderMap::new();
    none.insert("authorization", HeaderValue::from_static("Bearer other"));
    assert!(!put_in_headers(c, &mut none));
}

#[test]
fn the_value_goes_in_a_declared_query_parameter_only() {
    let creds = creds(&["private_token"]);
    let c = creds.iter().next().unwrap();
    let p = &c.placeholder;
    let mut uri: hyper::Uri = format!("/api/v4/projects?private_token={p}&note={p}&page=2")
        .parse()
        .unwrap();
    assert!(put_in_query(c, &mut uri));
    assert_eq!(
        uri.to_string(),
        format!("/api/v4/projects?private_token={REAL}&note={p}&page=2")
    );
    let mut undeclared: hyper::Uri = format!("/x?token={p}").parse().unwrap();
    assert!(!put_in_query(c, &mut undeclared));
}

#[test]
fn another_hosts_placeholder_is_found_in_the_url_a_header_or_basic_auth() {
    let creds = creds(&[]);
    let c = creds.iter().next().unwrap();
    let elsewhere = Target::parse("other.example").unwrap();
    let bound = Target::parse("gitlab.example").unwrap();
    let request = |uri: &str, header: Option<String>| {
        let mut b = Request::builder().uri(uri);
        if let Some(h) = header {
            b = b.header("authorization", h);
        }
        b.body(()).unwrap().into_parts().0
    };
    let basic = format!("Basic {}", b64(&format!("u:{}", c.placeholder)));
    let cases = [
        request(&format!("/?t={}", c.placeholder), None),
        request("/", Some(format!("token {}", c.placeholder))),
        request("/", Some(basic)),
    ];
    for parts in &cases {
        assert!(
            foreign(&creds, parts, None, &elsewhere).is_some(),
            "{parts:?}"
        );
        assert!(foreign(&creds, parts, None, &bound).is_none(), "{parts:?}");
    }
    let body = format!("{{\"token\": \"{}\"}}", c.placeholder);
    let plain = request("/", None);
    let found = foreign(&creds, &plain, Some(body.as_bytes()), &elsewhere);
    assert_eq!(found.map(|(_, w)| w), Some("the body".to_owned()));
    assert!(foreign(&creds, &plain, None, &elsewhere).is_none());
}

#[test]
fn an_audited_command_line_never_shows_a_value() {
    let creds = creds(&[]);
    let injection = Injection {
        credentials: creds,
        ca: RunCa::new().unwrap(),
        counts: Mutex::default(),
        untrusted: Mutex::default(),
        secrets: Default::default(),
    };
    let argv = vec!["curl".to_owned(), format!("-HPrivate-Token: {REAL}")];
    assert_eq!(
        redact(&argv, &injection),
        ["curl", "-HPrivate-Token: <GITLAB_TOKEN>"]
    );
}
