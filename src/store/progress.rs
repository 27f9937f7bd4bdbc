//! The chain's walk kept per cached task, extended over new records only, and what this
//! machine vouches for (attestations, the anchored head).

use super::*;

/// What the chain vouches for in the cached records, for the views. The walk kept in the
/// cache is extended over the records read since it was taken; the cached records are
/// never read again, so this is what walking them all would find.
pub(super) fn trust_of(task: &TaskName, cache: &mut TaskCache) -> Trust {
    let progress = std::mem::take(&mut cache.chain);
    cache.chain = extended(task, cache, progress, chain::Depth::Links);
    let mut trust = Trust::of_progress(&cache.records, &cache.chain);
    if let Some(state) = trust.state.as_mut() {
        state.strays = cache.strays.clone();
    }
    trust
}

/// What the chain vouches for in the cached records, for the writer: the walk at
/// [`chain::Depth::Rules`] kept in the cache, extended over the records read since.
pub(super) fn writer_trust(task: &TaskName, cache: &mut TaskCache) -> Trust {
    let progress = std::mem::take(&mut cache.rules);
    cache.rules = extended(task, cache, progress, chain::Depth::Rules);
    Trust::of_progress(&cache.records, &cache.rules)
}

/// `progress` extended over the cached records it has not walked, at `depth` (free when
/// it has walked them all).
pub(super) fn extended(
    task: &TaskName,
    cache: &TaskCache,
    progress: chain::Progress,
    depth: chain::Depth,
) -> chain::Progress {
    let newest = cache
        .records
        .last()
        .map(|r| r.envelope.sequence)
        .zip(cache.digests.last().map(String::as_str));
    let walked = progress.head().map(|h| (h.sequence, h.hash.as_str()));
    if progress.walked() == cache.records.len() && walked == newest {
        return progress;
    }
    chain::extend_records(task, &cache.records, &cache.digests, progress, depth)
}

/// The digest of the cached record of `sequence`, if it is cached.
pub(super) fn digest_at(cache: &TaskCache, sequence: u64) -> Option<&str> {
    let at = cache
        .records
        .binary_search_by_key(&sequence, |r| r.envelope.sequence)
        .ok()?;
    cache.digests.get(at).map(String::as_str)
}

impl Store {
    /// What the chain vouches for in `task` (the walk kept in `cache`, extended), judged
    /// by this machine when the process installed its data directory: each new
    /// consultation's attestation checked against its key, and the task's anchored head.
    pub(super) fn judged(&self, task: &TaskName, cache: &mut TaskCache) -> Trust {
        let trust = trust_of(task, cache);
        self.vouched(task, cache, trust)
    }

    /// `trust` with what the attestations and this machine vouch for in `task`.
    pub(super) fn vouched(&self, task: &TaskName, cache: &mut TaskCache, trust: Trust) -> Trust {
        let Some(machine) = crate::machine::installed() else {
            return trust;
        };
        // Another machine's consultations count only while its runtime is pinned: a change
        // of the pins (a `stat` of the file) judges the task again.
        let pins = machine.pins();
        let fingerprint = pins.fingerprint();
        if cache.attestations.judged() > cache.records.len()
            || cache.attestations.pins() != fingerprint
        {
            cache.attestations = Arc::new(chain::Attestations::under_pins(fingerprint));
        }
        let from = cache.attestations.judged();
        if from < cache.records.len() {
            let key = machine.key();
            // Shared with the trusts handed out before: copied only when new records came.
            let attestations = Arc::make_mut(&mut cache.attestations);
            crate::machine::attest::judge(&cache.records[from..], &key, &pins, attestations);
            attestations.set_judged(cache.records.len());
        }
        let anchored = machine.anchors(&self.state_dir).head(task);
        let highest = cache.records.last().map(|r| r.envelope.sequence);
        let foreign = chain::foreign(task, anchored.as_ref(), highest, |s| digest_at(cache, s));
        trust
            .with_attestations(cache.attestations.clone())
            .with_foreign(foreign)
    }
}
