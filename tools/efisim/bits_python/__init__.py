"""Stand-ins for the Python modules BITS ships in /boot/python in place of the standard ones.

``tools/efisim/bitsenv.py`` loads these files under their own names (``os``, ``time``, ...)
without putting them in ``sys.modules`` or this directory on ``sys.path``: only the program
run by ``tools/efirun.py`` gets them, the simulator keeps the host's modules. What each one
models is in docs/bits-environment.md section 4 (os), section 5 (time) and section 6 (random); ``signal`` and
``tempfile`` are empty, as BITS's are.
"""
