"""The host's own records of a poisoned page, as the host lab's L1 keeps
them, joined with vmced's record of the same error: rasdaemon's row (the
ras:memory_failure_event tracepoint, in its sqlite database, read the way
`ras-mc-ctl --errors` does; vmced's host-page record says what it read
there, ras-lookup.c), and the tracepoint itself in the kernel's trace
buffer. The Debian 13 L1 runs Debian 13's rasdaemon (0.8.3), which records
such a row; the Debian 12 L1 runs Debian 12's (0.6.8), built without
memory-failure support, which records none. The tracepoint is the kernel's
word whatever rasdaemon does."""
import os
import re
import sqlite3
import subprocess
import time

DB = "/var/lib/rasdaemon/ras-mc_event.db"
BINARY = "/usr/sbin/rasdaemon"
LOG = "/tmp/rasdaemon.log"
TRACING = "/sys/kernel/debug/tracing"
EVENT = "events/ras/memory_failure_event/enable"
# include/ras/ras_event.h: "pfn %#lx: recovery action for %s: %s"
RECORDING = re.compile(r"Recording (\S+) events")
TRACE_LINE = re.compile(r"memory_failure_event: pfn (0x[0-9a-f]+): recovery action for (.*): (\w+)$")


def trace_on():
    """The kernel's memory_failure_event in the top trace buffer (rasdaemon
    reads its own instance): None, or why not"""
    try:
        with open(os.path.join(TRACING, EVENT), "w") as f:
            f.write("1")
        return None
    except OSError as e:
        return f"cannot enable ras:memory_failure_event: {e}"


def trace_for_pfn(pfn):
    """The tracepoint's lines for host page @pfn: [{pfn, page_type, action_result}]"""
    try:
        with open(os.path.join(TRACING, "trace"), errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    out = []
    for ln in text.splitlines():
        m = TRACE_LINE.search(ln)
        if m and int(m.group(1), 16) == pfn:
            out.append({"pfn": m.group(1), "page_type": m.group(2), "action_result": m.group(3)})
    return out


def _rows(query, args=(), db=DB):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(query, args)]
    finally:
        con.close()


def version():
    """The rasdaemon L1 runs, as it names itself ("rasdaemon 0.8.3"), or None"""
    try:
        res = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (res.stdout or res.stderr).strip().splitlines()
    return lines[0] if lines else None


def state(timeout=20.0):
    """What L1's rasdaemon records, once it has made its database:
    {"version": its --version, "db": bool, "memory_failure": bool (its
    memory_failure_event table), "recording_memory_failure": bool (its log
    says it records them), "log": the end of the rest of its log}"""
    deadline = time.monotonic() + timeout
    tables = []
    while time.monotonic() < deadline:
        try:
            if os.path.exists(DB):
                tables = [r["name"] for r in _rows("SELECT name FROM sqlite_master WHERE type = 'table'")]
                if tables:
                    break
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    try:
        with open(LOG, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    # 0.8.3 says a line per event it records (dozens): named apart, the
    # rest of its log (what went wrong) kept
    recording = [m.group(1) for m in map(RECORDING.search, lines) if m]
    return {"version": version(), "db": bool(tables), "memory_failure": "memory_failure_event" in tables,
            "recording_memory_failure": "memory_failure_event" in recording,
            "log": [ln for ln in lines if not RECORDING.search(ln)][-8:]}


def row_for_pfn(pfn):
    """rasdaemon's latest row for host page @pfn (its pfn as it writes it,
    "0x%llx"), or None"""
    rows = _rows("SELECT id, timestamp, pfn, page_type, action_result FROM memory_failure_event "
                 "WHERE pfn = ? ORDER BY id DESC LIMIT 1", (f"{pfn:#x}",))
    return rows[0] if rows else None


def db_row(pfn):
    """rasdaemon's row for @pfn, None for none, or {"error": why} where it
    has no table for them"""
    try:
        return row_for_pfn(pfn)
    except sqlite3.Error as err:
        return {"error": str(err)}


def join(records_since, errors, pfn_query, timeout=15.0):
    """vmced's host-page record for each of @errors (memory-error records
    with a host pfn) once it is journaled (vmced waits for rasdaemon's row
    first), beside rasdaemon's own row for that pfn, the tracepoint's line
    and what @pfn_query (vmcectl events --pfn) says: [{seq, vm, gpa,
    host_pfn, host_page, rasdaemon, tracepoint, vmcectl}]. @records_since:
    a function giving the journal's records since the errors"""
    want = {e["seq"]: e for e in errors if isinstance(e.get("host_pfn"), int)}
    deadline = time.monotonic() + timeout
    found = {}
    while want.keys() - found.keys() and time.monotonic() < deadline:
        found = {r["about_seq"]: r for r in records_since() if r.get("type") == "host-page"}
        time.sleep(0.2)
    out = []
    for seq, e in want.items():
        out.append({"seq": seq, "vm": e.get("vm"), "gpa": e.get("gpa"), "host_pfn": e["host_pfn"],
                    "host_pfn_from": e.get("host_pfn_from"), "host_page": found.get(seq),
                    "rasdaemon": db_row(e["host_pfn"]), "tracepoint": trace_for_pfn(e["host_pfn"]),
                    "vmcectl": pfn_query(e["host_pfn"])})
    return out
