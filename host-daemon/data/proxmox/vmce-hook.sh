#!/bin/sh
# vmce's hookscript for a Proxmox VE VM (qm set VMID --hookscript
# local:snippets/vmce-hook.sh, after copying this file to
# /var/lib/vz/snippets/). Proxmox calls it as: vmce-hook.sh VMID PHASE.
#
# The VM's args: line gives QEMU a QMP socket of vmced's own, beside
# qemu-server's /var/run/qemu-server/VMID.qmp (QEMU serves one client per
# monitor, so vmced never uses that one):
#   qm set VMID --args '-qmp unix:/run/vmce/qmp/VMID.sock,server=on,wait=off'
# vmced (vmced.conf: [attach] sockets = /run/vmce/qmp/*.sock) attaches as
# the socket appears, and again whenever vmced starts.
set -eu

vmid=$1
phase=$2
# (VMCE_QMP_DIR: e2e-attach runs it on a tree of its own)
dir=${VMCE_QMP_DIR:-/run/vmce/qmp}

case "$phase" in
pre-start)
    # QEMU makes its socket here: the directory must be there first (/run
    # is a tmpfs, empty after a boot); one a crashed QEMU left goes
    mkdir -p -m 0700 "$dir"
    rm -f "$dir/$vmid.sock"
    ;;
post-stop)
    rm -f "$dir/$vmid.sock"
    ;;
esac
exit 0
