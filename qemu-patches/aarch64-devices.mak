# The devices vmce-BASE-arm64 is built with (qemu-patches/build --target
# aarch64: --without-default-devices, this file as the target's device
# list). The Arm64 guest needs the virt machine (which selects its GIC, ACPI
# with HEST/GHES, the GED, PL011, pflash and fw_cfg) and the three virtio
# devices run/vm gives it: virtio-serial-pci for its agents, virtio-blk for
# the data disk. The default list also builds every 32- and 64-bit Arm
# board QEMU has (about 600 more files to compile: a third of the build),
# none of which the guest uses.
include minimal.mak
# virt selects ACPI_CXL, whose CEDT builder (hw/acpi/cxl.c) calls
# cxl_fmws_get_all_sorted() from hw/cxl/cxl-host.c, which only CONFIG_CXL
# builds; its stub (cxl-host-stubs.c) lacks it, so without this 10.2.2
# fails to link (a gap in QEMU's own minimal configuration)
CONFIG_CXL=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_SERIAL=y
CONFIG_VIRTIO_BLK=y
