"""BITS's random: an empty module, no random(), randrange() or seed() (docs/bits-environment.md section 6)."""
