//! The seal on a runner's result: an HMAC-SHA256 of what it says, keyed with the run's seed.
//!
//! The grader gives a runner its seed on stdin, read once before any learner code runs, never on
//! the command line or in the environment, and draws a fresh one for every run (from 2^47 values,
//! so the seed cannot be recovered from the inputs a check derives from it in the time a check
//! may take). A record written by anything but the check runner's own code, such as learner code
//! that writes a "pass" and exits, carries no valid seal, and the judge, which is given the same
//! seed, refuses it. The seed also decides every secret a check needs: a timed workload's
//! duration, say ([`crate::random::secret_duration`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::outcome::Outcome;
use crate::transcript::Entry;

/// The seal of check `id`'s result (`outcome`, `transcript`) in a run with `seed`.
pub fn seal(seed: u64, id: &str, outcome: Option<&Outcome>, transcript: &[Entry]) -> String {
    keyed(seed, id, outcome, transcript).finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `seal` is the seal of that result.
pub fn verify(seal: &str, seed: u64, id: &str, outcome: Option<&Outcome>, transcript: &[Entry]) -> bool {
    let bytes: Option<Vec<u8>> =
        (0..seal.len()).step_by(2).map(|i| seal.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    bytes.is_some_and(|bytes| keyed(seed, id, outcome, transcript).verify_slice(&bytes).is_ok())
}

/// The HMAC over a result, before it is finalised.
fn keyed(seed: u64, id: &str, outcome: Option<&Outcome>, transcript: &[Entry]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&seed.to_le_bytes()).expect("HMAC takes keys of any length");
    mac.update(id.as_bytes());
    mac.update(&[0]);
    mac.update(serde_json::to_string(&(outcome, transcript)).expect("a record serialises").as_bytes());
    mac
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Status;
    use crate::transcript::Recorded;

    #[test]
    fn a_seal_holds_for_its_seed_and_result_only() {
        let pass = Outcome { status: Status::Pass, message: "fine".into(), location: None };
        let answers = vec![Entry { label: "answer".into(), value: Recorded::Text("21".into()) }];
        let sealed = seal(7, "check", Some(&pass), &answers);
        assert!(verify(&sealed, 7, "check", Some(&pass), &answers));
        assert!(!verify(&sealed, 8, "check", Some(&pass), &answers), "another seed");
        assert!(!verify(&sealed, 7, "other", Some(&pass), &answers), "another check");
        let changed = vec![Entry { label: "answer".into(), value: Recorded::Text("22".into()) }];
        assert!(!verify(&sealed, 7, "check", Some(&pass), &changed), "another answer");
        assert!(!verify("not hex", 7, "check", Some(&pass), &answers));
    }
}
