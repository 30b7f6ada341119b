"""BITS's signal: an empty module, no signal() and no SIG* names (docs/bits-environment.md section 8.4)."""
