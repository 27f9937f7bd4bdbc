//! What a run of a binary printed and how it ended, with assertions that show all of it
//! when they fail. Shared by the test support modules (`helper`, `client_support`).

#![allow(dead_code)]

use serde_json::Value;

/// What a run printed and how it ended.
#[derive(Debug)]
pub struct Output {
    /// The command, for failure messages.
    pub description: String,
    /// The exit status (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    fn context(&self) -> String {
        format!(
            "{}\n--- exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.description, self.code, self.stdout, self.stderr
        )
    }

    /// Fail unless the run exited with `code`.
    pub fn expect_exit(self, code: i32) -> Output {
        assert_eq!(
            self.code,
            code,
            "unexpected exit status: {}",
            self.context()
        );
        self
    }

    /// Standard output parsed as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.context()))
    }

    /// Standard output parsed as YAML.
    pub fn yaml(&self) -> Value {
        serde_yaml_ng::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not YAML ({e}): {}", self.context()))
    }

    /// Fail unless the JSON on standard output holds `expected` at `pointer`.
    pub fn expect_json(self, pointer: &str, expected: impl Into<Value>) -> Output {
        let expected = expected.into();
        let json = self.json();
        let got = json.pointer(pointer);
        assert_eq!(got, Some(&expected), "at `{pointer}` of {}", self.context());
        self
    }

    /// Fail unless standard output contains `fragment`.
    pub fn expect_stdout(self, fragment: &str) -> Output {
        assert!(
            self.stdout.contains(fragment),
            "stdout lacks {fragment:?}: {}",
            self.context()
        );
        self
    }

    /// Fail unless standard error contains `fragment`.
    pub fn expect_stderr(self, fragment: &str) -> Output {
        assert!(
            self.stderr.contains(fragment),
            "stderr lacks {fragment:?}: {}",
            self.context()
        );
        self
    }

    /// Fail unless standard output is empty.
    pub fn expect_no_stdout(self) -> Output {
        assert!(
            self.stdout.is_empty(),
            "stdout not empty: {}",
            self.context()
        );
        self
    }
}
