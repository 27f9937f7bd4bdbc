//! Lays out the client's code for a short-lived process.
//!
//! `advisor-consult` lives a few milliseconds, and most of what it costs beyond the daemon's
//! work is the kernel mapping in pages of its code the first time each is run (one fault
//! per 64 KiB window of the binary). The functions a consultation runs are scattered over
//! about 80 such windows of a 10 MB text section; `build/advisor-consult.order` lists them
//! (the ones `--version` runs first), and the linker places them side by side, in about 20.
//! See `docs/DAEMON.md`, "What a round trip costs", and `scripts/order-client`, which makes
//! the list again from a consultation run under valgrind.
//!
//! Only release builds for `x86_64-unknown-linux-gnu` with the toolchain's own linker (LLD,
//! the default there since Rust 1.90) take the list: a symbol it names that the build no
//! longer has is passed over, so a stale list costs speed, never a build. Set
//! `ADVISORD_CODE_ORDER=off` to link without it.

use std::env;
use std::path::Path;
use std::process::Command;

const ORDER: &str = "build/advisor-consult.order";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=ADVISORD_CODE_ORDER");
    if env::var("ADVISORD_CODE_ORDER").is_ok_and(|value| value == "off") {
        return;
    }
    let release = env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let target = env::var("TARGET").unwrap_or_default();
    // A linker named in the configuration may not be LLD (GNU ld refuses the option).
    let own_linker = env::var_os("RUSTC_LINKER").is_none()
        && !env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| flags.contains("link"));
    if !release || target != "x86_64-unknown-linux-gnu" || !own_linker || !lld_by_default() {
        return;
    }
    let order = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join(ORDER);
    if !order.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bin=advisor-consult=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo:rustc-link-arg-bin=advisor-consult=-Wl,--no-warn-symbol-ordering");
}

/// Whether this rustc links `x86_64-unknown-linux-gnu` with its own LLD unless told
/// otherwise: from Rust 1.90 on.
fn lld_by_default() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let Ok(output) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    let version = String::from_utf8_lossy(&output.stdout);
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let mut numbers = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split(['.', '-'])
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
