//! The one write path: a record admitted through the writer under the task's lock,
//! stored durably, fed to the indexes.

use super::*;

/// What the daemon's job says of a consultation it writes ([`Store::write_consultation`]).
pub struct Provenance<'a> {
    /// The job that produced it.
    pub job: &'a str,
    /// What produced the answer (`vendor/model`, or what a mesh peer named), if known.
    pub source: Option<&'a str>,
    /// Whether the transport vouched for who answered: `false` records the answer but it
    /// never counts as a review.
    pub counts: bool,
    /// The request's own credential values, removed by value from every string.
    pub secrets: &'a [String],
}

/// The longest `source` a consultation keeps, in characters.
pub(super) const MAX_SOURCE_CHARS: usize = 200;

impl Store {
    /// Admit `input` through the writer under the task's lock and store it durably: when
    /// this returns, the record survives a crash of the machine.
    pub fn write(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
    ) -> Result<Record, StoreError> {
        self.write_scrubbing(task, input, plan_env, &[])
    }

    /// [`Store::write`], the writer also removing each of `secrets` (the request's own
    /// credential values) by value from every string of the record.
    pub fn write_scrubbing(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        secrets: &[String],
    ) -> Result<Record, StoreError> {
        self.write_as(task, input, plan_env, secrets, None, true, &[])
    }

    /// [`Store::write`] judged against the global and project invariants in force
    /// (`invariants`, resolved from their files by the caller); the task's own come from
    /// its records.
    pub fn write_under(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        invariants: &[crate::core::invariants::InForce],
    ) -> Result<Record, StoreError> {
        self.write_as(task, input, None, &[], None, true, invariants)
    }

    /// [`Store::write`] for a daemon's job: the record's bytes are durable when this
    /// returns, its name at the next flush of the file system ([`Store::settle`], or the
    /// next record's write, whoever makes it). A job can take that: if the machine
    /// crashes first, the record is absent as a whole and the resumed job writes it
    /// again, and nothing later can be durable without it (a later record's flush covers
    /// this one's name). See `docs/DAEMON.md`, "What is flushed when".
    pub fn write_in_job(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
    ) -> Result<Record, StoreError> {
        self.write_as(task, input, plan_env, &[], None, false, &[])
    }

