"""vmce guests as libvirt domains: the domain XML (run/libvirt/README.md)."""
import os
import subprocess
from xml.sax.saxutils import quoteattr

from . import paths
from .vm import AGENT_PORTS, DISK_LAYOUT, parse_size


def split_disk(disk, state_dir):
    """The data disk's halves as files of the domain's own: libvirt cannot
    give one image to two drives (QEMU's write lock, one transient overlay
    name per image), and the guest must not write to the shared image"""
    halves = []
    with open(disk, "rb") as src:
        for what, offset, size in DISK_LAYOUT:
            path = os.path.join(state_dir, f"{what}.img")
            src.seek(offset << 20)
            with open(path, "wb") as dst:
                left = size << 20
                while left:
                    block = src.read(min(left, 1 << 20))
                    if block.count(0) == len(block):
                        dst.seek(len(block), os.SEEK_CUR)  # keep it sparse
                    else:
                        dst.write(block)
                    left -= len(block)
                dst.truncate(size << 20)
            halves.append(path)
    return halves


def domain_xml(name, state_dir, mem="512M", cpus=1, accel="tcg", disk=None, mem_file=True,
               hugepages=False, cpu_model="Skylake-Client", append="", qmp_socket=None,
               max_mem=None, vmced_agent_by_libvirt=False):
    """A transient-domain XML for the vmce guest: direct kernel boot, serial
    console to STATE/console.log, the two agent ports as unix sockets in
    STATE (agent.sock for people and tests, vmced-agent.sock for vmced), the
    data disk's two halves, and RAM in a file shared with the host (so that
    a host poisoner can reach it) or in hugepages. qmp_socket: a QMP
    monitor of vmce's own beside libvirt's (for comparisons: libvirt taints
    such a domain as "custom-argv"). max_mem: room for DIMMs hot-plugged
    with virsh attach-device (two slots, one NUMA node as libvirt wants).
    vmced_agent_by_libvirt: vmced's port with no path, which libvirt then
    places in its own channel directory on the host that runs the domain
    (/var/lib/libvirt/qemu/channel/target/...), as an operator's domain has
    it: a path of that host alone."""
    q = quoteattr
    mib = parse_size(mem)
    kernel = paths.require(paths.kernel(), "guest kernel", "run `make kernel`")
    initrd = paths.require(paths.initrd(), "guest image", "run `make image`")
    disk = paths.disk() if disk is None and os.path.exists(paths.disk()) else disk
    if hugepages:
        backing = "<memoryBacking><hugepages><page size='2' unit='MiB'/></hugepages></memoryBacking>"
    elif mem_file:
        backing = "<memoryBacking><source type='file'/><access mode='shared'/></memoryBacking>"
    else:
        backing = ""
    numa = (f"<numa><cell id='0' cpus='0-{cpus - 1}' memory='{mib}' unit='MiB'/></numa>"
            if max_mem else "")
    cpu = (f"<cpu mode='host-passthrough'>{numa}</cpu>" if accel == "kvm"
           else f"<cpu mode='custom' match='exact'><model fallback='forbid'>{cpu_model}</model>{numa}</cpu>")
    max_memory = f"<maxMemory slots='2' unit='MiB'>{parse_size(max_mem)}</maxMemory>" if max_mem else ""
    disks = ""
    for i, half in enumerate(split_disk(disk, state_dir) if disk else ()):
        disks += (f"<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
                  f"<source file={q(half)}/><target dev='vd{'ab'[i]}' bus='virtio'/></disk>")
    channels = "".join(
        f"<channel type='unix'><source mode='bind'"
        + ("" if sock == "vmced-agent.sock" and vmced_agent_by_libvirt else f" path={q(os.path.join(state_dir, sock))}")
        + f"/><target type='virtio' name={q(port)}/></channel>"
        for port, sock in zip(AGENT_PORTS, ("agent.sock", "vmced-agent.sock")))
    cmdline = ("console=ttyS0 loglevel=4 " + append).strip()
    extra = ""
    if qmp_socket:
        extra = ("<qemu:commandline>"
                 f"<qemu:arg value='-qmp'/><qemu:arg value={q(f'unix:{qmp_socket},server=on,wait=off')}/>"
                 "</qemu:commandline>")
    return f"""<domain type={q('kvm' if accel == 'kvm' else 'qemu')} xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  {max_memory}
  <memory unit='MiB'>{mib}</memory>
  <vcpu>{cpus}</vcpu>
  {backing}
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/></features>
  {cpu}
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>preserve</on_crash>
  <devices>
    {disks}
    <serial type='file'><source path={q(os.path.join(state_dir, 'console.log'))}/></serial>
    <console type='file'><source path={q(os.path.join(state_dir, 'console.log'))}/></console>
    {channels}
    <memballoon model='none'/>
  </devices>
  {extra}
</domain>
"""


def image_domain_xml(name, state_dir, image, mem="1G", cpus=1, cpu_model="Skylake-Client", qga=True,
                     direct=False):
    """A transient domain of a guest image (images.Image) as an operator
    defines one: the image's disk (through an overlay of the domain's own,
    so the image stays as built) booted by its own boot loader (@direct:
    the kernel the image carries out, booted directly), a serial console to
    STATE/console.log and, with @qga, the qemu-guest-agent channel libvirt
    connects itself. No channel of vmce's: the campaign reaches the guest
    through qga alone."""
    q = quoteattr
    os.makedirs(state_dir, exist_ok=True)
    overlay = os.path.join(state_dir, "disk.qcow2")
    if os.path.exists(overlay):
        os.unlink(overlay)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", image.disk, "-F", image.format,
                    overlay], check=True, capture_output=True)
    boot = "<boot dev='hd'/>"
    if direct and image.image:
        boot = (f"<kernel>{image.image}</kernel><initrd>{image.initrd}</initrd>"
                f"<cmdline>{image.cmdline or ''}</cmdline>")
    agent = ("<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>"
             if qga else "")
    console = q(os.path.join(state_dir, "console.log"))
    return f"""<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{parse_size(mem)}</memory>
  <vcpu>{cpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    {boot}
  </os>
  <features><acpi/></features>
  <cpu mode='custom' match='exact'><model fallback='forbid'>{cpu_model}</model></cpu>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file={q(overlay)}/><target dev='vda' bus='virtio'/></disk>
    <serial type='file'><source path={console}/></serial>
    <console type='file'><source path={console}/></console>
    {agent}
    <memballoon model='none'/>
  </devices>
</domain>
"""
