"""What a guest kernel said about a memory error, from its log lines.

The HWPOISON handler has reported its decision the same way since 2009, in
two wordings:
  Linux 2.6.32 (the seeds):  "MCE 0x1234: dirty LRU page recovery: Recovered"
  Linux 5.x/6.x:             "Memory failure: 0x1234: recovery action for
                              dirty LRU page: Recovered"
and the ras:memory_failure_event tracepoint says the same as
  "memory_failure_event: pfn 0x1234: recovery action for dirty LRU page:
   Recovered".
"""
import re

RESULTS = ("Recovered", "Delayed", "Ignored", "Failed")
_RESULT = "(?P<result>Recovered|Delayed|Ignored|Failed)"
_PFN = "(?P<pfn>0x[0-9a-f]+)"

ACTION = re.compile(rf"Memory failure: {_PFN}: recovery action for (?P<type>.+?): {_RESULT}")
ACTION_2009 = re.compile(rf"MCE {_PFN}: (?P<type>.+?) page recovery: {_RESULT}")
TRACE = re.compile(rf"memory_failure_event: pfn {_PFN}: recovery action for (?P<type>.+?): {_RESULT}")
KILL = re.compile(rf"(?:Memory failure: |MCE ){_PFN}: (?:Sending SIGBUS to|Killing) "
                  r"(?P<comm>\S+?):(?P<pid>\d+)(?: early)? due to hardware memory corruption")
# the page-fault path of older kernels, on a page already unmapped
FAULT_KILL = re.compile(r"(?:MCE|Memory failure): Killing (?P<comm>\S+?):(?P<pid>\d+) due to "
                        r"hardware memory corruption fault at (?P<addr>[0-9a-f]+)")
# 6.12 (MF_MSG_ALREADY_POISONED) reports a second error as an action
ALREADY_ACTION = "already poisoned page"
ALREADY = re.compile(rf"(?:Memory failure: |MCE ){_PFN}: already hardware poisoned")
OVERFLOW = re.compile(r"buffer overflow when queuing memory failure at (?P<pfn>0x[0-9a-f]+)")
PANIC = re.compile(r"Kernel panic - not syncing: (?P<why>.*)")
MCE_REPORT = re.compile(r"mce: \[Hardware Error\]: (?P<what>.*)")
# "BUG: ", "WARNING: CPU: 0 PID: 1 at ..."; not "BUG_ON" in a symbol name;
# arm64's oops ("Internal error: synchronous external abort: 0000000096000410
# [#1] SMP", die() in arch/arm64/kernel/traps.c: the kernel read a page a
# host error took away, and the SEA it took in kernel mode is fatal there)
TROUBLE = re.compile(r"(?:^|\] )(?P<what>(?:BUG|WARNING): .*|Internal error: .*)")
# the trouble that is the kernel itself tripping: an oops
OOPS = ("BUG:", "Internal error:")
# a guest starting: on the console of one that has reset, a new boot (the
# kernel's banner, or vmce's own /init, whose kernel logs at loglevel=4)
BOOT = re.compile(r"Linux version (?P<release>\S+) \(|^vmce-guest: (?P<ready>ready)$")
# dmesg lines begin "[   12.345678] "
_STAMP = re.compile(r"^\s*\[\s*\d+\.\d+\]\s*")


def _strip(line):
    return _STAMP.sub("", line.rstrip("\r\n"))


class GuestLog:
    """Everything the lines say about memory errors, per pfn where it applies"""

    def __init__(self, lines=()):
        self.actions = {}       # pfn -> [(type, result)]
        # pfn -> [result] of every "recovery action" line, repeats too; the
        # same line read twice (the console and /dev/kmsg) counts once
        self.results = {}
        self._result_lines = set()
        self.traced = {}        # pfn -> [(type, result)] from the tracepoint
        self.kills = {}         # pfn -> [(comm, pid)]
        self.fault_kills = []   # (comm, pid, address): killed touching a poisoned page
        self.already = set()    # pfns reported as poisoned before
        self.overflows = []     # pfns lost from the memory_failure() queue
        self.panics = []
        self.mce_reports = []
        self.trouble = []       # BUG:/WARNING: lines
        self.boots = []         # "Linux version" banners: a (re)start
        for line in lines:
            self.add(line)

    def add(self, raw):
        line = _strip(raw)
        m = ACTION.search(line) or ACTION_2009.search(line)
        if m:
            kind = m["type"] if m.re is ACTION else m["type"] + " page"
            # the same line, read from the console and from /dev/kmsg (no
            # time stamp there; on the console another program's output may
            # share its line): the same words. A second error on a page
            # says other words ("already ..."), and a burst has its pfns
            key = m.group(0)
            if key not in self._result_lines:
                self._result_lines.add(key)
                self.results.setdefault(int(m["pfn"], 16), []).append(m["result"])
            if kind == ALREADY_ACTION:
                # how later kernels say "already hardware poisoned": the
                # handler's answer about the page is the action before it
                self.already.add(int(m["pfn"], 16))
                return
            self.actions.setdefault(int(m["pfn"], 16), []).append((kind, m["result"]))
            return
        m = TRACE.search(line)
        if m:
            self.traced.setdefault(int(m["pfn"], 16), []).append((m["type"], m["result"]))
            return
        m = KILL.search(line)
        if m:
            self.kills.setdefault(int(m["pfn"], 16), []).append((m["comm"], int(m["pid"])))
            return
        m = FAULT_KILL.search(line)
        if m:
            self.fault_kills.append((m["comm"], int(m["pid"]), int(m["addr"], 16)))
            return
        m = ALREADY.search(line)
        if m:
            self.already.add(int(m["pfn"], 16))
            return
        m = OVERFLOW.search(line)
        if m:
            self.overflows.append(int(m["pfn"], 16))
            return
        m = PANIC.search(line)
        if m:
            self.panics.append(m["why"])
            return
        m = MCE_REPORT.search(line)
        if m:
            self.mce_reports.append(m["what"])
            return
        m = TROUBLE.search(line)
        if m:
            self.trouble.append(m["what"])
            return
        m = BOOT.search(line)
        if m:
            self.boots.append(m["release"] or "vmce's guest")

    def action_for(self, pfn):
        """The handler's last word on @pfn: (page type, result) or None"""
        seen = self.actions.get(pfn) or self.traced.get(pfn)
        return seen[-1] if seen else None

    def killed_pids(self, pfn):
        return sorted({pid for _, pid in self.kills.get(pfn, [])})


def kernel_crash(log):
    """The first sign that the kernel itself tripped: a panic, or a BUG (an
    oops: the kernel read a page the machine-check code had unmapped)"""
    if log.panics:
        return log.panics[0]
    return next((t for t in log.trouble if t.startswith(OOPS)), None)


TAP_RESULT = re.compile(r"^(not )?ok \d+ (.*)$")


def parse_tap(text):
    """A kselftest's TAP 13 output: {"planned", "results": [(ok, what)],
    "bail", "messages"}; a skip stays in what it says ("# SKIP ...")"""
    planned, results, bail, messages = None, [], None, []
    for line in text.splitlines():
        m = TAP_RESULT.match(line)
        if m:
            results.append((m.group(1) is None, m.group(2)))
        elif re.match(r"^1\.\.\d+", line):
            planned = int(line[3:].split()[0]) if line[3:].split() else 0
        elif line.startswith("Bail out!"):
            bail = line[len("Bail out!"):].strip()
        elif line.startswith("# ") and not line.startswith("# Totals"):
            messages.append(line[2:])
    return {"planned": planned, "results": results, "bail": bail, "messages": messages}

