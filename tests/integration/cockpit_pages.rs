//! The cockpit's pages of `status` (`GET /api/v1/reasoning?offset=&limit=`), derived page
//! by page from the task's status index: each reply is byte for byte the whole view cut by
//! hand, for pages inside, across and past the end, and again after records are appended
//! (the index fed only the new ones).

use crate::cockpit::scripted;
use crate::support::daemon::{answer, catalogue, Advisor, Daemon};
use advisord::core::views::status::StatusView;
use advisord_fakes::scripted::Script;
use serde_json::json;

/// The pages compared: inside, across the end, empty, at the end, past it, everything.
const WINDOWS: [(Option<usize>, Option<usize>); 10] = [
    (Some(0), Some(2)),
    (Some(1), Some(2)),
    (Some(0), Some(50)),
    (Some(3), Some(1)),
    (Some(2), Some(0)),
    (Some(4), Some(10)),
    (Some(10), Some(5)),
    (None, Some(1)),
    (Some(2), None),
    (Some(usize::MAX), Some(usize::MAX)),
];

/// The query naming the helper's task.
fn context(daemon: &Daemon) -> String {
    let place = &daemon.place;
    format!(
        "root={}&task=t&state_dir={}&catalogue={}",
        place.root().display(),
        place.state().display(),
        place.catalogue().display()
    )
}

/// Ask the whole status and every page of [`WINDOWS`]; each page must be the whole view
/// cut by hand (as the daemon cut it before pages were derived on their own), byte for
/// byte. The whole view's assessments, to build on.
async fn pages_are_the_whole_cut_by_hand(daemon: &Daemon) -> usize {
    let context = context(daemon);
    let whole = daemon
        .call("GET", &format!("/api/v1/reasoning?{context}"), None)
        .await;
    assert_eq!(whole.status, 200);
    let view: StatusView = serde_json::from_slice(&whole.body).expect("a status view");
    assert_eq!(view.page, None, "no paging asked, none applied");
    for (offset, limit) in WINDOWS {
        let mut query = context.clone();
        if let Some(offset) = offset {
            query.push_str(&format!("&offset={offset}"));
        }
        if let Some(limit) = limit {
            query.push_str(&format!("&limit={limit}"));
        }
        let page = daemon
            .call("GET", &format!("/api/v1/reasoning?{query}"), None)
            .await;
        assert_eq!(page.status, 200);
        let mut cut = view.clone();
        cut.page(offset.unwrap_or(0), limit.unwrap_or(usize::MAX));
        let expected = serde_json::to_vec(&cut).expect("serialises");
        assert_eq!(
            String::from_utf8_lossy(&page.body),
            String::from_utf8_lossy(&expected),
            "offset {offset:?}, limit {limit:?}"
        );
    }
    view.assessments.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_page_of_status_is_the_whole_view_cut_by_hand_before_and_after_appends() {
    let price = "price: {currency: USD, input_per_million: 2, output_per_million: 4, \
                 as_of: 2026-12-01}";
    let supports = |c: &str| Script::answer(&answer(c, "supports"));
    let (registry, _fakes) = scripted(vec![
        (
            "a",
            (0..6)
                .map(|i| supports("a").with_usage(1_000 * (i + 1), 333))
                .collect(),
        ),
        (
            "b",
            vec![
                supports("b"),
                Script::answer(&answer("b", "opposes")),
                supports("b"),
                supports("b"),
                supports("b"),
                supports("b"),
            ],
        ),
    ]);
    let yaml = catalogue(&[Advisor::scripted("a").with(price), Advisor::scripted("b")]);
    let daemon = Daemon::start(&yaml, registry).await;

    // A consulted assessment, a disputed one (b opposes), one left open.
    let mut consulted = Vec::new();
    for _ in 0..2 {
        let assessment = daemon.assessment().await;
        let job = daemon.consult(&assessment, 30.0).await;
        let done = daemon.wait(job["id"].as_str().unwrap()).await;
        assert_eq!(done["state"], "done", "{done}");
        consulted.push((assessment, done));
    }
    daemon.assessment().await;
    assert_eq!(pages_are_the_whole_cut_by_hand(&daemon).await, 3);

    // Appended: a conclusion on the first (citing both answers) and more assessments; the
    // daemon's index takes only them.
    let (first, done) = &consulted[0];
    let cited: Vec<&str> = done["consultations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["record"].as_str())
        .collect();
    daemon
        .record(
            json!({"kind": "conclusion", "assessment": first, "decision": "one writer",
                       "rationale": "both agree", "consultations": cited,
                       "evidence": [{"kind": "file", "ref": "src/store.rs"}],
                       "validation_plan": "the writer tests"}),
        )
        .await;
    for _ in 0..3 {
        daemon.assessment().await;
    }
    assert_eq!(pages_are_the_whole_cut_by_hand(&daemon).await, 6);
    daemon.stop().await;
}
