//! Derived views over a task's records: `status`, `explain` and `tree`. Pure functions of
//! the records (and the clock where a view says "now").
