//! The feed of a root and task: what the cockpit watches live (`GET /api/v1/events`). It
//! carries every job event (`job`), every record written through this daemon (`record`:
//! the records a job writes and those of the `record` route) and the advisors' status
//! when it changes after a job (`advisors`).
//!
//! Each item gets a sequence number; its event id is `EPOCH-SEQ` (the epoch is when the
//! daemon started), so `Last-Event-ID` resumes from the last [`Limits::replay`] items, and
//! an id of another daemon run, or one too old, gets a `reset` event first (reload, then
//! follow). Each subscriber has a queue of at most [`Limits::buffer`] items: one that
//! falls behind is dropped (nothing more is queued for it), reads what was queued, then a
//! last `dropped` event; the HTTP mapping also closes its connection after
//! [`Limits::drop_grace`], so a stalled client holds nothing for long.

use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// The bounds of the feed and of the event streams.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How many items a subscriber may have queued before it is dropped.
    pub buffer: usize,
    /// How many recent items are kept for `Last-Event-ID`.
    pub replay: usize,
    /// How often an idle event stream gets a keep-alive comment.
    pub keepalive: Duration,
    /// How long a dropped subscriber's connection stays open to read its last event.
    pub drop_grace: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            buffer: 256,
            replay: 1024,
            keepalive: Duration::from_secs(15),
            drop_grace: Duration::from_secs(2),
        }
    }
}

/// One item of the feed.
#[derive(Debug)]
pub struct Item {
    /// Its sequence number (from 1).
    pub seq: u64,
    /// The root it concerns, as the request or job named it.
    pub root: String,
    /// The task it concerns.
    pub task: String,
    /// `job`, `record` or `advisors`.
    pub kind: &'static str,
    /// Its data, as JSON.
    pub data: String,
}

/// Which items a subscriber wants: one root (as named, or canonical), one task or all.
#[derive(Debug, Clone)]
pub struct Filter {
    /// The root as the subscriber named it.
    pub root: String,
    /// The same, canonical (symbolic links resolved), when it resolves.
    pub canonical: Option<String>,
    /// One task, or every task of the root.
    pub task: Option<String>,
}

impl Filter {
    fn wants(&self, item: &Item) -> bool {
        (item.root == self.root || self.canonical.as_deref() == Some(item.root.as_str()))
            && self.task.as_ref().is_none_or(|t| *t == item.task)
    }
}

/// What a subscriber reads next.
#[derive(Debug, Clone)]
pub enum Message {
    /// An item of the feed.
    Item(Arc<Item>),
    /// The `Last-Event-ID` could not be resumed from: reload, then follow.
    Reset,
    /// The subscriber fell behind and was dropped: the last message.
    Dropped,
}

struct Subscriber {
    id: u64,
    filter: Filter,
    queue: mpsc::Sender<Arc<Item>>,
    dropped: Arc<Notify>,
}

/// The recent items kept for `Last-Event-ID`, packed one after the other in one buffer
/// rather than each in allocations of its own. Items outlive the burst of jobs that
/// published them, and a thousand small blocks scattered among that burst's freed memory
/// keep most of its pages resident (the allocator returns a page only when nothing on it
/// is in use); one buffer of their text is one block (past 128 KiB a mapping of its own,
/// see `daemon::memory`). An item is built again when a subscriber resumes past it.
#[derive(Default)]
struct Replay {
    /// Each item's number, kind and the lengths of its root, task and data, oldest first.
    index: VecDeque<Packed>,
    /// Their root, task and data, one after the other, oldest first.
    text: VecDeque<u8>,
}

struct Packed {
    seq: u64,
    kind: &'static str,
    lengths: [usize; 3],
}

impl Packed {
    fn len(&self) -> usize {
        self.lengths.iter().sum()
    }
}

impl Replay {
    fn len(&self) -> usize {
        self.index.len()
    }

    fn oldest(&self) -> Option<u64> {
        self.index.front().map(|p| p.seq)
    }

    fn push(&mut self, item: &Item) {
        for part in [&item.root, &item.task, &item.data] {
            self.text.extend(part.as_bytes());
        }
        self.index.push_back(Packed {
            seq: item.seq,
            kind: item.kind,
            lengths: [item.root.len(), item.task.len(), item.data.len()],
        });
    }

    fn pop(&mut self) {
        if let Some(oldest) = self.index.pop_front() {
            self.text.drain(..oldest.len());
        }
    }

    /// Give back what the buffers reserved beyond what the kept items use (a burst grows
    /// them by doubling).
    fn shrink(&mut self) {
        self.text.shrink_to_fit();
        self.index.shrink_to_fit();
    }

