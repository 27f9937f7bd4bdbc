//! The catalogue's vocabulary shared by the daemon's reading of entries and the adapters'.

/// The keys every advisor shares; every other key of an entry is the adapter's setting.
pub const COMMON_KEYS: &[&str] = &[
    "id",
    "title",
    "transport",
    "adapter",
    "references",
    "executable",
    "credential",
    "capabilities",
    "local",
    "max_concurrent",
    "price",
    "budget",
];
