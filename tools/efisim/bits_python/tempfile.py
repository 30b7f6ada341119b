# -*- coding: utf-8 -*-
# BITS's tempfile is an empty module (docs/bits-environment.md §2).
