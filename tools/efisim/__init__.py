"""efisim: a host stand-in for UEFI firmware with EDK2's network stack, for testing bitsnet.

``firmware`` is the DXE core (boot services, events, handles, pool); the network drivers
model EDK2's NetworkPkg over host sockets on loopback; ``boot_python/`` holds the stand-in
``efi`` and ``_efi`` modules that BITS would provide. See docs/simulator.md.
"""

# bitsnet.install() takes the modules that use socket out of sys.modules so that they are built
# again on bitsnet's; the simulator's drivers run on the host's sockets and must stay as they are.
__bitsnet_keep__ = True
# bitsnet.webrepl traces the user's code but not the firmware's: here the firmware is this package.
__bitsnet_firmware__ = True
