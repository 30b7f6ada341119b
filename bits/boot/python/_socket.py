"""bitsnet drop-in for BITS: ``import _socket`` (and so ``import socket``) gives bitsnet's.

Replaces BITS's own /boot/python/_socket.py. The import returns ``bitsnet._socket`` itself:
``bitsnet.install()`` puts it in ``sys.modules['_socket']``, and Python hands back whatever
``sys.modules`` holds once this file has run. See bits/README.txt.
"""

import bitsnet

bitsnet.install()
