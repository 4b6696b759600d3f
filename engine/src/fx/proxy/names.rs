//! The name a trace asks for when it adds a placeholder, kept unformatted: a cached call's trace
//! only compares it with the followed graph's placeholder name, so it never builds the string.

use std::fmt;

use crate::fx::graph::identifier_char;

/// The name requested for a new placeholder; the graph makes it identifier-safe and unique.
#[derive(Clone, Copy, Debug)]
pub(super) enum InputName<'a> {
    /// This name: a named tensor's (`fc1.weight`), `captured`, or a carried value's node name.
    Given(&'a str),
    /// `arg<N>`, for an input with no name of its own that is placeholder number N.
    Arg(usize),
}

impl InputName<'_> {
    /// Whether a graph that was asked for this name named the node `name` (before making it
    /// unique: a graph that had to add a suffix has another placeholder of that name).
    pub fn is(&self, name: &str) -> bool {
        match *self {
            InputName::Given(requested) => same_identifier(name, requested),
            // `arg` and N as `format!` writes it: as many digits as N has rules out a sign and
            // leading zeros.
            InputName::Arg(n) => name
                .strip_prefix("arg")
                .is_some_and(|digits| digits.len() == decimal_digits(n) && digits.parse() == Ok(n)),
        }
    }
}

impl fmt::Display for InputName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputName::Given(name) => f.write_str(name),
            InputName::Arg(n) => write!(f, "arg{n}"),
        }
    }
}

/// How many decimal digits `n` has.
fn decimal_digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Whether `requested`, made identifier-safe the way [`Graph`](crate::fx::Graph) names nodes, is
/// `name`.
fn same_identifier(name: &str, requested: &str) -> bool {
    name.chars().eq(requested.chars().map(identifier_char))
}

#[cfg(test)]
mod tests {
    use super::InputName;

    #[test]
    fn an_arg_name_is_exactly_what_format_writes() {
        for n in [0, 1, 9, 10, 42, 100, 12345] {
            assert!(InputName::Arg(n).is(&format!("arg{n}")));
            assert!(!InputName::Arg(n).is(&format!("arg0{n}")));
            assert!(!InputName::Arg(n).is(&format!("arg+{n}")));
            assert!(!InputName::Arg(n).is(&format!("arg{}", n + 1)));
            assert!(!InputName::Arg(n).is(&format!("arg{n}_1")));
        }
        assert!(!InputName::Arg(0).is("arg"));
        assert!(!InputName::Arg(0).is("x"));
    }

    #[test]
    fn a_given_name_matches_its_identifier_form() {
        assert!(InputName::Given("fc1.weight").is("fc1_weight"));
        assert!(InputName::Given("x").is("x"));
        assert!(!InputName::Given("x").is("x_1"));
        assert!(InputName::Given("w\u{e9}").is("w_"), "one `_` for a character, as the graph writes it");
        assert_eq!(InputName::Given("fc1.weight").to_string(), "fc1.weight");
        assert_eq!(InputName::Arg(3).to_string(), "arg3");
    }
}
