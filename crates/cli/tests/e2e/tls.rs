//! HTTPS with a certificate from the config: a client that trusts it writes and gets its answer,
//! plain HTTP to the same port gets nothing, and the row lands.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::{self, id_counts};
use sluice_lab::process::ServerProcess;

/// A self-signed certificate for 127.0.0.1, made by the openssl command.
pub(crate) fn certificate(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
        ])
        .args([
            "/CN=sluice-test",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    (cert, key)
}

fn curl(args: &[&str]) -> std::process::Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn https_with_the_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let config = dir.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "[flush]\nmax_age = \"50ms\"\n\n[tls]\ncert = {:?}\nkey = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut server = ServerProcess::spawn(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &data,
        Some(&config),
    )
    .unwrap();
    let https = format!("https://{}/v1/tables/secure/rows", server.addr);

    let out = curl(&[
        "--cacert",
        cert.to_str().unwrap(),
        "--data-binary",
        "{\"id\":7}",
        &https,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains("\"rows\":1"), "{body}");

    // A client that does not trust the certificate is stopped by the handshake.
    let untrusted = curl(&["--data-binary", "{\"id\":8}", &https]);
    assert!(!untrusted.status.success());
    // Plain HTTP to the TLS port gets no HTTP answer.
    let plain = curl(&[
        "--data-binary",
        "{\"id\":9}",
        &format!("http://{}/v1/tables/secure/rows", server.addr),
    ]);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("\"rows\""));

    server.terminate().unwrap();
    assert!(server.wait(Duration::from_secs(30)).unwrap().success());
    let ids: Vec<i64> = id_counts(&data, "secure").into_keys().collect();
    assert_eq!(ids, [7]);
}

#[test]
fn a_missing_certificate_stops_the_start_with_its_path() {
    let (started, stderr) =
        common::serve_with("[tls]\ncert = \"/nowhere/cert.pem\"\nkey = \"/nowhere/key.pem\"\n");
    assert!(!started);
    assert!(
        stderr.contains("tls: cannot read the certificate /nowhere/cert.pem"),
        "{stderr}"
    );
}
