//! A throw-away PKI for TLS tests: a CA, a server certificate for 127.0.0.1 and a client
//! certificate, written as PEM files into a temporary directory.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed nothing here: trusting only it must fail.
    pub other_ca: PathBuf,
}

fn ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let pem = params.self_signed(&key).unwrap().pem();
    (params, key, pem)
}

impl Pki {
    pub fn new() -> Pki {
        patroni_raft_exporter::tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let (ca_params, ca_key, ca_pem) = ca("test CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |name: &str, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
            params
                .subject_alt_names
                .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
            params.distinguished_name.push(DnType::CommonName, name);
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (server_pem, server_key) = leaf("server", ExtendedKeyUsagePurpose::ServerAuth);
        let (client_pem, client_key) = leaf("exporter", ExtendedKeyUsagePurpose::ClientAuth);
        let (_, _, other_pem) = ca("other CA");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        Pki {
            ca: write("ca.pem", &ca_pem),
            server_cert: write("server.pem", &server_pem),
            server_key: write("server-key.pem", &server_key),
            client_cert: write("client.pem", &client_pem),
            client_key: write("client-key.pem", &client_key),
            other_ca: write("other-ca.pem", &other_pem),
            dir,
        }
    }

    /// A server config with the server certificate; `require_client` demands a client
    /// certificate signed by the CA (Patroni's `verify_client: required`).
    pub fn server_config(&self, require_client: bool) -> Arc<rustls::ServerConfig> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.server_cert)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&self.server_key).unwrap();
        let builder = rustls::ServerConfig::builder();
        let builder = if require_client {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(&self.ca).unwrap() {
                roots.add(cert.unwrap()).unwrap();
            }
            builder.with_client_cert_verifier(
                rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
                    .build()
                    .unwrap(),
            )
        } else {
            builder.with_no_client_auth()
        };
        Arc::new(builder.with_single_cert(certs, key).unwrap())
    }
}