    /// Make every record this store renamed into place durable, if one may not be yet.
    pub fn settle(&self) -> Result<(), StoreError> {
        if self
            .unsettled
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            self.flusher().flush().map_err(io_error(format!(
                "cannot flush the state directory `{}`",
                self.state_dir.display()
            )))?;
        }
        Ok(())
    }

    /// Store a consultation a daemon's job drafted (`input`, without `source`), attested
    /// with this machine's key (created the first time) as written by `provenance.job`.
    ///
    /// The one way a consultation that can count as a review is written: the runner calls
    /// it for each outcome (its own advisors', a relayed mesh answer, an answered inbox
    /// review). No surface reaches it; the `record` verb refuses consultations. Public for
    /// the tests and fixtures that stand in for a job; the process must have installed its
    /// data directory ([`crate::machine::install`]).
    pub fn write_consultation(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        provenance: &Provenance,
    ) -> Result<Record, StoreError> {
        let (input, key) = self.consultation_input(input, provenance)?;
        self.write_as(
            task,
            &input,
            None,
            provenance.secrets,
            Some((&key, provenance)),
            false,
            &[],
        )
    }

    /// Several consultations a daemon's job drafted, ready at the same moment, stored
    /// as [`Store::write_consultation`] stores each, in the order given, with **one**
    /// flush for all of them: under the task's lock each is judged (against the ones
    /// before it) and written to its temporary file, then the file system is flushed
    /// once, then each is renamed into place in order. So the guarantees are each
    /// record's (never torn, never durable without the records before it), and two
    /// outcomes that arrive together cost one flush, not two in turn.
    ///
    /// One result per item: a refusal is that item's alone (the others are judged and
    /// written without it); a failure to write or flush fails every item not yet in
    /// place, and the task is read again from its files by the next use.
    pub fn write_consultations(
        &self,
        task: &TaskName,
        items: &[(serde_json::Value, Provenance)],
    ) -> Vec<Result<Record, StoreError>> {
        let one_by_one = items.len() < 2
            || !self.task_dir(task).exists()
            || crate::journal::seam::state(&self.state_dir).is_some();
        if one_by_one {
            // A shared task publishes each record to its journal first, and a new task
            // is created by its first record: those take the one-record path.
            return items
                .iter()
                .map(|(input, provenance)| self.write_consultation(task, input, provenance))
                .collect();
        }
        let mut results: Vec<Option<Result<Record, StoreError>>> =
            items.iter().map(|_| None).collect();
        let mut drafted = Vec::new();
        for (at, (input, provenance)) in items.iter().enumerate() {
            match self.consultation_input(input, provenance) {
                Ok((input, key)) => drafted.push((at, input, key, provenance)),
                Err(e) => results[at] = Some(Err(e)),
            }
        }
        match self.write_batch(task, &drafted, &mut results) {
            Ok(()) => {}
            Err(failure) => {
                for result in results.iter_mut() {
                    if result.as_ref().is_none_or(|r| r.is_ok()) {
                        *result = Some(Err(StoreError::Io {
                            context: failure.0.clone(),
                            source: io::Error::new(failure.1, failure.2.clone()),
                        }));
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(StoreError::Io {
                        context: "a consultation of the batch was not written".into(),
                        source: io::Error::other("not written"),
                    })
                })
            })
            .collect()
    }

    /// The batch of [`Store::write_consultations`] under the task's lock: each result
    /// set in `results` as judged and written; `Err` (what failed, as text) when the
    /// batch could not be put in place, after which nothing of it counts as written.
    #[allow(clippy::type_complexity)]
    fn write_batch(
        &self,
        task: &TaskName,
        drafted: &[(
            usize,
            serde_json::Value,
            Arc<crate::machine::attest::Key>,
            &Provenance,
        )],
        results: &mut [Option<Result<Record, StoreError>>],
    ) -> Result<(), Trouble> {
        let dir = self.task_dir(task);
        let _held = self.lock_task(&dir).map_err(store_failed)?;
        let slot = self.cache(task);
        let mut cache = lock(&slot);
        let stale = self.refresh(task, &mut cache).map_err(store_failed)?;
        for name in stale {
            let _ = fs::remove_file(dir.join(name));
        }
        let anchors = self.vouching_anchors(task, &cache);
        let mut staged = Vec::new();
        let trouble =
            self.stage_consultations(task, &dir, &mut cache, drafted, results, &mut staged);
        let placed = self.place(task, &mut cache, staged, trouble, anchors.as_deref());
        let placed = match placed {
            Ok(placed) => placed,
            Err(failure) => {
                drop(cache);
                return Err(failure);
            }
        };
        for (at, record) in placed {
            results[at] = Some(Ok(record));
        }
        self.feed(task, &cache.records);
        self.feed_track(task, &mut cache);
        let cached = cache.bytes;
        drop(cache);
        self.used(task, &slot, cached);
        Ok(())
    }

    /// A daemon's job's plan (`input`, judged with `plan_env` as [`Store::write_in_job`]
    /// judges it), and with it, in **one** flush, the consultations `then` drafts once it
    /// has the plan (its exchanges run while `then` waits; see `docs/DAEMON.md`, "What a
    /// round trip costs"). Under the task's lock the plan is judged and written to its
    /// temporary file, `then` is called with it (the lock held: it must come back
    /// within a few milliseconds), each consultation it gives is judged after the one
    /// before and written to its temporary file, then one flush, then each is renamed
    /// into place in order (the plan first). `then` giving `None` places the plan alone
    /// (its own flush). The guarantees are each record's: none torn, none durable
    /// without every record before it.
    ///
    /// A task not yet created, or a shared one (docs/JOURNAL.md), takes the one-record
    /// path: the plan is written by [`Store::write_in_job`] and `then` is never called.
    pub fn write_plan_with(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: &PlanEnv,
        then: impl FnOnce(&Record) -> Option<Vec<Drafted>>,
    ) -> Result<PlanWritten, StoreError> {
        let dir = self.task_dir(task);
        if !dir.exists() || crate::journal::seam::state(&self.state_dir).is_some() {
            let plan = self.write_in_job(task, input, Some(plan_env))?;
            return Ok(PlanWritten {
                plan,
                consultations: None,
            });
        }
        let _held = self.lock_task(&dir)?;
        let slot = self.cache(task);
        let mut cache = lock(&slot);
        let stale = self.refresh(task, &mut cache)?;
        for name in stale {
            let _ = fs::remove_file(dir.join(name));
        }
        let anchors = self.vouching_anchors(task, &cache);
        let sequence = cache.highest + 1;
        let plan = self.judge_next(task, &mut cache, input, Some(plan_env), &[], &[], false)?;
        let plan_staged = self
            .stage(task, &dir, &mut cache, plan, sequence)
            .map_err(trouble_error)?;
        let plan = plan_staged.record.clone();
        let mut staged = vec![(usize::MAX, plan_staged)];
        let drafts = then(&plan);
        let mut results: Vec<Option<Result<Record, StoreError>>> = Vec::new();
        let mut trouble = None;
        if let Some(drafts) = &drafts {
            results = drafts.iter().map(|_| None).collect();
            let secrets: Vec<String> = Vec::new();
            let provenances: Vec<Provenance> = drafts
                .iter()
                .map(|d| Provenance {
                    job: &d.job,
                    source: d.source.as_deref(),
                    counts: d.counts,
                    secrets: d.secrets.as_deref().unwrap_or(&secrets),
                })
                .collect();
            let mut drafted = Vec::new();
            for (at, (d, provenance)) in drafts.iter().zip(&provenances).enumerate() {
                match self.consultation_input(&d.input, provenance) {
                    Ok((input, key)) => drafted.push((at, input, key, provenance)),
                    Err(e) => results[at] = Some(Err(e)),
                }
            }
            trouble = self.stage_consultations(
                task,
                &dir,
                &mut cache,
                &drafted,
                &mut results,
                &mut staged,
            );
        }
        let placed = self
            .place(task, &mut cache, staged, trouble, anchors.as_deref())
            .map_err(trouble_error)?;
        let mut plan = None;
        for (at, record) in placed {
            match results.get_mut(at) {
                Some(result) => *result = Some(Ok(record)),
                None => plan = Some(record),
            }
        }
        self.feed(task, &cache.records);
        self.feed_track(task, &mut cache);
        let cached = cache.bytes;
        drop(cache);
        self.used(task, &slot, cached);
        let plan = plan.ok_or_else(|| trouble_error(not_written()))?;
        Ok(PlanWritten {
            plan,
            consultations: drafts.map(|_| {
                results
                    .into_iter()
                    .map(|r| r.unwrap_or_else(|| Err(trouble_error(not_written()))))
                    .collect()
            }),
        })
    }

    /// Judge, attest and stage (temporary file, cache) each of `drafted` after the one
    /// before, onto `staged`; a refusal is that item's result. What stopped the batch,
    /// if anything did.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn stage_consultations(
        &self,
        task: &TaskName,
        dir: &Path,
        cache: &mut TaskCache,
        drafted: &[(
            usize,
            serde_json::Value,
            Arc<crate::machine::attest::Key>,
            &Provenance,
        )],
        results: &mut [Option<Result<Record, StoreError>>],
        staged: &mut Vec<(usize, Staged)>,
    ) -> Option<Trouble> {
        let runtime = crate::machine::installed().and_then(|m| m.runtime());
        for (at, input, key, provenance) in drafted {
            let sequence = cache.highest + 1;
            let judged = self.judge_next(task, cache, input, None, provenance.secrets, &[], true);
            let mut record = match judged {
                Ok(record) => record,
                Err(e) => {
                    results[*at] = Some(Err(e));
                    continue;
                }
            };
            key.attest_signed(
                &mut record,
                provenance.job,
                provenance.counts,
                runtime.as_ref(),
            );
            match self.stage(task, dir, cache, record, sequence) {
                Ok(one) => staged.push((*at, one)),
                Err(trouble) => return Some(trouble),
            }
        }
        None
    }

    /// Write `record` (judged as number `sequence`) to its temporary file in `dir` and
    /// put it in the cache, so the next one is judged after it.
    fn stage(
        &self,
        task: &TaskName,
        dir: &Path,
        cache: &mut TaskCache,
        record: Record,
        sequence: u64,
    ) -> Result<Staged, Trouble> {
        let failed = |context: String| move |e: io::Error| (context, e.kind(), e.to_string());
        if sequence > chain::MAX_SEQUENCE {
            return Err((
                format!(
                    "task `{task}` holds record {}, the highest a record file's name can \
                     hold; record into another task",
                    chain::MAX_SEQUENCE
                ),
                io::ErrorKind::StorageFull,
                "full".to_string(),
            ));
        }
        let name = file_name(&record);
        let mut bytes = serde_json::to_vec_pretty(&record).map_err(|e| {
            (
                format!("cannot serialise record `{}`", record.id()),
                io::ErrorKind::Other,
                e.to_string(),
            )
        })?;
        bytes.push(b'\n');
        let temp = files::written(dir, &name, &self.spares(), &bytes).map_err(failed(format!(
            "cannot write record `{}`; nothing was stored (check free space and \
             permissions)",
            dir.join(&name).display()
        )))?;
        cache.highest = sequence;
        cache.records.push(record.clone());
        let digest = chain::digest(&bytes);
        cache.digests.push(digest.clone());
        cache.files.push(None);
        cache.bytes += bytes.len();
        let rules = std::mem::take(&mut cache.rules);
        cache.rules = extended(task, cache, rules, chain::Depth::Links);
        Ok(Staged {
            record,
            temp,
            target: dir.join(name),
            digest,
        })
    }

    /// The anchors the records about to be written in `task` (one, or a batch) are
    /// anchored in: this machine's, when it vouched for the task before them (or the task
    /// is new); `None` otherwise (a foreign task stays foreign until adopted). Judged once
    /// for a whole batch, never per record: the anchor on disk moves only as the batch is
    /// placed, so a batch's third record judged against it would lie two past it, be left
    /// unanchored, and leave the task foreign to the machine that wrote all of it.
    fn vouching_anchors(
        &self,
        task: &TaskName,
        cache: &TaskCache,
    ) -> Option<Arc<crate::machine::anchor::Anchors>> {
        crate::machine::installed()
            .map(|m| m.anchors(&self.state_dir))
            .filter(|anchors| vouched_before(task, anchors, cache))
    }

    /// Put `staged` in place: one flush, then each in order (renamed, or linked when its
    /// file has no name), each new head anchored in `anchors` (given when this machine
    /// vouched for the task before the batch, [`Store::vouching_anchors`]) as soon as its
    /// record is in place. The records placed, each with its place; `Err` (after which the
    /// cache is read afresh from the files) when `trouble` stopped the staging or a flush,
    /// rename or link failed.
    fn place(
        &self,
        task: &TaskName,
        cache: &mut TaskCache,
        staged: Vec<(usize, Staged)>,
        trouble: Option<Trouble>,
        anchors: Option<&crate::machine::anchor::Anchors>,
    ) -> Result<Vec<(usize, Record)>, Trouble> {
        let failed = |context: String| move |e: io::Error| (context, e.kind(), e.to_string());
        // One flush for the batch, before any of it is renamed into place.
        self.unsettled
            .store(false, std::sync::atomic::Ordering::Release);
        let flushed = match trouble {
            Some(trouble) => Err(trouble),
            None if staged.is_empty() => Ok(()),
            None => self.flusher().flush().map_err(failed(format!(
                "cannot flush the state directory `{}`",
                self.state_dir.display()
            ))),
        };
        let mut placed = 0;
        // The anchor file, opened by the first head anchored and written over by the next.
        let mut anchor_file = None;
        let outcome = flushed.and_then(|()| {
            for (_, one) in &staged {
                one.temp.place(&one.target).map_err(failed(format!(
                    "cannot write record `{}`; nothing was stored (check free space and \
                     permissions)",
                    one.target.display()
                )))?;
                placed += 1;
                // Anchored as soon as it is in place, before the next is renamed: a crash
                // inside the batch leaves at most this one record past the anchor.
                anchor_head(
                    anchors,
                    task,
                    one.record.envelope.sequence,
                    &one.digest,
                    &mut anchor_file,
                );
            }
            Ok(())
        });
        if placed > 0 {
            self.unsettled
                .store(true, std::sync::atomic::Ordering::Release);
        }
        if let Err(failure) = outcome {
            for (_, one) in &staged[placed..] {
                one.temp.discard();
            }
            // The cache holds records that are not all in place: read the task afresh.
            *cache = TaskCache::default();
            return Err(failure);
        }
        Ok(staged
            .into_iter()
            .map(|(at, one)| (at, one.record))
            .collect())
    }

    /// A consultation's input as it is stored (its `source` added) and the key it is
    /// attested with.
    fn consultation_input(
        &self,
        input: &serde_json::Value,
        provenance: &Provenance,
    ) -> Result<(serde_json::Value, Arc<crate::machine::attest::Key>), StoreError> {
        let machine = crate::machine::installed().ok_or_else(|| StoreError::Io {
            context: "cannot attest a consultation: this process named no data directory to \
                      keep the attestation key in (the daemon and the CLI install theirs)"
                .to_string(),
            source: io::Error::from(io::ErrorKind::NotFound),
        })?;
        let key = machine.key_or_create().map_err(io_error(format!(
            "cannot make or read the attestation key `{}`; check that the data directory is \
             yours and writable",
            crate::machine::attest::key_path(machine.data_dir()).display()
        )))?;
        let mut input = input.clone();
        if let (Some(object), Some(source)) = (input.as_object_mut(), provenance.source) {
            let source: String = source
                .chars()
                .filter(|c| !c.is_control())
                .take(MAX_SOURCE_CHARS)
                .collect();
            if !source.trim().is_empty() {
                object.insert("source".into(), serde_json::Value::String(source));
            }
        }
        Ok((input, key))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_as(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        secrets: &[String],
        attest: Option<(&crate::machine::attest::Key, &Provenance)>,
        settle: bool,
        invariants: &[crate::core::invariants::InForce],
    ) -> Result<Record, StoreError> {
        // A shared task (docs/JOURNAL.md): another machine first means judge again.
        let mut first = None;
        for _ in 0..16 {
            let result =
                self.write_once(task, input, plan_env, secrets, attest, settle, invariants);
            match crate::journal::seam::take_behind() {
                Some(note) => first = Some(note),
                None => {
                    return match (result, first) {
                        (Err(StoreError::Refused(mut r)), Some(note)) => {
                            r.message = format!("{} ({note})", r.message);
                            Err(StoreError::Refused(r))
                        }
                        (result, _) => result,
                    }
                }
            }
        }
        self.write_once(task, input, plan_env, secrets, attest, settle, invariants)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_once(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        secrets: &[String],
        attest: Option<(&crate::machine::attest::Key, &Provenance)>,
        settle: bool,
        invariants: &[crate::core::invariants::InForce],
    ) -> Result<Record, StoreError> {
        let daemon = attest.is_some();
        let dir = self.task_dir(task);
        let fresh = !dir.exists();
        if fresh {
            // Judge the first record against the empty task before creating anything, so
            // a refusal leaves no trace at all.
            let mut env =
                self.write_env(task, 1, plan_env, chain::GENESIS.to_string(), None, secrets);
            env.daemon = daemon;
            env.invariants = invariants;
            writer::admit(&[], input, &env)?;
            self.create_task_dir(&dir)?;
        }
        let _held = self.lock_task(&dir)?;
        let slot = self.cache(task);
        let mut cache = lock(&slot);
        let stale = self.refresh(task, &mut cache)?;
        for name in stale {
            // Under the lock no write is in flight: these are left by a killed writer.
            let _ = fs::remove_file(dir.join(name));
        }
        let sequence = cache.highest + 1;
        let mut record = self.judge_next(
            task, &mut cache, input, plan_env, secrets, invariants, daemon,
        )?;
        if sequence > chain::MAX_SEQUENCE {
            return Err(StoreError::Io {
                context: format!(
                    "task `{task}` holds record {}, the highest a record file's name can \
                     hold; record into another task",
                    chain::MAX_SEQUENCE
                ),
                source: io::Error::from(io::ErrorKind::StorageFull),
            });
        }
        if let Some((key, provenance)) = attest {
            // Signed by this daemon's mesh runtime too, when it joined the mesh.
            let runtime = crate::machine::installed().and_then(|m| m.runtime());
            key.attest_signed(
                &mut record,
                provenance.job,
                provenance.counts,
                runtime.as_ref(),
            );
        }
        let anchors = self.vouching_anchors(task, &cache);
        let name = file_name(&record);
        let mut bytes = serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Io {
            context: format!("cannot serialise record `{}`", record.id()),
            source: io::Error::other(e),
        })?;
        bytes.push(b'\n');
        // The flush before the rename covers every record renamed before it.
        self.unsettled
            .store(false, std::sync::atomic::Ordering::Release);
        crate::journal::seam::publish(&self.state_dir, task, sequence, record.id(), &bytes)
            .map_err(|context| StoreError::Io {
                context,
                source: io::Error::from(io::ErrorKind::NotConnected),
            })?;
        write_atomically(&dir, &name, &bytes, self.flusher(), &self.spares())?;
        self.unsettled
            .store(true, std::sync::atomic::Ordering::Release);
        if settle {
            self.settle()?;
        }
        let digest = chain::digest(&bytes);
        anchor_head(anchors.as_deref(), task, sequence, &digest, &mut None);
        cache.highest = sequence;
        cache.records.push(record.clone());
        cache.digests.push(digest);
        // Its change time is this instant: too recent to vouch for its bytes (see
        // `FileId::of`), so a view judges it by them once, as a `stat` now would make it.
        cache.files.push(None);
        cache.bytes += bytes.len();
        // What the writer admitted it need not admit again: its walk covers it by links.
        let rules = std::mem::take(&mut cache.rules);
        cache.rules = extended(task, &cache, rules, chain::Depth::Links);
        self.feed(task, &cache.records);
        self.feed_track(task, &mut cache);
        let cached = cache.bytes;
        drop(cache);
        self.used(task, &slot, cached);
        Ok(record)
    }

    /// Judge `input` as the next record of `task` against its cache, as the write path and
    /// the dry run both do: the next sequence and `prev`, the trust the writer builds on
    /// (what the attestations and this machine vouch for, too, for a plan or a
    /// conclusion), then the writer's rules through the cached index.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn judge_next(
        &self,
        task: &TaskName,
        cache: &mut TaskCache,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        secrets: &[String],
        invariants: &[crate::core::invariants::InForce],
        daemon: bool,
    ) -> Result<Record, StoreError> {
        let sequence = cache.highest + 1;
        let prev = cache
            .digests
            .last()
            .cloned()
            .unwrap_or_else(|| chain::GENESIS.to_string());
        // The writer refuses to build on a broken chain: the walk it keeps covers what it
        // wrote itself, so only records written by others are walked (and admitted again)
        // here, once each. A plan (it never reuses a conclusion that is not vouched for)
        // and a conclusion (only consultations that count are its review) also look at
        // what the attestations and this machine vouch for; other writes need not.
        let is_conclusion =
            input.get("kind").and_then(serde_json::Value::as_str) == Some("conclusion");
        let mut trust = writer_trust(task, cache);
        if plan_env.is_some() || is_conclusion {
            trust = self.vouched(task, cache, trust);
        }
        let mut env = self.write_env(task, sequence, plan_env, prev, Some(&trust), secrets);
        env.daemon = daemon;
        env.invariants = invariants;
        if cache.rules.rules_index().is_none() {
            keep_writer_index(cache);
        }
        let index = cache
            .rules
            .rules_index()
            .or(cache.writer_index.as_ref().map(|(index, _)| index));
        Ok(writer::admit_indexed(&cache.records, index, input, &env)?)
    }

    pub(super) fn write_env<'a>(
        &self,
        task: &'a TaskName,
        sequence: u64,
        plan_env: Option<&'a PlanEnv<'a>>,
        prev: String,
        trust: Option<&'a Trust>,
        secrets: &'a [String],
    ) -> WriteEnv<'a> {
        WriteEnv {
            task,
            now: time::OffsetDateTime::now_utc(),
            id: ulid::Ulid::new().to_string(),
            sequence,
            plan_env,
            prev,
            trust,
            secrets,
            daemon: false,
            invariants: &[],
        }
    }
}

