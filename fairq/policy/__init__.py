"""Pure scheduling rules: no I/O, no clocks, no imports of stores. Every backend applies these."""
