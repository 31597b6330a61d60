"""Is KVM usable here? Found by booting a guest under it, not by looking
for /dev/kvm: some hosts have a /dev/kvm that cannot run a normal guest
(on the machine vmce is developed on it hangs after SeaBIOS)."""
import hashlib
import json
import os

from . import paths, qemus


def _probe_key(qemu):
    parts = [os.uname().release]
    for f in (qemu, paths.kernel(), paths.initrd()):
        try:
            st = os.stat(f)
            parts.append(f"{f}:{st.st_size}:{int(st.st_mtime)}")
        except OSError:
            parts.append(f)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def kvm_usable(qemu=None, timeout=30.0):
    """(usable, reason); the answer is cached in the build directory."""
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    qemu = qemu or qemus.binary()
    cache = os.path.join(paths.build_dir(), "kvm-probe.json")
    key = _probe_key(qemu)
    try:
        with open(cache) as f:
            known = json.load(f)
        if known.get("key") == key:
            return known["usable"], known["reason"]
    except (OSError, ValueError, KeyError):
        pass
    from .vm import Vm  # here: vm imports nothing of ours back
    vm = Vm.start("kvm-probe", accel="kvm", mem="256M", qemu=qemu,
                  state_dir=os.path.join(paths.build_dir(), "kvm-probe"))
    try:
        vm.wait_ready(timeout=timeout)
        usable, reason = True, f"a guest booted under KVM in {vm.ready_seconds:.1f} s"
    except Exception as e:
        first = str(e).splitlines()[0]
        usable, reason = False, f"a guest did not boot under KVM within {timeout:.0f} s ({first})"
    finally:
        vm.stop()
    os.makedirs(paths.build_dir(), exist_ok=True)
    with open(cache, "w") as f:
        json.dump({"key": key, "usable": usable, "reason": reason}, f)
    return usable, reason
