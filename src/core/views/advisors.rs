//! `advisors`: every advisor of the catalogue, its status and why, its track record, and
//! the capacity per capability (the JSON shape is fixed: tests outside the repository read
//! it). The track record is information for the reader (see `core::track`): nothing here
//! or in the policy reads it back.

use crate::core::availability;
use crate::core::catalogue::{Catalogue, Transport};
use crate::core::records::{AdvisorAvailability, Mode, Status};
use crate::core::track::TrackRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The advisors view: `{"mode", "advisors": [...], "capacity": {CAPABILITY: N}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AdvisorsView {
    /// The mode in force.
    pub mode: Mode,
    /// Every advisor, in declaration order.
    pub advisors: Vec<AdvisorRow>,
    /// For every capability, how many available advisors offer it (0 included; see
    /// [`availability::capacity`]).
    pub capacity: BTreeMap<String, u32>,
    /// The daemon's link to the mesh, when it was started with one (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<MeshStatus>,
    /// The catalogue files read, in order, each with how it entered: `replaces` what is
    /// below it, or `extends` it. Absent when only the embedded catalogue is in force.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub catalogue_files: Vec<crate::core::catalogue::LayerUsed>,
    /// Advisors no longer in the catalogue whose resolutions are recorded, with their
    /// track records (an advisor's history outlives its catalogue entry). Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub former: Vec<FormerAdvisor>,
}

/// An advisor that is not in the catalogue but held positions in resolved disagreements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FormerAdvisor {
    /// Its id as the records name it.
    pub id: String,
    /// What the experiments that settled its disagreements found.
    pub track_record: TrackRecord,
}

/// A daemon's link to the mesh, as `health` and `advisors` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshStatus {
    /// The bus's URL, without any credential.
    pub url: String,
    /// This daemon's runtime id (its advisor id elsewhere is `mesh:<runtime>`).
    pub runtime: String,
    /// `connected`, `connecting`, `disconnected` (reconnecting on its own) or `failed`
    /// (the URL or the credentials cannot be used; fix them and restart).
    pub state: String,
    /// Why, when not connected: one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `relay` or `inbox` when this daemon offers reviews.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    /// Peers offering reviews found by the last sweeps.
    pub peers: usize,
}

impl MeshStatus {
    /// The status in one line.
    pub fn line(&self) -> String {
        let offer = match &self.offer {
            Some(offer) => format!(", offering reviews ({offer})"),
            None => String::new(),
        };
        match (self.state.as_str(), &self.detail) {
            ("connected", _) => format!(
                "mesh: connected to {} as `{}`, {} peer{}{offer}",
                self.url,
                self.runtime,
                self.peers,
                if self.peers == 1 { "" } else { "s" }
            ),
            (state, Some(detail)) => format!("mesh: {state} ({}): {detail}", self.url),
            (state, None) => format!("mesh: {state} ({})", self.url),
        }
    }
}

/// One advisor with its availability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AdvisorRow {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// How it is reached.
    pub transport: Transport,
    /// The adapter that speaks to it.
    pub adapter: String,
    /// Its status now.
    pub status: Status,
    /// Why, in one sentence.
    pub reason: String,
    /// A cooldown passed and no completed answer came since.
    pub recovering: bool,
    /// When its cooldown ends (RFC 3339 UTC), or `null`.
    pub until: Option<String>,
    /// What it offers.
    pub capabilities: Vec<String>,
    /// Whether it runs on this machine.
    pub local: bool,
    /// What the experiments that settled its disagreements found, across every task of
    /// the state directory: information for the reader, never read by the policy.
    #[serde(default)]
    pub track_record: TrackRecord,
}

/// The reason given for an advisor the availability list does not cover.
pub const NOT_ASSESSED: &str = "its availability was not assessed";

impl AdvisorsView {
    /// Join the catalogue with each advisor's availability (matched by id).
    ///
    /// An advisor missing from `availability` shows as `unavailable` with
    /// [`NOT_ASSESSED`], so nothing is presented as available that was not judged so.
    pub fn new(
        mode: Mode,
        catalogue: &Catalogue,
        availability: &[AdvisorAvailability],
    ) -> AdvisorsView {
        let by_id: HashMap<&str, &AdvisorAvailability> = availability
            .iter()
            .map(|a| (a.advisor.as_str(), a))
            .collect();
        let advisors: Vec<AdvisorRow> = catalogue
            .advisors
            .iter()
            .map(|entry| {
                let seen = by_id.get(entry.id.as_str());
                AdvisorRow {
                    id: entry.id.clone(),
                    title: entry.title.clone(),
                    transport: entry.transport,
                    adapter: entry.adapter.clone(),
                    status: seen.map_or(Status::Unavailable, |a| a.status),
                    reason: seen.map_or_else(|| NOT_ASSESSED.to_string(), |a| a.reason.clone()),
                    recovering: seen.is_some_and(|a| a.recovering),
                    until: seen.and_then(|a| a.until.clone()),
                    capabilities: entry.capabilities.clone(),
                    local: entry.local,
                    track_record: TrackRecord::default(),
                }
            })
            .collect();
        let capacity = availability::capacity(catalogue, availability);
        AdvisorsView {
            mode,
            advisors,
            capacity,
            mesh: None,
            catalogue_files: Vec::new(),
            former: Vec::new(),
        }
    }

    /// Give each advisor its track record from `track` (by advisor id, as
    /// `core::track::tally` gives them); those not in the catalogue become `former`.
    pub fn with_track_records(mut self, mut track: BTreeMap<String, TrackRecord>) -> AdvisorsView {
        for row in &mut self.advisors {
            row.track_record = track.remove(&row.id).unwrap_or_default();
        }
        self.former = track
            .into_iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(id, track_record)| FormerAdvisor { id, track_record })
            .collect();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalogue() -> Catalogue {
        serde_json::from_value(json!({"advisors": [
            {"id": "one", "title": "One", "transport": "process", "adapter": "process",
             "executable": "one", "capabilities": ["independent_reasoning", "code_review"]},
            {"id": "two", "title": "Two", "transport": "http", "adapter": "x",
             "credential": "TWO_KEY", "capabilities": ["independent_reasoning"], "local": true},
            {"id": "three", "title": "Three", "transport": "mesh", "adapter": "mesh",
             "capabilities": ["reviews", "custom_thing"]},
        ]}))
        .unwrap()
    }

    fn seen(advisor: &str, status: Status) -> AdvisorAvailability {
        AdvisorAvailability {
            advisor: advisor.into(),
            status,
            reason: format!("{advisor} is {}", status.as_str()),
            recovering: false,
            until: None,
        }
    }

    #[test]
    fn the_json_shape_of_spec_12() {
        let mut limited = seen("two", Status::RateLimited);
        limited.until = Some("2026-01-01T00:15:00Z".into());
        let view = AdvisorsView::new(
            Mode::Standard,
            &catalogue(),
            &[seen("one", Status::Available), limited],
        );
        let json = serde_json::to_value(&view).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["mode", "advisors", "capacity"]);
        assert_eq!(json["mode"], "standard");
        let row = json["advisors"][1].as_object().unwrap();
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "id",
                "title",
                "transport",
                "adapter",
                "status",
                "reason",
                "recovering",
                "until",
                "capabilities",
                "local",
                "track_record"
            ]
        );
        assert_eq!(row["status"], "rate_limited");
        assert_eq!(row["until"], "2026-01-01T00:15:00Z");
        assert_eq!(row["transport"], "http");
        assert_eq!(json["advisors"][0]["until"], serde_json::Value::Null);
        let track: Vec<&str> = row["track_record"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(track, ["resolutions", "favoured", "disfavoured"]);
    }

    #[test]
    fn track_records_go_to_their_advisors_and_the_rest_are_former() {
        let record = |n: u32| TrackRecord {
            resolutions: n,
            favoured: n,
            ..TrackRecord::default()
        };
        let track = BTreeMap::from([
            ("two".to_string(), record(2)),
            ("gone".to_string(), record(1)),
        ]);
        let view = AdvisorsView::new(Mode::Standard, &catalogue(), &[]).with_track_records(track);
        assert_eq!(view.advisors[1].track_record.favoured, 2);
        assert!(view.advisors[0].track_record.is_empty());
        assert_eq!(view.former.len(), 1);
        assert_eq!(view.former[0].id, "gone");
        assert_eq!(view.former[0].track_record.resolutions, 1);
    }

    #[test]
    fn capacity_counts_available_advisors_per_capability() {
        let view = AdvisorsView::new(
            Mode::Standard,
            &catalogue(),
            &[
                seen("one", Status::Available),
                seen("two", Status::Available),
                seen("three", Status::Disabled),
            ],
        );
        assert_eq!(view.capacity["independent_reasoning"], 2);
        assert_eq!(view.capacity["code_review"], 1);
        assert_eq!(view.capacity["reviews"], 0, "disabled advisors add nothing");
        assert_eq!(
            view.capacity["security_review"], 0,
            "known capabilities are listed"
        );
        assert_eq!(
            view.capacity["custom_thing"], 0,
            "offered capabilities are listed"
        );
    }

    #[test]
    fn an_advisor_not_assessed_is_not_available() {
        let view = AdvisorsView::new(Mode::Ci, &catalogue(), &[]);
        assert!(view
            .advisors
            .iter()
            .all(|a| a.status == Status::Unavailable));
        assert_eq!(view.advisors[0].reason, NOT_ASSESSED);
        assert!(view.capacity.values().all(|&n| n == 0));
    }
}
