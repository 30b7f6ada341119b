# -*- coding: utf-8 -*-
# BITS's random is an empty module: no random(), randrange(), seed() (docs/bits-environment.md §6).
