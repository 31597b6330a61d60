"""The guest kernels' names, below both kernels.py and qemus.py.

A kernel and a QEMU can share a spelling (Debian 12's QEMU is debian-7.2;
a Debian kernel 7.2 would be one too): each axis refuses the other's names
as such. kernels.py may read qemus.KNOWN (it is the layer above), but
qemus.py may not import kernels.py, so the kernel names it needs live here;
kernels.py asserts they are its KNOWN.
"""

KERNELS = ("debian-6.1", "vmce-6.1", "debian-6.12", "vmce-6.12", "debian-7.3", "vmce-7.3")
# the Arm64 guest's kernel (arm64.py), which no amd64 guest runs
ARM64_KERNEL = "debian-6.1-arm64"
