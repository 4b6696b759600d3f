//! Exercise `timer`: a timer in the spirit of `triton.testing.do_bench`.
