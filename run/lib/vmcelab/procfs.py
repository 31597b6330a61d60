"""What /proc says about a process, for the tests and benches."""
import ctypes
import os

PM_PRESENT, PM_SWAP = 1 << 63, 1 << 62
PFN_MASK = (1 << 55) - 1


def thread_states(pid):
    """State letter of every thread of @pid ('t' = stopped by a tracer)."""
    states = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states[int(tid)] = f.read().rsplit(") ", 1)[1][0]
    except OSError:
        pass
    return states


def status_numbers(pid, field):
    """The numbers of a line of /proc/@pid/status (NSpid: the pid in each
    PID namespace, outermost first), or []; @pid may be PID/task/TID"""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(([int(x) for x in line.split()[1:] if x.isdigit()] for line in f
                         if line.startswith(field + ":")), [])
    except OSError:
        return []


def status(pid, field):
    """One number of /proc/@pid/status (VmRSS, RssAnon in kB, PPid, ...), or None"""
    numbers = status_numbers(pid, field)
    return numbers[0] if numbers else None


def alive(pid):
    """@pid runs (a zombie nobody reaps is gone)"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def traced_threads(pid):
    """The threads of @pid that a tracer holds (TracerPid not 0)"""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return [int(t) for t in tids if status(f"{pid}/task/{t}", "TracerPid")]


def cpu_ticks(pid):
    """utime + stime of @pid, in clock ticks"""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_ns(pid):
    """CPU time of all threads of @pid, in ns (schedstat: clock ticks are
    too coarse for a daemon that is idle)"""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def n_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def process_reads(pid, addr):
    """Whether process @pid can read its page at @addr: process_vm_readv,
    which honours the page's protection and fails on a poisoned page
    (unlike /proc/PID/mem, which a debugger uses to read through PROT_NONE)"""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(8)
    local = _Iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = _Iovec(addr & ~0xfff, 8)
    return libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 8


def pagemap_entry(entry):
    """One 64-bit /proc/PID/pagemap entry (Documentation/admin-guide/mm/
    pagemap.rst): present with its pfn (0 to a reader without
    CAP_SYS_ADMIN), or swapped (a hwpoisoned page's entry is a swap entry
    too), or neither"""
    return {"present": bool(entry & PM_PRESENT), "swapped": bool(entry & PM_SWAP),
            "pfn": entry & PFN_MASK if entry & PM_PRESENT else None}


def pagemap_pfn(pid, hva):
    """The pfn process @pid's page table maps @hva to, as root reads it;
    None if the page is not present"""
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        f.seek(hva // 4096 * 8)
        return pagemap_entry(int.from_bytes(f.read(8), "little"))["pfn"]
