"""BITS's tempfile: an empty module (docs/bits-environment.md section 2.3)."""
