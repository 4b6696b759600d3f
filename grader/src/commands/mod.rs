//! One module per subcommand.

pub mod check;
pub mod dev;
pub mod doctor;
pub mod hint;
pub mod list;
pub mod pack;
pub mod regrade;
pub mod reset;
pub mod rollup;
pub mod stubs;
pub mod watch;
