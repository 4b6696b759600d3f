//! One module per subcommand.

pub mod check;
pub mod doctor;
pub mod hint;
pub mod list;
pub mod pack;
pub mod reset;
pub mod rollup;
pub mod watch;