/// Keep the writer's index of the cached records up to date in `cache.writer_index`,
/// indexing only the records added since (the walk kept in `cache.rules` keeps an index
/// only once it has admitted a record written by someone else again; without one, each
/// write built the index of the whole task afresh, a cost that grew with the task). The
/// index is started again when the record it indexed last is no longer the one at its
/// place (the task was read afresh).
fn keep_writer_index(cache: &mut TaskCache) {
    let continued = cache.writer_index.as_ref().is_some_and(|(index, last)| {
        let indexed = index.indexed();
        indexed > 0
            && indexed <= cache.records.len()
            && cache.digests.get(indexed - 1) == Some(last)
    });
    if !continued {
        cache.writer_index = Some((writer::Index::default(), String::new()));
    }
    if let Some((index, last)) = cache.writer_index.as_mut() {
        index.extend(&cache.records);
        *last = cache.digests.last().cloned().unwrap_or_default();
    }
}

/// Whether this machine vouched for `task` as `cache` holds it (its anchored head is among
/// the records, or the task is new), so the head a write makes is anchored too; a foreign
/// task stays foreign until adopted.
fn vouched_before(
    task: &TaskName,
    anchors: &crate::machine::anchor::Anchors,
    cache: &TaskCache,
) -> bool {
    let highest = cache.records.last().map(|r| r.envelope.sequence);
    chain::foreign(task, anchors.head(task).as_ref(), highest, |s| {
        digest_at(cache, s)
    })
    .is_none()
}

