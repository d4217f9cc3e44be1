//! Making untrusted text safe to draw (SPEC §5.2): the crate-wide [`crate::escape`] module,
//! re-exported here so widgets and hosts keep reaching it as `tui::escape`.

pub use crate::escape::*;
