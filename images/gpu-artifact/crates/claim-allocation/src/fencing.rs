//! Leadership checked before every write, not only before a round: two replicas overlap during a
//! lease change, and an allocation written by the one that lost the lease can give a device to a
//! second claim. The term this replica won is fenced by the Lease's holder, acquire time and
//! transition count as they were when it won; every write first reads the Lease and goes ahead
//! only if that term still holds and has not expired.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{Api, Client};

/// The term a replica holds the Lease in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub holder: String,
    pub acquired: Option<Timestamp>,
    pub transitions: i32,
}

/// Why a write must not go ahead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotLeading {
    #[error("the lease has no holder")]
    NoHolder,
    #[error("the lease is held by {0}")]
    OtherHolder(String),
    #[error("the lease was acquired again since this term began")]
    NewTerm,
    #[error("the lease expired at {0}")]
    Expired(Timestamp),
    #[error("the lease cannot be read: {0}")]
    Unreadable(String),
}

/// The term `lease` shows, if `identity` holds it now.
pub fn term_of(lease: &Lease, identity: &str, now: Timestamp) -> Result<Term, NotLeading> {
    let spec = lease.spec.as_ref().ok_or(NotLeading::NoHolder)?;
    let holder = spec.holder_identity.clone().ok_or(NotLeading::NoHolder)?;
    if holder != identity {
        return Err(NotLeading::OtherHolder(holder));
    }
    let renewed = spec.renew_time.as_ref().map(|t| t.0);
    let seconds = spec.lease_duration_seconds.unwrap_or(0);
    let expiry = renewed.map(|r| r + SignedDuration::from_secs(i64::from(seconds)));
    match expiry {
        Some(expiry) if expiry > now => {}
        Some(expiry) => return Err(NotLeading::Expired(expiry)),
        None => return Err(NotLeading::Expired(Timestamp::UNIX_EPOCH)),
    }
    Ok(Term {
        holder,
        acquired: spec.acquire_time.as_ref().map(|t| t.0),
        transitions: spec.lease_transitions.unwrap_or(0),
    })
}

/// Whether a write may go ahead under `term`, given the Lease as it is now.
pub fn check(lease: &Lease, term: &Term, now: Timestamp) -> Result<(), NotLeading> {
    let current = term_of(lease, &term.holder, now)?;
    if current.acquired != term.acquired || current.transitions != term.transitions {
        return Err(NotLeading::NewTerm);
    }
    Ok(())
}

/// The fence of one replica: `None` when it runs without an election (a single replica).
pub struct Fence {
    api: Api<Lease>,
    name: String,
    identity: String,
    term: Option<Term>,
}

impl Fence {
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str) -> Fence {
        Fence {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            term: None,
        }
    }

    async fn lease(&self) -> Result<Lease, NotLeading> {
        self.api
            .get(&self.name)
            .await
            .map_err(|e| NotLeading::Unreadable(e.to_string()))
    }

    /// Records the term just won (the election said so); fails if the Lease does not show it.
    pub async fn begin_term(&mut self) -> Result<(), NotLeading> {
        self.term = None;
        let term = term_of(&self.lease().await?, &self.identity, Timestamp::now())?;
        tracing::info!(transitions = term.transitions, "leadership term begins");
        self.term = Some(term);
        Ok(())
    }

    /// Reads the Lease and fails unless the recorded term still holds.
    pub async fn before_write(&self) -> Result<(), NotLeading> {
        let term = self.term.as_ref().ok_or(NotLeading::NewTerm)?;
        check(&self.lease().await?, term, Timestamp::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn lease(holder: Option<&str>, acquired: i64, renewed: i64, transitions: i32) -> Lease {
        serde_json::from_value(
            json!({"metadata": {"name": "gpu-dra-controller", "namespace": "d8-gpu"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": transitions,
                     "acquireTime": at(acquired).to_string(), "renewTime": at(renewed).to_string()}}),
        )
        .unwrap()
    }

    #[test]
    fn a_term_holds_while_renewed_by_us() {
        let won = lease(Some("a"), 0, 0, 3);
        let term = term_of(&won, "a", at(1)).unwrap();
        assert_eq!(
            term,
            Term {
                holder: "a".into(),
                acquired: Some(at(0)),
                transitions: 3
            }
        );
        assert_eq!(
            check(&lease(Some("a"), 0, 10, 3), &term, at(20)),
            Ok(()),
            "renewed at 10, valid to 25"
        );
    }

    #[test]
    fn writes_stop_when_the_lease_moved_on() {
        let term = term_of(&lease(Some("a"), 0, 0, 3), "a", at(1)).unwrap();
        assert_eq!(
            check(&lease(Some("a"), 0, 10, 3), &term, at(25)),
            Err(NotLeading::Expired(at(25))),
            "not renewed in time"
        );
        assert_eq!(
            check(&lease(Some("b"), 20, 20, 4), &term, at(21)),
            Err(NotLeading::OtherHolder("b".into()))
        );
        assert_eq!(
            check(&lease(Some("a"), 30, 30, 5), &term, at(31)),
            Err(NotLeading::NewTerm),
            "b held it in between and a won it back: a write prepared in the old term must not land"
        );
        assert_eq!(
            check(&lease(Some("a"), 0, 30, 4), &term, at(31)),
            Err(NotLeading::NewTerm),
            "the transition count moved"
        );
        assert_eq!(check(&lease(None, 0, 30, 3), &term, at(31)), Err(NotLeading::NoHolder));
    }

    #[test]
    fn a_term_is_not_begun_from_someone_elses_or_an_expired_lease() {
        assert_eq!(
            term_of(&lease(Some("b"), 0, 0, 1), "a", at(1)),
            Err(NotLeading::OtherHolder("b".into()))
        );
        assert_eq!(
            term_of(&lease(Some("a"), 0, 0, 1), "a", at(15)),
            Err(NotLeading::Expired(at(15)))
        );
    }
}
