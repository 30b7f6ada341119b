"""setuptools glue (the metadata is in setup.cfg): put trampoline.c into the built package.

trampoline.c stays at the top of the repository, where tools/bits_install.py and
tools/bits_build.py read it; the wheel carries a copy as ``bitsnet/trampoline.c`` so that an
installed bitsnet holds everything a BITS build needs (the C part is compiled into BITS's
Python, never by pip: the wheel stays pure Python)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

TRAMPOLINE = "trampoline.c"


class BuildPyWithTrampoline(build_py):
    """build_py, then trampoline.c copied next to the package's modules."""

    def run(self):
        build_py.run(self)
        self.copy_file(TRAMPOLINE, os.path.join(self.build_lib, "bitsnet", TRAMPOLINE))

    def get_outputs(self, include_bytecode=1):
        return build_py.get_outputs(self, include_bytecode) + [os.path.join(self.build_lib, "bitsnet", TRAMPOLINE)]


setup(cmdclass={"build_py": BuildPyWithTrampoline})
