"""What /proc says about a process, for the tests and benches."""
import os


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


def status(pid, field):
    """One number of /proc/@pid/status (VmRSS, RssAnon in kB, ...), or None"""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field + ":")), None)
    except OSError:
        return None


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
