//! The repository runs `check` on its own tree: the files it declares provider-independent
//! name no advisor, executable, provider, vendor or model of the embedded catalogue, and no
//! CI file needs an advisor's credential.

use advisord::check;
use advisord::core::catalogue::Catalogue;
use advisord::render::{render, Format};
use std::path::Path;

#[test]
fn this_repository_passes_its_own_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let report = check::run(root, &Catalogue::embedded(), None);
    assert!(
        report.declared,
        "the repository must declare itself: {:?}",
        report.notes
    );
    assert!(
        report.files_scanned > 0,
        "the declared paths must hold files"
    );
    assert!(report.passed(), "\n{}", render(&report, Format::Plain));
}