    /// The items numbered after `after` that `wanted`, rebuilt, oldest first.
    fn after(&self, after: u64, wanted: impl Fn(&Item) -> bool) -> Vec<Arc<Item>> {
        let mut at = 0;
        let mut found = Vec::new();
        for packed in &self.index {
            let start = at;
            at += packed.len();
            if packed.seq <= after {
                continue;
            }
            let mut parts = packed.lengths.iter().scan(start, |from, len| {
                let bytes: Vec<u8> = self.text.range(*from..*from + len).copied().collect();
                *from += len;
                // Each part went in as a whole string.
                Some(String::from_utf8(bytes).unwrap_or_default())
            });
            let item = Item {
                seq: packed.seq,
                root: parts.next().unwrap_or_default(),
                task: parts.next().unwrap_or_default(),
                kind: packed.kind,
                data: parts.next().unwrap_or_default(),
            };
            if wanted(&item) {
                found.push(Arc::new(item));
            }
        }
        found
    }
}

#[derive(Default)]
struct Inner {
    next: u64,
    recent: Replay,
    subscribers: Vec<Subscriber>,
    /// A hash of the last advisors' status published per root and task (at most
    /// [`ADVISORS_REMEMBERED`] of them: forgetting one only repeats a publication).
    advisors: HashMap<(String, String), u64>,
}

/// How many roots and tasks the feed remembers the last advisors' status of, so that a
/// daemon serving ever new tasks keeps a bounded memory.
const ADVISORS_REMEMBERED: usize = 256;

/// The feed of one daemon.
pub struct Feed {
    epoch: u64,
    limits: Limits,
    inner: Mutex<Inner>,
    ids: AtomicU64,
}

impl Feed {
    /// A feed whose ids carry `epoch` (when the daemon started, in ms), under `limits`.
    pub fn new(epoch: u64, limits: Limits) -> Feed {
        Feed {
            epoch,
            limits,
            inner: Mutex::new(Inner::default()),
            ids: AtomicU64::new(0),
        }
    }

    /// Its bounds.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The event id of `item`.
    pub fn event_id(&self, item: &Item) -> String {
        format!("{}-{}", self.epoch, item.seq)
    }

    /// Once the daemon is quiet: its buffers down to what the items it keeps use.
    pub fn shrink(&self) {
        let mut inner = self.lock();
        inner.recent.shrink();
        inner.advisors.shrink_to_fit();
    }

