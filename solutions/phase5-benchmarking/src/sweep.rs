//! Exercise `sweep`: the MLP eager against compiled over batch sizes, the crossover, an SVG plot.