/// Anchor record `sequence` (hashing to `hash`) as `task`'s new head in `anchors`, when
/// given, through the anchor file `kept` open (a batch's earlier head opened it). A
/// failure is logged: the record is stored, and an older anchor still vouches for the task.
fn anchor_head(
    anchors: Option<&crate::machine::anchor::Anchors>,
    task: &TaskName,
    sequence: u64,
    hash: &str,
    kept: &mut Option<fs::File>,
) {
    let Some(anchors) = anchors else {
        return;
    };
    let head = chain::Head {
        sequence,
        hash: hash.to_string(),
    };
    if let Err(e) = anchors.set_kept(task, &head, kept) {
        tracing::warn!(error = %e, task = %task, "cannot anchor the task's new head");
    }
}

/// What stopped a batch, as text: its context, its kind and the error's message.
type Trouble = (String, io::ErrorKind, String);

fn store_failed(e: StoreError) -> Trouble {
    match e {
        StoreError::Io { context, source } => (context, source.kind(), source.to_string()),
        other => (other.to_string(), io::ErrorKind::Other, other.to_string()),
    }
}

fn trouble_error((context, kind, message): Trouble) -> StoreError {
    StoreError::Io {
        context,
        source: io::Error::new(kind, message),
    }
}

fn not_written() -> Trouble {
    (
        "a record of the batch was not written".into(),
        io::ErrorKind::Other,
        "not written".into(),
    )
}

/// One record of a batch on its temporary file, in the cache, waiting to be put in place.
struct Staged {
    record: Record,
    temp: files::Temp,
    target: PathBuf,
    digest: String,
}

/// A consultation a daemon's job drafted, owned, for [`Store::write_plan_with`]: as
/// [`Store::write_consultation`] takes it (`input` without `source`, then [`Provenance`]).
pub struct Drafted {
    /// The drafted consultation, without `source`.
    pub input: serde_json::Value,
    /// The job that produced it.
    pub job: String,
    /// What produced the answer, if known.
    pub source: Option<String>,
    /// Whether the transport vouched for who answered.
    pub counts: bool,
    /// The request's own credential values, removed by value from every string.
    pub secrets: Option<Arc<[String]>>,
}

/// What [`Store::write_plan_with`] wrote: the plan, and the consultations written with it
/// (one result per draft), `None` when it was placed alone.
pub struct PlanWritten {
    /// The plan, in place.
    pub plan: Record,
    /// The consultations written with it, one result per draft.
    pub consultations: Option<Vec<Result<Record, StoreError>>>,
}
