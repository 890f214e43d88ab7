//! The module's TLS material, made with rcgen: a root CA and the serving certificate of the
//! kube-rbac-proxy sidecars, signed by it. Also the checks that decide whether what a previous run made
//! can be kept: it parses, it was issued by the current CA, it names the same hosts, and it does not
//! expire soon.

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

pub const CA_VALIDITY: Duration = Duration::days(3650);
pub const CA_RENEW_BEFORE: Duration = Duration::days(180);
pub const LEAF_VALIDITY: Duration = Duration::days(365);
pub const LEAF_RENEW_BEFORE: Duration = Duration::days(30);

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone, PartialEq)]
pub struct PemPair {
    pub crt: String,
    pub key: String,
}

pub fn new_root_ca(common_name: &str, now: OffsetDateTime) -> anyhow::Result<PemPair> {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + CA_VALIDITY;
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(PemPair {
        crt: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A server certificate for `hosts` (DNS names or IP addresses), signed by `ca`.
pub fn new_serving_certificate(
    ca: &PemPair,
    common_name: &str,
    hosts: &[String],
    now: OffsetDateTime,
) -> anyhow::Result<PemPair> {
    let ca_key = KeyPair::from_pem(&ca.key).context("the CA key is not a PEM private key")?;
    let issuer = Issuer::from_ca_cert_pem(&ca.crt, ca_key).context("the CA certificate does not parse")?;
    let mut params = CertificateParams::new(hosts.to_vec())?;
    params.distinguished_name = name(common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + LEAF_VALIDITY;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(PemPair {
        crt: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// What a certificate says about itself, as far as keeping it is concerned.
#[derive(Debug, Clone, PartialEq)]
pub struct CertificateFacts {
    pub not_after: OffsetDateTime,
    pub subject: String,
    pub issuer: String,
    /// DNS names and IP addresses, sorted.
    pub hosts: Vec<String>,
}

pub fn facts(crt_pem: &str) -> anyhow::Result<CertificateFacts> {
    let (_, pem) = parse_x509_pem(crt_pem.as_bytes()).map_err(|e| anyhow::anyhow!("not a PEM certificate: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| anyhow::anyhow!("not an X.509 certificate: {e}"))?;
    let mut hosts: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(dns) => Some(dns.to_string()),
                    GeneralName::IPAddress(ip) => ip_string(ip),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    hosts.sort();
    Ok(CertificateFacts {
        not_after: cert.validity().not_after.to_datetime(),
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        hosts,
    })
}

fn ip_string(bytes: &[u8]) -> Option<String> {
    match bytes.len() {
        4 => Some(std::net::Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?).to_string()),
        16 => Some(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?).to_string()),
        _ => None,
    }
}

/// Whether `pair` is a usable CA: it parses, its key matches and it is valid for longer than the
/// renewal window.
pub fn ca_is_current(pair: &PemPair, now: OffsetDateTime) -> bool {
    let Ok(facts) = facts(&pair.crt) else { return false };
    let key_matches = KeyPair::from_pem(&pair.key)
        .ok()
        .and_then(|key| Issuer::from_ca_cert_pem(&pair.crt, key).ok())
        .is_some();
    key_matches && facts.not_after - now > CA_RENEW_BEFORE
}

/// Whether `leaf` can be kept under `ca` for `hosts`.
pub fn leaf_is_current(leaf: &PemPair, ca: &PemPair, hosts: &[String], now: OffsetDateTime) -> bool {
    let (Ok(leaf_facts), Ok(ca_facts)) = (facts(&leaf.crt), facts(&ca.crt)) else {
        return false;
    };
    let mut wanted = hosts.to_vec();
    wanted.sort();
    leaf_facts.issuer == ca_facts.subject
        && leaf_facts.hosts == wanted
        && leaf_facts.not_after - now > LEAF_RENEW_BEFORE
        && KeyPair::from_pem(&leaf.key).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|h| h.to_string()).collect()
    }

    #[test]
    fn a_fresh_leaf_is_kept_and_names_its_hosts() {
        let now = OffsetDateTime::now_utc();
        let ca = new_root_ca("gpu-root-ca", now).unwrap();
        let wanted = hosts(&["gpu-controller-metrics.d8-gpu.svc", "127.0.0.1"]);
        let leaf = new_serving_certificate(&ca, "gpu-metrics", &wanted, now).unwrap();
        assert!(ca_is_current(&ca, now));
        assert!(leaf_is_current(&leaf, &ca, &wanted, now));
        assert_eq!(
            facts(&leaf.crt).unwrap().hosts,
            ["127.0.0.1", "gpu-controller-metrics.d8-gpu.svc"]
        );
    }

    #[test]
    fn a_leaf_is_renewed_when_names_change_the_ca_changes_or_expiry_nears() {
        let now = OffsetDateTime::now_utc();
        let ca = new_root_ca("gpu-root-ca", now).unwrap();
        let other_ca = new_root_ca("gpu-root-ca-2", now).unwrap();
        let wanted = hosts(&["a.d8-gpu.svc"]);
        let leaf = new_serving_certificate(&ca, "gpu-metrics", &wanted, now).unwrap();
        assert!(!leaf_is_current(&leaf, &ca, &hosts(&["b.d8-gpu.svc"]), now));
        assert!(!leaf_is_current(&leaf, &other_ca, &wanted, now));
        assert!(!leaf_is_current(
            &leaf,
            &ca,
            &wanted,
            now + LEAF_VALIDITY - Duration::days(10)
        ));
        assert!(!ca_is_current(&ca, now + CA_VALIDITY - Duration::days(10)));
    }

    #[test]
    fn a_ca_whose_key_does_not_parse_is_not_current() {
        let now = OffsetDateTime::now_utc();
        let mut ca = new_root_ca("gpu-root-ca", now).unwrap();
        ca.key = "garbage".into();
        assert!(!ca_is_current(&ca, now));
    }
}