    /// How many bytes the kept items' text uses and its buffer reserves.
    #[cfg(test)]
    fn text_bytes(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.recent.text.len(), inner.recent.text.capacity())
    }

    /// How many subscribers are following.
    pub fn subscribers(&self) -> usize {
        self.lock().subscribers.len()
    }

    /// Publish `data` as a `kind` item of `root` and `task`.
    pub fn publish(&self, root: &str, task: &str, kind: &'static str, data: &impl Serialize) {
        // Plain data with string keys: it always encodes.
        let data = serde_json::to_string(data).unwrap_or_default();
        let mut inner = self.lock();
        inner.next += 1;
        let item = Arc::new(Item {
            seq: inner.next,
            root: root.to_string(),
            task: task.to_string(),
            kind,
            data,
        });
        inner.recent.push(&item);
        while inner.recent.len() > self.limits.replay {
            inner.recent.pop();
        }
        inner.subscribers.retain(|s| {
            if !s.filter.wants(&item) {
                return !s.queue.is_closed();
            }
            match s.queue.try_send(item.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::debug!(
                        subscriber = s.id,
                        "an event subscriber fell behind; dropped"
                    );
                    s.dropped.notify_one();
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    /// Publish the advisors' status of `root` and `task` if it differs from the last one
    /// published there.
    pub fn publish_advisors(&self, root: &str, task: &str, view: &impl Serialize) {
        let text = serde_json::to_string(view).unwrap_or_default();
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut hasher);
            hasher.finish()
        };
        {
            let mut inner = self.lock();
            let key = (root.to_string(), task.to_string());
            if inner.advisors.get(&key) == Some(&hash) {
                return;
            }
            if inner.advisors.len() >= ADVISORS_REMEMBERED && !inner.advisors.contains_key(&key) {
                inner.advisors.clear();
            }
            inner.advisors.insert(key, hash);
        }
        self.publish(root, task, "advisors", view);
    }

    /// Follow the items `filter` wants, after the one `last_id` names (if any).
    pub fn subscribe(&self, filter: Filter, last_id: Option<&str>) -> Subscription {
        let (queue, receiver) = mpsc::channel(self.limits.buffer.max(1));
        let dropped = Arc::new(Notify::new());
        let mut inner = self.lock();
        let mut pending = VecDeque::new();
        if let Some(last) = last_id {
            match self.resume_point(&inner, last) {
                Some(after) => pending.extend(
                    inner
                        .recent
                        .after(after, |i| filter.wants(i))
                        .into_iter()
                        .map(Message::Item),
                ),
                None => pending.push_back(Message::Reset),
            }
        }
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        inner.subscribers.push(Subscriber {
            id,
            filter,
            queue,
            dropped: dropped.clone(),
        });
        Subscription {
            pending,
            receiver,
            dropped,
            ended: false,
        }
    }

    /// The sequence number to resume after, when `last` is an id of this run still kept.
    fn resume_point(&self, inner: &Inner, last: &str) -> Option<u64> {
        let (epoch, seq) = last.trim().split_once('-')?;
        let (epoch, seq) = (epoch.parse::<u64>().ok()?, seq.parse::<u64>().ok()?);
        if epoch != self.epoch || seq > inner.next {
            return None;
        }
        let oldest = inner.recent.oldest().unwrap_or(inner.next + 1);
        // Everything after `seq` must still be kept.
        (seq + 1 >= oldest).then_some(seq)
    }
}

/// One subscriber's side: replayed items first, then live ones; [`Message::Dropped`] last
/// if it fell behind.
pub struct Subscription {
    pending: VecDeque<Message>,
    receiver: mpsc::Receiver<Arc<Item>>,
    dropped: Arc<Notify>,
    ended: bool,
}

impl Subscription {
    /// Resolves when the feed drops this subscriber (for closing its connection).
    pub fn dropped(&self) -> Arc<Notify> {
        self.dropped.clone()
    }

    /// The next message; `None` after [`Message::Dropped`].
    pub async fn next(&mut self) -> Option<Message> {
        if self.ended {
            return None;
        }
        if let Some(message) = self.pending.pop_front() {
            return Some(message);
        }
        // Dropped: the queue is gone (the sender was removed), so `recv` ends.
        match self.receiver.recv().await {
            Some(item) => Some(Message::Item(item)),
            None => {
                self.ended = true;
                Some(Message::Dropped)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(task: Option<&str>) -> Filter {
        Filter {
            root: "/r".into(),
            canonical: None,
            task: task.map(String::from),
        }
    }

    fn feed(buffer: usize, replay: usize) -> Feed {
        Feed::new(
            7,
            Limits {
                buffer,
                replay,
                ..Limits::default()
            },
        )
    }

    async fn seqs(sub: &mut Subscription, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(match sub.next().await {
                Some(Message::Item(i)) => format!("{}:{}", i.task, i.seq),
                Some(Message::Reset) => "reset".into(),
                Some(Message::Dropped) => "dropped".into(),
                None => "end".into(),
            });
        }
        out
    }

    #[tokio::test]
    async fn shrinking_keeps_every_item_and_gives_back_what_a_burst_reserved() {
        let feed = feed(8, 64);
        let data = serde_json::json!({"text": "x".repeat(300)});
        for n in 0..200 {
            feed.publish("/r", &format!("t{}", n % 5), "job", &data);
        }
        // Everything kept, from just before the oldest on.
        let replayed = |feed: &Feed| -> Vec<(u64, String, String)> {
            let oldest = feed.lock().recent.oldest().expect("items kept");
            feed.subscribe(filter(None), Some(&format!("7-{}", oldest - 1)))
                .pending
                .iter()
                .filter_map(|m| match m {
                    Message::Item(i) => Some((i.seq, i.task.clone(), i.data.clone())),
                    _ => None,
                })
                .collect()
        };
        let before = replayed(&feed);
        let (used, reserved) = feed.text_bytes();
        feed.shrink();
        let (used_after, reserved_after) = feed.text_bytes();
        assert_eq!(used_after, used, "no item's text lost");
        assert!(
            reserved_after < reserved && reserved_after == used,
            "reserved {reserved} -> {reserved_after} for {used} used"
        );
        let after = replayed(&feed);
        assert_eq!(after, before, "the same items replayed after the shrink");
        assert_eq!(after.len(), 64);
    }

    #[tokio::test]
    async fn a_subscriber_gets_its_root_and_task_only() {
        let feed = feed(8, 8);
        let mut one = feed.subscribe(filter(Some("t")), None);
        let mut all = feed.subscribe(filter(None), None);
        feed.publish("/r", "t", "record", &1);
        feed.publish("/other", "t", "record", &2);
        feed.publish("/r", "u", "record", &3);
        assert_eq!(seqs(&mut one, 1).await, ["t:1"]);
        assert_eq!(seqs(&mut all, 2).await, ["t:1", "u:3"]);
    }

    #[tokio::test]
    async fn last_event_id_resumes_or_resets() {
        let feed = feed(8, 3);
        for n in 0..5 {
            feed.publish("/r", "t", "record", &n);
        }
        let mut resumed = feed.subscribe(filter(None), Some("7-3"));
        assert_eq!(seqs(&mut resumed, 2).await, ["t:4", "t:5"]);
        let mut too_old = feed.subscribe(filter(None), Some("7-1"));
        assert_eq!(seqs(&mut too_old, 1).await, ["reset"]);
        let mut other_run = feed.subscribe(filter(None), Some("8-4"));
        assert_eq!(seqs(&mut other_run, 1).await, ["reset"]);
        let mut garbage = feed.subscribe(filter(None), Some("x"));
        assert_eq!(seqs(&mut garbage, 1).await, ["reset"]);
        let mut up_to_date = feed.subscribe(filter(None), Some("7-5"));
        feed.publish("/r", "t", "record", &6);
        assert_eq!(seqs(&mut up_to_date, 1).await, ["t:6"]);
    }

    /// The items kept for a resume (packed in one buffer) come back as they were
    /// published, each with its own root, task, kind and data, the oldest gone first.
    #[tokio::test]
    async fn resumed_items_are_the_items_published() {
        let feed = feed(8, 3);
        let roots = ["/r", "/r", "/other", "/r", "/r"];
        for (n, root) in roots.iter().enumerate() {
            let task = if n == 3 { "ü-task" } else { "t" };
            feed.publish(
                root,
                task,
                ["record", "job"][n % 2],
                &format!("données {n}"),
            );
        }
        let mut resumed = feed.subscribe(filter(None), Some("7-2"));
        let mut got = Vec::new();
        for _ in 0..2 {
            let Some(Message::Item(item)) = resumed.next().await else {
                panic!("an item");
            };
            got.push((
                item.seq,
                item.root.clone(),
                item.task.clone(),
                item.kind,
                item.data.clone(),
            ));
        }
        // Item 3 is of another root: not this subscriber's.
        assert_eq!(
            got,
            [
                (
                    4,
                    "/r".into(),
                    "ü-task".into(),
                    "job",
                    "\"données 3\"".into()
                ),
                (5, "/r".into(), "t".into(), "record", "\"données 4\"".into()),
            ]
        );
        let mut too_old = feed.subscribe(filter(None), Some("7-1"));
        assert_eq!(seqs(&mut too_old, 1).await, ["reset"]);
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_is_dropped_with_a_last_message() {
        let feed = feed(2, 8);
        let mut slow = feed.subscribe(filter(None), None);
        for n in 0..3 {
            feed.publish("/r", "t", "record", &n);
        }
        assert_eq!(feed.subscribers(), 0, "dropped at once");
        assert_eq!(
            seqs(&mut slow, 4).await,
            ["t:1", "t:2", "dropped", "end"],
            "what was queued, then the last message"
        );
    }

    #[test]
    fn advisors_are_published_when_they_change_only() {
        let feed = feed(8, 8);
        let mut sub = feed.subscribe(filter(None), None);
        feed.publish_advisors("/r", "t", &"a cooling");
        feed.publish_advisors("/r", "t", &"a cooling");
        feed.publish_advisors("/r", "t", &"a available");
        let mut kinds = Vec::new();
        while let Ok(item) = sub.receiver.try_recv() {
            kinds.push(item.data.clone());
        }
        assert_eq!(kinds, ["\"a cooling\"", "\"a available\""]);
    }

    /// A daemon serving ever new tasks remembers a bounded number of them; one it forgot
    /// only has its status published again.
    #[test]
    fn the_advisors_remembered_are_bounded() {
        let feed = feed(8, 8);
        for n in 0..ADVISORS_REMEMBERED * 3 {
            feed.publish_advisors("/r", &format!("t{n}"), &"a available");
            assert!(feed.lock().advisors.len() <= ADVISORS_REMEMBERED);
        }
        let before = feed.lock().next;
        let last = format!("t{}", ADVISORS_REMEMBERED * 3 - 1);
        feed.publish_advisors("/r", &last, &"a available");
        assert_eq!(feed.lock().next, before, "the last one is still remembered");
    }
}
