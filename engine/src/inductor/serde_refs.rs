//! How the parts of a cache entry that point into the process are written and read back: source
//! locations and op names. A [`SourceLocation`] wraps a `&'static Location` that only the compiler
//! makes, so a stored one is its text, read back by finding the location with that text among the
//! nodes of the graph being compiled (every location in the artifact comes from one of them:
//! lowering, decompositions and pattern rewrites all keep their node's location). The key covers
//! every node's location, so a hit always finds them.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::SourceLocation;
use crate::fx::Graph;

thread_local! {
    /// While [`with_locations`] runs on this thread: the graph's locations by their text.
    static LOCATIONS: RefCell<Option<HashMap<String, SourceLocation>>> = const { RefCell::new(None) };
}

/// Runs `read` with the locations of `graph`'s nodes available to the deserializers below.
pub(crate) fn with_locations<R>(graph: &Graph, read: impl FnOnce() -> R) -> R {
    let table = graph.nodes().iter().filter_map(|n| n.location).map(|l| (l.to_string(), l)).collect();
    let outer = LOCATIONS.replace(Some(table));
    let result = read();
    LOCATIONS.set(outer);
    result
}

fn resolve(text: &str) -> Result<SourceLocation, String> {
    LOCATIONS.with_borrow(|table| {
        let table = table.as_ref().ok_or("a source location is read back only against the graph it came from")?;
        table.get(text).copied().ok_or_else(|| format!("the source location {text} is not in the graph"))
    })
}

/// Serde for an optional [`SourceLocation`], as its text.
pub(crate) mod location {
    use super::*;

    /// Writes the location's text.
    pub(crate) fn serialize<S: Serializer>(location: &Option<SourceLocation>, s: S) -> Result<S::Ok, S::Error> {
        location.map(|l| l.to_string()).serialize(s)
    }

    /// Finds the location among the graph's (see [`with_locations`]).
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SourceLocation>, D::Error> {
        Option::<String>::deserialize(d)?.map(|text| resolve(&text)).transpose().map_err(D::Error::custom)
    }

    /// Serde for a [`SourceLocation`] that is always there.
    pub(crate) mod required {
        use super::*;

        /// Writes the location's text.
        pub(crate) fn serialize<S: Serializer>(location: &SourceLocation, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&location.to_string())
        }

        /// Finds the location among the graph's (see [`with_locations`]).
        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SourceLocation, D::Error> {
            resolve(&String::deserialize(d)?).map_err(D::Error::custom)
        }
    }
}

/// Serde for an op's name (`&'static str`, as [`crate::op::Op::name`] gives it).
pub(crate) mod op_name {
    use super::*;

    /// Writes the name.
    pub(crate) fn serialize<S: Serializer>(name: &&'static str, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(name)
    }

    /// Reads a name, interned: each distinct name is leaked once per process, and op names are
    /// few (the catalogue's and the registered custom ops'), so the memory is bounded.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
        let name = String::deserialize(d)?;
        let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        let names = names.get_or_insert_with(HashSet::new);
        Ok(match names.get(name.as_str()) {
            Some(&interned) => interned,
            None => {
                let interned: &'static str = Box::leak(name.into_boxed_str());
                names.insert(interned);
                interned
            }
        })
    }
}
