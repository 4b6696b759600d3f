//! Exercise `break_even`: how many calls repay the compile time.
