"""bitsnet drop-in for BITS: ``import select`` gives bitsnet's ``select`` and ``poll``.

Replaces BITS's own /boot/python/select.py; works like the _socket.py next to it.
"""

import bitsnet

bitsnet.install()
