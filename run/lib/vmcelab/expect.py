"""What the guest's HWPOISON handler is expected to do, per case and guest
kernel, and the verdict on what it did.

One table per kernel vmce knows (TABLES: debian-6.1, vmce-6.1, debian-6.12,
vmce-6.12, debian-7.3, vmce-7.3),
each read from that kernel's mm/memory-failure.c and checked against the
guest. Linux 6.1's, the first:
- the page type and result come from identify_page_state(), which names the
  page by its flags *after* unmapping (so an mlocked page, munlocked by the
  unmap, is an "LRU page");
- processes that map the page are signalled at once (BUS_MCEERR_AO to those
  that asked for early kill) only when kill_procs() is told to force it:
  the page was dirty, or could not be unmapped;
- a mapper that touches the page later gets BUS_MCEERR_AR when the unmap
  left a hwpoison entry in its page table; it does not for a page the
  kernel can read again (clean page cache, swap cache);
- a consumed error (SRAR) goes to the process that consumed it as
  BUS_MCEERR_AR, when its access faults again as above;
- a page the handler leaves in use by the kernel is still bad: the next time
  the kernel reads it the guest takes an SRAR in kernel mode and panics.

A host error vmced lets QEMU handle itself (forwarder = qemu) first meets
QEMU: what QEMU does with it comes from the QEMU's BEHAVIOUR (qemus.py,
read from each QEMU's source; qemu_handles() below). Where QEMU forwards
it into the guest, the kernel's table says the rest; where QEMU dies, or
the guest panics on what QEMU injects, that is the expectation.
"""
from collections import namedtuple

from . import qemus
from .outcome import OOPS

# kind/result: the "recovery action for <kind>: <result>" line;
# early: mappers with early kill get BUS_MCEERR_AO; late: a later touch gets
# BUS_MCEERR_AR; lsb: si_addr_lsb; hc_kb: HardwareCorrupted grows by;
# aftermath: what happens when the kernel uses the page again (None: never)
Row = namedtuple("Row", "kind result early late lsb hc_kb aftermath")

LINUX_6_1 = {
    "anon-dirty": Row("dirty LRU page", "Recovered", True, True, 12, 4, None),
    "anon-clean": Row("clean LRU page", "Recovered", False, True, 12, 4, None),
    "pagecache-clean": Row("clean LRU page", "Recovered", False, False, 12, 4, None),
    "pagecache-dirty": Row("dirty LRU page", "Recovered", True, True, 12, 4, None),
    "file-hole": Row("clean LRU page", "Recovered", False, False, 12, 4, None),
    "shmem": Row("dirty LRU page", "Recovered", True, True, 12, 4, None),
    "mlock-clean": Row("clean LRU page", "Recovered", False, False, 12, 4, None),
    "mlock-dirty": Row("dirty LRU page", "Recovered", True, True, 12, 4, None),
    "thp": Row("dirty LRU page", "Recovered", True, True, 12, 4, None),
    "hugetlb": Row("huge page", "Recovered", True, True, 21, 4, None),
    "ksm": Row("unmapping failed page", "Ignored", False, False, 12, 4, "ksm-merge"),
    "swapcache": Row("clean swapcache page", "Recovered", False, False, 12, 4, None),
    "shared": Row("dirty LRU page", "Recovered", True, True, 12, 4, None),
    "free": Row("free buddy page", "Recovered", False, False, 12, 4, None),
    "slab": Row("unknown page", "Ignored", False, False, 12, 4, "in-use"),
    "pagetable": Row("unknown page", "Ignored", False, False, 12, 4, "exit"),
}

# vmce's two fixes, on either base (guest-kernel/patches/BASE/): a KSM page
# recovers and ksmd passes its stable node by instead of reading it; an
# mlocked page is named by the flags saved before unmapping munlocked it
VMCE_FIXES = {
    "ksm": Row("dirty LRU page", "Recovered", True, True, 12, 4, "ksm-merge-lives"),
    "mlock-clean": Row("clean mlocked LRU page", "Recovered", False, False, 12, 4, None),
    "mlock-dirty": Row("dirty mlocked LRU page", "Recovered", True, True, 12, 4, None),
}

# vmce-6.1: Debian's 6.1 with guest-kernel/patches/6.1/ (each patch's message
# says why). Where it differs from Debian's 6.1: 0001-0003 make KSM pages
# recover as in 6.4 (collect_procs_ksm() finds the mappers), 0008 keeps
# ksmd from reading the poisoned page, 0007 names mlocked pages
VMCE_6_1 = dict(LINUX_6_1, **VMCE_FIXES)
VMCE_6_1_NOTES = {
    "ksm": "vmce-6.1 backports 6.4's KSM support (4248d0083ec5 and what it needs): every "
           "process that maps the page is found through KSM's reverse map and signalled, as "
           "for a dirty anonymous page; and its own patch keeps ksmd from reading a poisoned "
           "page still in the stable tree, which Debian's 6.12 still does",
    "mlock-clean": "vmce-6.1 names the page by the flags saved before unmapping, when "
                   "PG_mlocked was still set: an mlocked page",
    "mlock-dirty": "vmce-6.1 names the page by the flags saved before unmapping, when "
                   "PG_mlocked was still set: an mlocked page",
}

# debian-6.12: Debian 13's kernel (6.12.118), read from its mm/memory-failure.c,
# mm/ksm.c and mm/madvise.c. Where it differs from 6.1:
LINUX_6_12 = dict(LINUX_6_1)
LINUX_6_12.update({
    # hwpoison_user_mappings() no longer refuses KSM pages (6.4), and
    # collect_procs() finds a KSM page's mappers through collect_procs_ksm()
    "ksm": Row("dirty LRU page", "Recovered", True, True, 12, 4, "ksm-merge"),
    # a page get_hwpoison_page() cannot take is MF_MSG_GET_HWPOISON now
    "slab": Row("get hwpoison page", "Ignored", False, False, 12, 4, "in-use"),
    "pagetable": Row("get hwpoison page", "Ignored", False, False, 12, 4, "exit"),
})
LINUX_6_12_NOTES = {
    "ksm": "KSM pages recover since 6.4 (4248d0083ec5): every process that maps the page is "
           "found through KSM's reverse map and signalled, as for a dirty anonymous page. "
           "But the page stays in KSM's stable tree, and the next KSM workload with the same "
           "data makes ksmd compare against it: a kernel read of memory that "
           "memory_failure() took out of the direct map, and the guest oopses",
    "slab": "kernel memory cannot be isolated: get_hwpoison_page() refuses a page that is "
            "neither LRU nor movable; 6.12 says so (\"get hwpoison page\")",
    "pagetable": "a page table is kernel memory, refused like slab (\"get hwpoison page\")",
}
# vmce-6.12: Debian 13's 6.12 with guest-kernel/patches/6.12/ (each patch's
# message says why, against 6.12's mm/memory-failure.c and mm/ksm.c). Where
# it differs from Debian's 6.12: the two defects 6.12 still has (0002:
# ksmd parks a hwpoisoned KSM page's stable node; 0001: mlocked pages)
VMCE_6_12 = dict(LINUX_6_12, **VMCE_FIXES)


def _vmce_series_notes(base):
    """What vmce's 0001 and 0002 change on Debian's @base (6.12, 7.3: the
    same two fixes, each written against its base)"""
    mlocked = ("vmce's 0001 names the page by the flags saved before unmapping, when "
               "PG_mlocked was still set: an mlocked page")
    return {
        "ksm": f"as Debian's {base}, every mapper of the KSM page is signalled; vmce's 0002 takes the "
               "hwpoisoned page's node out of KSM's stable tree the first time ksmd meets it, so the "
               "next KSM workload with the same data merges without ksmd reading the page",
        "mlock-clean": mlocked,
        "mlock-dirty": mlocked,
    }


VMCE_6_12_NOTES = _vmce_series_notes("6.12")

# debian-7.3: trixie-backports' kernel (7.3.4), read from linux-source-7.3's
# mm/memory-failure.c, mm/ksm.c and mm/madvise.c, and measured (full.ini,
# simulated errors under TCG: 49 of 49). Where it differs from 6.12:
LINUX_7_3 = dict(LINUX_6_12)
LINUX_7_3.update({
    # get_any_page() names a stable kernel-owned page (is_kernel_owned_page():
    # PG_reserved, slab, page table, large kmalloc) before trying to take it,
    # and memory_failure() reports it as MF_MSG_KERNEL
    "slab": Row("reserved kernel page", "Ignored", False, False, 12, 4, "in-use"),
    "pagetable": Row("reserved kernel page", "Ignored", False, False, 12, 4, "exit"),
})
# Unchanged from 6.12, checked in 7.3's source: the KSM page recovers, but
# ksm.c still has no check that keeps ksmd off a hwpoisoned page in its
# stable tree (stable_tree_search() compares with it through memcmp_pages()),
# so the ksm row's aftermath still ends the guest; identify_page_state()
# still looks at the flags after unmapping first, so an mlocked page is
# still an "LRU page"; madvise_inject_error() still passes MF_ACTION_REQUIRED
LINUX_7_3_NOTES = dict(LINUX_6_12_NOTES)
LINUX_7_3_NOTES.update({
    "slab": "kernel memory cannot be recovered: 7.3's get_any_page() knows a slab page as "
            "kernel-owned (is_kernel_owned_page()) before trying to take it, and says "
            "\"reserved kernel page\" (6.12: \"get hwpoison page\"); with "
            "vm.panic_on_unrecoverable_memory_failure=1 that is a panic",
    "pagetable": "a page table is kernel-owned like slab: \"reserved kernel page\" (6.12: \"get "
                 "hwpoison page\")",
})
# vmce-7.3: trixie-backports' 7.3 source with guest-kernel/patches/7.3/
# (the 6.12 series rewritten against 7.3's mm/memory-failure.c and
# mm/ksm.c: each patch's message says why). Where it differs from Debian's
# 7.3: the same two defects as on 6.12 (0002: ksmd parks a hwpoisoned KSM
# page's stable node, its scan passes the page by; 0001: mlocked pages)
VMCE_7_3 = dict(LINUX_7_3, **VMCE_FIXES)
VMCE_7_3_NOTES = _vmce_series_notes("7.3")

# debian-6.1-arm64: Debian 12's arm64 kernel (the Arm64 guest, arm64.py),
# told of a host error firmware-first: an AO as a GHES record through QEMU
# 10.2's inject-ghes-v2-error, an AR as a synchronous external abort (SEA)
# with its record (vmce's x-vmce-inject-sea). Measured with
# run/campaigns/arm64.ini on vmce-10.2-arm64 (2026-12-07), not assumed to be
# x86's: memory_failure() is the same source, and every page type's
# "recovery action" line, signals, lsb and HardwareCorrupted came out as
# debian-6.1's (the rows below are its). Where the guest differs it is in how
# the arm64 kernel takes an abort on a page the host took away:
# - a kernel read of the page (ksmd comparing a refused KSM page, a process's
#   exit walking a poisoned page table, the GED interrupt thread's own
#   kmalloc() from a poisoned slab page) is an SEA in kernel mode: do_sea()
#   finds no user task to signal and die()s, an oops ("Internal error:
#   synchronous external abort", arch/arm64/kernel/traps.c) of that task,
#   not x86's machine-check panic; the guest runs on, crippled (ksmd gone,
#   "Fixing recursive fault but reboot is needed!") -- the aftermath is an
#   oops (outcome.OOPS), as bad for the guest, and judged so;
# - an AR with no process to consume it (free, slab, pagetable: vmcectl
#   poison --trigger now) is an SEA on the vCPU as it is, in the idle task:
#   die() there panics ("Attempted to kill the idle task!"), elsewhere it is
#   an oops of the task that ran -- ARM64_KERNEL_AR;
# - the SEA's memory_failure() runs in a kworker (ghes.c's
#   ghes_do_memory_failure() -> memory_failure_queue(), flags 0: no
#   MF_ACTION_REQUIRED); the consumer retrying its load meets the hwpoison
#   entry try_to_unmap() left and faults BUS_MCEERR_AR (seen in all 7 dirty
#   page types here, with early kill too: x86's outcome), or, when
#   kill_procs() is first, gets BUS_MCEERR_AO with the other early-kill
#   mappers (e2e-arm64's vmce-victim sees that): SEA_QUEUED's alternative.
ARM64 = "debian-6.1-arm64"
LINUX_6_1_ARM64 = dict(LINUX_6_1)
ARM64_NOTES = {
    "ksm": "6.1 refuses the KSM page (\"can't handle KSM pages\"), as on x86, and leaves it mapped and in "
           "the stable tree. Untouched (an AO, early kill), ksmd's next comparison with it is a kernel read of "
           "the page the host took: on arm64 an SEA in kernel mode, and ksmd oopses (\"Internal error: "
           "synchronous external abort\"), where x86 panics. Touched (late kill's touch, an AR's "
           "consumption), the load is an SEA in user mode (\"already hardware poisoned\") and vmced, under "
           "TCG, gives the page back so that the load completes: nothing is left to fault on, and the next "
           "KSM workload merges with the guest living on (ARM64_KSM_TOUCHED)",
    "pagetable": "a page table is kernel memory, refused like slab; when its process exits, the kernel "
                 "reads it: on arm64 an SEA in kernel mode, and the exiting task oopses (\"Internal error: "
                 "synchronous external abort\", then \"Fixing recursive fault but reboot is needed!\"), "
                 "where x86 panics",
}
SEA_QUEUED = {ARM64}
# the KSM page touched before ksmd compares against it: the next KSM
# workload merges and the guest lives on (ARM64_NOTES["ksm"])
ARM64_KSM_TOUCHED = "ksm-merge-given-back"
SEA_QUEUED_WHY = ("the SEA's memory_failure() runs in a kworker without MF_ACTION_REQUIRED (ghes.c's "
                  "memory_failure_queue()): its kill_procs() signalled the consumer BUS_MCEERR_AO with the other "
                  "early-kill mappers before the consumer's retried load met the hwpoison entry")
ARM64_KERNEL_AR = {
    ARM64: "an AR with no process to consume it is an SEA on the vCPU as it is (vmcectl poison --trigger "
           "now), in the kernel: the arm64 kernel's do_sea() die()s, an oops (\"Internal error: synchronous "
           "external abort\") of whatever the vCPU ran: mostly the idle task, where die() panics (\"Attempted "
           "to kill the idle task!\"), or an interrupt (\"Fatal exception in interrupt\"), or now and then "
           "a task, which it kills (seen: vmce-agent)",
}
# Outcomes the arm64 kernel gives now and then instead of its row's:
# (table, page, kind) -> why; the guest's own kernel read the page first
OOPS_FIRST = {
    (ARM64, "slab", "ao"): "the GHES record comes through the GED interrupt thread (irq/NN-ACPI:Ged), whose "
                           "own kmalloc() can read the poisoned slab page before memory_failure() runs: an SEA "
                           "in kernel mode, and that thread oopses (\"Internal error: synchronous external "
                           "abort\" in ___slab_alloc): no \"recovery action\" line (seen once in two)",
}

# The series' kernel selftests, run in the guest as they are (page =
# ksm-scan: tools/testing/selftests/mm/ksm_hwpoison.c of the 6.12 series):
# table -> (the tests that show the defect, why): on a kernel with the
# defect one or both fail (which, depends on how far ksmd got with the
# unmapped page's rmap_items: seen, always the one named first), on one
# without it none may. The selftest poisons with
# MADV_HWPOISON and with hwpoison-inject's corrupt-pfn: injected errors,
# which never fault when ksmd reads the page. What ksmd does next shows
# whether it read it: it chains the new KSM page with the hwpoisoned one
# (stable_node_chains grows), or merges the new pages into it. With a
# host error (the ksm row) the same read is a machine check in ksmd.
KSM_SCAN_CHAIN = "no stable node chain is formed with the hwpoisoned KSM page"
KSM_SCAN_MERGE = "no page is merged into the hwpoisoned KSM page"
SELFTESTS = {
    "ksm-scan": {
        "debian-6.1": ({KSM_SCAN_MERGE, KSM_SCAN_CHAIN},
                       "6.1 refuses the KSM page (\"unmapping failed\"): it stays mapped and in the "
                       "stable tree with its rmap_items, and ksmd merges the new pages into it"),
        "vmce-6.1": (set(), "vmce's 6.1 backport of the fix (0008) keeps ksmd away from the page"),
        # the same source as debian-6.1's, built for arm64 (run/campaigns/arm64.ini)
        "debian-6.1-arm64": ({KSM_SCAN_MERGE, KSM_SCAN_CHAIN},
                             "as debian-6.1 (the same mm/ksm.c and mm/memory-failure.c, built for arm64): 6.1 "
                             "refuses the KSM page (\"unmapping failed\"): it stays mapped and in the stable "
                             "tree with its rmap_items, and ksmd merges the new pages into it"),
        "debian-6.12": ({KSM_SCAN_CHAIN, KSM_SCAN_MERGE},
                        "6.12 unmaps the KSM page but leaves it in the stable tree: ksmd compares the "
                        "new pages with it (memcmp_pages()) and chains the new KSM page with it; "
                        "with a real error that read panics the guest (the ksm row's aftermath)"),
        "debian-7.3": ({KSM_SCAN_CHAIN, KSM_SCAN_MERGE},
                       "as 6.12: 7.3's mm/ksm.c still leaves the unmapped KSM page in the stable tree "
                       "and compares the new pages with it (memcmp_pages()); the new KSM page is "
                       "chained with it"),
        "vmce-6.12": (set(), "vmce's 0002 parks the hwpoisoned page's stable node the first time "
                             "ksmd meets it: nothing compares with it again"),
        "vmce-7.3": (set(), "vmce's 0002, rewritten for 7.3, parks the hwpoisoned page's stable node "
                            "the first time ksmd meets it: nothing compares with it again"),
    },
}
SELFTEST_PROGRAMS = {"ksm-scan": "ksm_hwpoison"}

# Outcomes a kernel gives now and then for a case instead of its row's,
# each explained; (table, page, kill) -> (why, Row)
ALTERNATIVES = {
    ("debian-6.1", "ksm", "late"): (
        "6.1 leaves the refused KSM page mapped, and a touch normally reads it (the host's "
        "simulated error keeps its contents); in about four full-matrix runs of ten here one "
        "mapper's page-table entry is gone by then (cause not found yet), its fault finds the "
        "page HWPoison and it is killed with BUS_MCEERR_AR, and the second KSM workload then "
        "merges without the guest going down",
        Row("unmapping failed page", "Ignored", False, True, 12, 4, None)),
}
# The same with a real host error where the host page stays poisoned (L1's
# memory_failure() under KVM L2: vmced replaces no page under KVM): every
# guest read of the page is a new consumed error, so each mapper that
# touches the page the guest left mapped gets BUS_MCEERR_AR (seen in the
# host lab: both mappers). Under TCG vmced replaces the page at the first
# AR (the vCPU's load must complete), and the others read zeros: one-ar.
ALTERNATIVES_REAL = {
    ("debian-6.1", "ksm", "late"): (
        "with a real host error the host page stays poisoned under KVM (vmced replaces no page "
        "there): every mapper's touch of the page 6.1 left mapped is a consumed error of its own, "
        "and each is killed with BUS_MCEERR_AR",
        Row("unmapping failed page", "Ignored", False, True, 12, 4, None)),
}

# A kernel without the HWPOISON handler: no CONFIG_MEMORY_FAILURE, or no
# CONFIG_X86_MCE (Debian 12's cloud kernel, 6.1.0-*-cloud-amd64, has
# neither). It never sets CR4.MCE, and a machine check delivered to a CPU
# without CR4.MCE is a shutdown, which a VM takes as a triple fault: QEMU
# resets the machine (TCG: do_inject_x86_mce() raises the triple fault
# itself; KVM: kvm_vcpu_ioctl_x86_set_mce() asks for one). Whatever the
# page and whichever kind, a host error the guest is told of resets it.
NO_HANDLER = "no-handler"
# vmce's series (inject-mce, qemu-patches/ 0001) drops a machine check the
# guest cannot take instead of resetting it, and MEMORY_FAILURE says "ignore"
NO_HANDLER_DROPPED_NOTE = ("this kernel has no HWPOISON handler and never enables machine checks (CR4.MCE); "
                           "vmce's inject-mce drops a machine check such a guest cannot take rather than "
                           "reset it (MEMORY_FAILURE action \"ignore\"): the guest lives on and nobody is told")
# an AMD guest with SUCCOR is told of an AO as a deferred error (vmced's
# and QEMU 9.1's AMD encoding, 0x9C00180000000000: not UC), which raises no
# machine check: a kernel without the handler never polls its banks
NO_HANDLER_DEFERRED_NOTE = ("this kernel has no HWPOISON handler and no machine check device; an AMD guest "
                            "is told of an AO as a deferred error, which raises no machine check and waits "
                            "in its bank for a poll that never comes: the guest lives on and nobody is told")
NO_HANDLER_NOTE = ("this kernel has no HWPOISON handler (no CONFIG_MEMORY_FAILURE / CONFIG_X86_MCE): "
                   "it never enables machine checks (CR4.MCE), and a machine check into a CPU "
                   "without them is a triple fault: the VM resets")

# kernels with vm.panic_on_unrecoverable_memory_failure (Linux 7.3's
# mm/memory-failure.c): set to 1, action_result() panics on what it reports
# as MF_MSG_KERNEL ("reserved kernel page") with MF_IGNORED, and on nothing
# else. A case that sets it is not applicable on a kernel without it.
PANIC_ON_UNRECOVERABLE = {"debian-7.3", "vmce-7.3"}
UNRECOVERABLE = ("reserved kernel page", "Ignored")
NOT_APPLICABLE = "not-applicable"
# the verdicts a run ends well with: a case not applicable to a kernel is said, not failed
JUDGED_OK = ("pass", "not applicable")

# kernels whose MADV_HWPOISON is an action-required error for the process
# that asks (madvise_inject_error() passes MF_ACTION_REQUIRED): it gets
# BUS_MCEERR_AR as if it had consumed the page, others early kill as usual
MADVISE_IS_AR = {"debian-6.12", "vmce-6.12", "debian-7.3", "vmce-7.3"}

# how the aftermath is brought about, and what is expected of it
AFTERMATH = {
    "ksm-merge": "a second KSM workload with the same data makes ksmd compare against the "
                 "poisoned page (memcmp in kernel mode): the guest panics (or, once a user "
                 "access has had the page unmapped from the kernel's direct map, ksmd oopses)",
    "exit": "the workload exits, the kernel reads the poisoned page table to unmap its "
            "memory: the guest panics",
    "in-use": "the slab page stays in the kernel's use: the guest is rebooted before the next "
              "case rather than wait for a panic",
    "ksm-merge-given-back": "a second KSM workload with the same data merges: the page was touched, and "
                            "vmced gave it back (TCG) so that the load completed; ksmd's comparison with "
                            "it reads, and the guest lives on",
    "ksm-merge-lives": "a second KSM workload with the same data makes ksmd look for it in its "
                       "stable tree, where the poisoned page was: ksmd passes it by, merges the "
                       "new pages among themselves, and the guest lives on",
}
# a second KSM workload, waited for until merged: the guest must live on
MERGE_LIVES = ("ksm-merge-lives", "ksm-merge-given-back")
# the aftermaths that leave the guest unusable
ENDING = ("ksm-merge", "exit", "in-use")

# why, where the kernel's behaviour is not obvious
NOTES = {
    "anon-clean": "MADV_FREE made it clean: nobody is signalled at once, but its page-table "
                  "entry is now a hwpoison entry, so a touch gets BUS_MCEERR_AR",
    "pagecache-clean": "dropped from the page cache and read again from disk: nobody signalled",
    "pagecache-dirty": "the data is lost: mapping_set_error() makes the writer's next fsync "
                       "return EIO",
    "file-hole": "a hole's page cache page holds zeros the kernel can make again",
    "mlock-clean": "named by the page's flags after unmapping, and unmapping munlocks it "
                   "(page_remove_rmap() clears PG_mlocked): an LRU page, not an mlocked one",
    "mlock-dirty": "named by the page's flags after unmapping, and unmapping munlocks it "
                   "(page_remove_rmap() clears PG_mlocked): an LRU page, not an mlocked one",
    "hugetlb": "the 2 MiB page is isolated whole and its mappers get si_addr_lsb 21, but "
               "HardwareCorrupted counts the one raw page that failed (action_result())",
    "ksm": "Linux 6.1 refuses KSM pages (\"can't handle KSM pages\"): nobody is signalled "
           "and the page stays in KSM's stable tree",
    "swapcache": "a clean swap cache page is dropped; its mappers fault it in from swap again",
    "free": "taken off the buddy allocator: nothing to signal",
    "slab": "kernel memory cannot be isolated: get_hwpoison_page() refuses a page that is "
            "neither LRU nor movable, and the handler gives up",
    "pagetable": "a page table is kernel memory, refused like slab",
}


# What QEMU does by itself with a host error vmced passes on to it
# (forwarder = qemu). Each: (what, why), what one of
QEMU_FORWARDS = "forwards"  # into the guest, as vmced would: the kernel's table says the rest
QEMU_DIES = "dies"  # the whole VM goes
QEMU_GUEST_PANICS = "guest-panics"  # it injects what the guest cannot recover from

# the host's CPU vendor, for KVM (kvm_amd strips MCG_SER_P from every guest)
INTEL, AMD = "GenuineIntel", "AuthenticAMD"


def qemu_handles(forwarder, accel, cpu_flags, behaviour, host_vendor):
    """(what, why): what QEMU does with a host memory error vmced lets it
    handle, given the case's forwarder, its guest's accelerator and -cpu
    flags (the features asked for, qemus.cpu_features()), the QEMU's
    BEHAVIOUR entry and, for KVM, the host's CPU vendor. None when vmced
    forwards it (forwarder = vmced), or nothing is written down for it"""
    if forwarder != "qemu":
        return None
    if accel == "tcg":
        if behaviour["tcg_sigbus"] == "abort":
            return (QEMU_DIES, "under TCG, QEMU's sigbus_handler() takes the KVM path "
                               "(kvm_on_sigbus()), which has no KVM state to work with: a found "
                               "error (AO, on the main thread) makes QEMU abort; a consumed one (AR) "
                               "comes to a vCPU thread that blocks SIGBUS, which the kernel forces at "
                               "its default action: QEMU is killed by SIGBUS")
        return (QEMU_FORWARDS, "under TCG, QEMU forwards it into the guest itself, as it does under KVM "
                               "(qemu-patches/ 0005): the guest kernel's handler does the rest")
    if host_vendor == INTEL:
        return (QEMU_FORWARDS, "under KVM on an Intel host, QEMU injects the machine check itself "
                               "(kvm_arch_on_sigbus_vcpu()): the guest kernel's handler does the rest")
    if host_vendor == AMD:
        if behaviour["amd_kvm"] == "recover" and "succor" in cpu_flags:
            return (QEMU_FORWARDS, "under KVM on an AMD host, QEMU injects AMD encodings into a guest "
                                   "with SUCCOR (-cpu ...,succor=on): the guest kernel's handler does the rest")
        why = ("this QEMU has no SUCCOR and injects Intel-style" if behaviour["amd_kvm"] == "panic"
               else "the guest's CPU has no SUCCOR (-cpu ...,succor=on), so QEMU injects Intel-style")
        return (QEMU_GUEST_PANICS, "under KVM on an AMD host, kvm_amd strips MCG_SER_P from every guest "
                                   f"and {why}: the guest cannot recover and panics")
    return None


class Expectation:
    def __init__(self, case, action, signals, lsb, hc_kb, guest="alive", fsync_eio=None,
                 reread_ok=None, note=None, aftermath=None, others_ao=True):
        self.action, self.signals, self.lsb, self.hc_kb = action, signals, lsb, hc_kb
        self.guest, self.fsync_eio, self.reread_ok, self.note = guest, fsync_eio, reread_ok, note
        # with a consumed error: do the other mappers hear of it early
        self.case, self.aftermath, self.others_ao = case, aftermath, others_ao
        # which kernel's table this comes from; nearest: the case's kernel is
        # not one vmce knows, and this is the closest known one's
        self.table, self.nearest = "debian-6.1", False
        # (why, Expectation): another outcome this kernel is known to give
        # for the case, checked as strictly when the first is not met
        # [(why, Expectation)]: other outcomes the kernel gives, tried in turn
        self.alternatives = []
        # what QEMU does by itself (qemu_handles()), None where vmced
        # forwards; the QEMU behaviour judged by, and whether that is only
        # the nearest known QEMU's
        self.qemu = None
        self.qemu_table, self.qemu_nearest = None, False
        # a selftest's case (SELFTESTS): (program, the tests expected to fail)
        self.selftest = None

    @property
    def summary(self):
        if self.selftest:
            program, failing = self.selftest
            return (f"the selftest {program}: every test passes" if not failing else
                    f"the selftest {program}: one or both of " + "; ".join(sorted(failing))
                    + " fail; the rest pass")
        if self.guest == "reset":
            return "the VM resets: a machine check into a guest without a handler is a triple fault"
        if self.guest == "dropped":
            return "QEMU drops the machine check (MEMORY_FAILURE ignore): the guest lives on, nobody told"
        if self.guest == "refused":
            return ("vmced refuses it (this QEMU cannot tell an Arm64 guest): the guest is told nothing"
                    + ("; the VM is paused" if self.case.kind == "ar" else ""))
        if self.guest == "untold":
            return "an AMD deferred error raises no machine check: the guest lives on, nobody told"
        if self.guest == "qemu-died":
            return f"QEMU dies ({self.qemu_table} under TCG)"
        if self.guest == NOT_APPLICABLE:
            return f"not applicable: {self.note}"
        if self.guest == "panic" and self.qemu:
            return f"the guest panics on what QEMU ({self.qemu_table}) injects"
        if self.guest == "panic" and self.action:
            return (f"{self.action[0]}: {self.action[1]}; then the guest panics "
                    "(vm.panic_on_unrecoverable_memory_failure=1)")
        if self.guest == "panic" and getattr(self.case, "recovery", 1):
            return f"the guest panics: {self.note}"
        if self.guest == "panic":
            return "the guest panics (memory_failure_recovery=0)"
        if self.guest == "oops":
            return f"the guest kernel oopses: {self.note}"
        parts = [f"QEMU ({self.qemu_table}) forwards it itself"] if self.qemu else []
        parts += [f"{self.action[0]}: {self.action[1]}"] if self.action else []
        parts.append({"ao": "every mapper gets BUS_MCEERR_AO at its own VA",
                      "touch": "no signal until a mapper touches it: then BUS_MCEERR_AR",
                      "ar": "the consumer gets BUS_MCEERR_AR at its own VA",
                      "none": "nobody signalled",
                      "one-ar": "one mapper gets BUS_MCEERR_AR at its own VA as it touches the page"}[self.signals])
        if self.lsb != 12 and self.signals != "none":
            parts.append(f"si_addr_lsb {self.lsb}")
        if self.fsync_eio:
            parts.append("fsync returns EIO")
        if self.reread_ok:
            parts.append("the data reads back right")
        if self.hc_kb:
            parts.append(f"HardwareCorrupted +{self.hc_kb} kB")
        if self.aftermath in ("ksm-merge", "exit") + MERGE_LIVES:
            parts.append(f"then {AFTERMATH[self.aftermath]}")
        return "; ".join(parts)

    def wanted_signals(self, workload):
        """pid -> the si_code each of @workload's processes should get (4 AR,
        5 AO); processes not listed should get none"""
        pids = workload.get("pids") or [workload.get("pid")]
        if self.signals == "none":
            return {}
        if self.signals == "ar":
            # the consumer (the workload's first process touches the page);
            # the other mappers hear of it early, or not at all
            early = self.case.kill in ("early", "prctl-early")
            return {pid: 4 if pid == workload.get("pid") else 5 for pid in pids
                    if pid == workload.get("pid") or (early and self.others_ao)}
        return {pid: {"ao": 5, "touch": 4}[self.signals] for pid in pids}

    def to_dict(self):
        return dict(action=self.action, signals=self.signals, lsb=self.lsb, hc_kb=self.hc_kb,
                    guest=self.guest, fsync_eio=self.fsync_eio, reread_ok=self.reread_ok,
                    note=self.note, aftermath=self.aftermath, summary=self.summary,
                    table=self.table, nearest=self.nearest, qemu=self.qemu[0] if self.qemu else None,
                    qemu_table=self.qemu_table, qemu_nearest=self.qemu_nearest,
                    selftest=[self.selftest[0], sorted(self.selftest[1])] if self.selftest else None)


# every known kernel's table and notes (a note not given is the 6.1 one)
TABLES = {"debian-6.1": LINUX_6_1, "vmce-6.1": VMCE_6_1, "debian-6.12": LINUX_6_12,
          "vmce-6.12": VMCE_6_12, "debian-7.3": LINUX_7_3, "vmce-7.3": VMCE_7_3, ARM64: LINUX_6_1_ARM64}
TABLE_NOTES = {"debian-6.1": NOTES, "vmce-6.1": {**NOTES, **VMCE_6_1_NOTES},
               "debian-6.12": {**NOTES, **LINUX_6_12_NOTES}, "vmce-6.12": {**NOTES, **LINUX_6_12_NOTES,
                                                                           **VMCE_6_12_NOTES},
               "debian-7.3": {**NOTES, **LINUX_7_3_NOTES},
               "vmce-7.3": {**NOTES, **LINUX_7_3_NOTES, **VMCE_7_3_NOTES},
               ARM64: {**NOTES, **ARM64_NOTES}}


def table_of(case):
    """(table name, nearest): the expectations @case is judged by, and
    whether they are only the nearest known kernel's"""
    info = getattr(case, "kernel_info", None)
    if info is None:
        return "debian-6.1", False
    return info.table, bool(info.nearest)


def qemu_of(case):
    """(behaviour, table, nearest) of @case's QEMU (qemus.Qemu): what it
    does by itself, the known QEMU that says so, and whether that is only
    the nearest one; Debian's 7.2 for a case made without a QEMU"""
    info = getattr(case, "qemu_info", None)
    if info is None:
        return qemus.BEHAVIOUR[qemus.DEFAULT], qemus.DEFAULT, False
    return info.behaviour, info.table, bool(info.nearest)


_vendor = []


def host_vendor():
    """This host's CPU vendor (/proc/cpuinfo), asked once"""
    if not _vendor:
        try:
            with open("/proc/cpuinfo") as f:
                _vendor.append(next((line.split(":", 1)[1].strip() for line in f
                                     if line.startswith("vendor_id")), None))
        except OSError:
            _vendor.append(None)
    return _vendor[0]


def expectation(case, vendor=None):
    """What happens for @case: what QEMU does by itself, where vmced lets it
    (forwarder = qemu), and what the case's guest kernel does; None where
    nothing is written down. @vendor: the host's CPU vendor (default: this
    host's), which matters to QEMU's own forwarding under KVM only"""
    exp = _kernel_expectation(case)
    forwarder = getattr(case, "forwarder", "vmced")
    if forwarder != "qemu" or exp is None:
        return exp
    behaviour, qtable, qnearest = qemu_of(case)
    if case.accel == "kvm" and vendor is None:
        vendor = host_vendor()
    handled = qemu_handles(forwarder, case.accel, qemus.cpu_features(case.cpu), behaviour, vendor)
    if handled is None:
        return None
    what, why = handled
    if what == QEMU_FORWARDS:
        exp.note = why + (f"; {exp.note}" if exp.note else "")
    else:
        # the guest kernel's handler never gets to it: no kernel table is
        # judged by, the nearest or not
        guest = "qemu-died" if what == QEMU_DIES else "panic"
        table = exp.table
        exp = Expectation(case, None, "none", exp.lsb, None, guest=guest, note=why)
        exp.table = table
    exp.qemu, exp.qemu_table, exp.qemu_nearest = handled, qtable, qnearest
    return exp


def _amd_deferred(case):
    """Whether @case's AO reaches its guest as an AMD deferred error: an AMD
    CPU with SUCCOR gets AMD's encodings (vmced's mce-encode.c; QEMU 9.1 and
    later by itself)"""
    cpu = getattr(case, "cpu", None) or ""
    return case.kind == "ao" and qemus.amd_cpu(cpu) and "succor" in qemus.cpu_features(cpu)


def _kernel_expectation(case):
    """What the case's guest kernel does for @case, or None where nothing is
    written down"""
    table, nearest = table_of(case)
    if getattr(case, "panic_on_unrecoverable", 0) and table not in PANIC_ON_UNRECOVERABLE:
        exp = Expectation(case, None, "none", 12, None, guest=NOT_APPLICABLE,
                          note=f"{table} has no vm.panic_on_unrecoverable_memory_failure (Linux 7.3's "
                               "mm/memory-failure.c has it): nothing is run")
        exp.table, exp.nearest = table, nearest
        return exp
    if table == NO_HANDLER:
        # the guest's own injection needs the handler it does not have
        if not case.host_side:
            return None
        qemu = getattr(case, "qemu_info", None)
        if qemu is not None and qemu.has("inject-mce"):
            exp = Expectation(case, None, "none", 12, None, guest="dropped", note=NO_HANDLER_DROPPED_NOTE)
        elif _amd_deferred(case):
            exp = Expectation(case, None, "none", 12, None, guest="untold", note=NO_HANDLER_DEFERRED_NOTE)
        else:
            exp = Expectation(case, None, "none", 12, None, guest="reset", note=NO_HANDLER_NOTE)
        exp.table = table
        return exp
    refused = _refused(case)
    if refused is not None:
        refused.table, refused.nearest = table, nearest
        return refused
    if case.page in SELFTESTS:
        failing, why = SELFTESTS[case.page][table]
        exp = Expectation(case, None, "none", 12, None, note=why)
        exp.selftest = (SELFTEST_PROGRAMS[case.page], failing)
        exp.table, exp.nearest = table, nearest
        return exp
    exp = _expectation(case, TABLES[table], TABLE_NOTES[table], table in MADVISE_IS_AR, table == ARM64)
    if exp is not None:
        exp.table, exp.nearest = table, nearest
        key = (table, case.page, case.kill)
        if case.host_side and case.kind == "ao" and case.recovery == 1:
            # one of the mappers, at its own VA; with a real error under
            # KVM, every mapper that touches
            known = [(ALTERNATIVES, "one-ar")] + ([(ALTERNATIVES_REAL, "touch")] if case.inject == "host-real"
                                                   else [])
            for alts, signals in known:
                if key not in alts:
                    continue
                why, row = alts[key]
                other = _expectation(case, {case.page: row}, {}, False)
                other.table, other.nearest, other.others_ao = table, nearest, False
                other.signals = signals
                exp.alternatives.append((why, other))
        _arm64_alternatives(case, exp, table, nearest)
    return exp


def _arm64_alternatives(case, exp, table, nearest):
    """The other outcomes the arm64 kernel gives (SEA_QUEUED, OOPS_FIRST)"""
    if not case.host_side or case.recovery != 1:
        return
    if table in SEA_QUEUED and case.kind == "ar" and exp.signals == "ar" and exp.others_ao \
            and case.kill in ("early", "prctl-early"):
        other = _expectation(case, TABLES[table], {}, False)
        other.table, other.nearest, other.signals = table, nearest, "ao"
        exp.alternatives.append((SEA_QUEUED_WHY, other))
    why = OOPS_FIRST.get((table, case.page, case.kind))
    if why:
        other = Expectation(case, None, "none", exp.lsb, None, guest="oops", note=why)
        other.table, other.nearest = table, nearest
        exp.alternatives.append((why, other))


def _refused(case):
    """An Arm64 guest's host error its QEMU has no way to tell (an ArmQemu
    without inject-ghes-v2-error for an AO, x-vmce-inject-sea for an AR):
    vmced refuses it, and the guest is told nothing"""
    tells = getattr(getattr(case, "qemu_info", None), "tells", None)
    if not case.host_side or tells is None or tells(case.kind):
        return None
    what = "x-vmce-inject-sea (vmce's, vmce-10.2-arm64)" if case.kind == "ar" else \
        "inject-ghes-v2-error (QEMU 10.2)"
    # an AR's vCPU would load from the page again and again: vmced pauses
    # the VM (measured: debian-7.2-arm64, the guest answers no more)
    return Expectation(case, None, "none", 12, None, guest="refused",
                       note=f"QEMU {case.qemu_info.label} has no {what}: vmced refuses the error in one line "
                            "and the guest is told nothing" + ("; the VM is paused, as the vCPU that consumed "
                                                               "it would fault on the page again and again"
                                                               if case.kind == "ar" else ""))


def _expectation(case, rows, notes, madvise_is_ar=False, arm64=False):
    row = rows.get(case.page)
    if row is None:
        return None
    if case.recovery == 0:
        return Expectation(case, None, "none", row.lsb, None, guest="panic",
                           note="vm.memory_failure_recovery=0 makes memory_failure() panic")
    if getattr(case, "panic_on_unrecoverable", 0) and (row.kind, row.result) == UNRECOVERABLE:
        # any other outcome is the row's as ever: the sysctl asks nothing of it
        return Expectation(case, (row.kind, row.result), "none", row.lsb, row.hc_kb * case.burst,
                           guest="panic", note="vm.panic_on_unrecoverable_memory_failure=1: action_result() "
                                               "panics on a \"reserved kernel page\" it ignored")
    if arm64 and case.kind == "ar" and case.host_side and case.page in ("free", "slab", "pagetable"):
        return Expectation(case, None, "none", row.lsb, None, guest="oops", note=ARM64_KERNEL_AR[ARM64])
    early = case.kill in ("early", "prctl-early")
    if case.kind == "ar" and case.host_side:
        signals = "ar" if row.late else ("ao" if row.early and early else "none")
    elif case.inject == "guest-madvise" and madvise_is_ar:
        # kill_procs() signals at once only where it must (a dirty page)
        signals = "ar" if row.early else "none"
    elif early:
        signals = "ao" if row.early else "none"
    else:
        signals = "touch" if row.late else "none"
    # only host-side errors leave a page that is bad to read (guest-side
    # injection marks a page, the memory behind it is fine)
    aftermath = row.aftermath if case.host_side else None
    if arm64 and case.page == "ksm" and aftermath and (case.kind == "ar" or not early):
        aftermath = ARM64_KSM_TOUCHED
    # the writer can fsync only if it is alive: an AO is advice it survives,
    # an AR on its own page ends it
    fsync = case.page == "pagecache-dirty" and signals != "ar"
    return Expectation(case, (row.kind, row.result), signals, row.lsb, row.hc_kb * case.burst,
                       fsync_eio=True if fsync else None,
                       reread_ok=True if case.page == "pagecache-clean" else None,
                       note=notes.get(case.page), aftermath=aftermath, others_ao=row.early)


def _signal_problems(exp, workloads, signals):
    if exp.signals == "one-ar":
        return _one_ar_problems(workloads, signals)
    problems = []
    for w in workloads:
        va = int(w["va"], 16) if w.get("va") else None
        for pid, want in exp.wanted_signals(w).items():
            got = [s for s in signals if s.get("pid") == pid]
            if not got:
                problems.append(f"process {pid} got no SIGBUS")
                continue
            s = got[0]
            if s.get("code") != want:
                problems.append(f"process {pid} got si_code {s.get('code')} ({s.get('code_name')}), "
                                f"not {want}")
            mask = ~((1 << exp.lsb) - 1)
            addr = int(s["addr"], 16) if s.get("addr") else None
            if va is not None and addr is not None and addr & mask != va & mask:
                problems.append(f"process {pid} got si_addr {s['addr']}, not its page {w['va']}")
            if s.get("lsb") not in (None, exp.lsb):
                problems.append(f"process {pid} got si_addr_lsb {s.get('lsb')}, not {exp.lsb}")
    return problems


def _node_stats_problems(obs):
    """The second oracle, where the kernel has it (6.3's per-node
    memory_failure statistics, vmce-6.1's patches): each "recovery action"
    line is counted once, under its result"""
    delta, results = obs.get("node_mf_delta"), obs.get("action_results")
    if delta is None or results is None or not obs.get("guest_alive"):
        return []
    want = {"total": sum(results.values())}
    want.update({r.lower(): n for r, n in results.items()})
    wrong = [f"{name} +{delta.get(name, 0)}, expected +{n}" for name, n in sorted(want.items())
             if delta.get(name, 0) != n]
    return [f"the per-node memory_failure statistics disagree with the log: {', '.join(wrong)}"] \
        if wrong else []


def _one_ar_problems(workloads, signals):
    """Exactly one of the mappers got BUS_MCEERR_AR, at its own VA"""
    pids = {p for w in workloads for p in (w.get("pids") or [w.get("pid")])}
    got = [s for s in signals if s.get("pid") in pids]
    if len(got) != 1 or got[0].get("code") != 4:
        return [f"expected BUS_MCEERR_AR to one mapper, got {[(s.get('pid'), s.get('code')) for s in got]}"]
    va = next((w.get("va") for w in workloads), None)
    if va and got[0].get("addr") and int(got[0]["addr"], 16) >> 12 != int(va, 16) >> 12:
        return [f"process {got[0]['pid']} got si_addr {got[0]['addr']}, not its page {va}"]
    return []


def judge(case, exp, obs, not_run):
    """(verdict, reasons): pass, fail, unexpected, not run or not applicable
    (a case that asks what the kernel does not have). A kernel vmce
    does not know is judged by the nearest known one's table, and every
    verdict says so"""
    verdict, reasons = _judge(case, exp, obs, not_run)
    for why, other in (exp.alternatives if verdict == "fail" and exp is not None else []):
        v2, r2 = _judge(case, other, obs, not_run)
        if v2 == "pass":
            verdict, reasons = "pass", [f"the other outcome {exp.table} gives: {why}"] + r2
            break
    if exp is not None and exp.nearest:
        info = case.kernel_info
        reasons = [f"judged as {exp.table}, the nearest known kernel to {info.release}: "
                   "no expectations are written for this kernel"] + reasons
    if exp is not None and exp.qemu and exp.qemu_nearest:
        info = case.qemu_info
        reasons = [f"QEMU judged as {exp.qemu_table}, the nearest known QEMU to {info.release}: "
                   "what this QEMU does by itself is not written down"] + reasons
    return verdict, reasons


def qemu_exit_words(obs):
    """How QEMU ended, with its last word (qemu.log), from the evidence"""
    ended = obs.get("qemu_exit") or {}
    words = ended.get("how") or "it exited"
    return words + (f": {ended['said']}" if ended.get("said") else "")


def _judge(case, exp, obs, not_run):
    if exp is not None and exp.guest == NOT_APPLICABLE:
        return "not applicable", [exp.note]
    if not_run is not None:
        return "not run", [not_run]
    if exp is None:
        return "unexpected", ["no expectation is written for this case"]
    if case.expect_override:
        return _judge_override(case.expect_override, obs)
    if exp.selftest:
        return _judge_selftest(exp, obs)
    if exp.guest in _JUDGE_FATE:
        return _JUDGE_FATE[exp.guest](exp, obs)
    if exp.guest == "panic":
        if not obs["panic"]:
            return "fail", ["the guest did not panic"]
        return "pass", [f"the guest panicked: {obs['panic']}"]
    return _judge_handled(case, exp, obs)


def _judge_qemu_died(exp, obs):
    """QEMU is expected to die of the error (forwarder = qemu)"""
    if obs["qemu_alive"]:
        return "fail", [f"QEMU lived on, though {exp.qemu_table} dies of it: {exp.note}"]
    return "pass", [f"QEMU died ({qemu_exit_words(obs)}), as {exp.qemu_table} does: {exp.note}"]


def _judge_dropped(exp, obs):
    """QEMU is expected to drop the error and the guest to live on"""
    actions = [(i.get("qemu_event") or {}).get("action") for i in obs.get("injected") or []
               if isinstance(i, dict)]
    if not obs["qemu_alive"]:
        return "fail", [f"QEMU died ({qemu_exit_words(obs)})"]
    if obs.get("reset"):
        return "fail", [f"the guest reset ({obs['reset']}), though inject-mce drops what it cannot take"]
    if not obs["guest_alive"]:
        return "fail", ["the guest stopped answering"]
    if not actions or any(a != "ignore" for a in actions):
        return "fail", [f"QEMU's MEMORY_FAILURE said {actions or 'nothing'}, expected ignore"]
    return "pass", [f"QEMU dropped it (MEMORY_FAILURE ignore) and the guest lives on: {exp.note}"]


def _judge_reset(exp, obs):
    """The guest is expected to reset (a kernel without the handler)"""
    if not obs["qemu_alive"]:
        return "fail", [f"QEMU died ({qemu_exit_words(obs)}) instead of resetting the guest"]
    if obs.get("reset"):
        after = obs.get("after_reset") or {}
        came = (f"; its next boot answered after {after['seconds']:.0f} s" if after.get("booted")
                else f"; its next boot did not come up ({after.get('why')})" if after else "")
        return "pass", [f"the guest reset ({obs['reset']}){came}: {exp.note}"]
    if obs["panic"]:
        return "fail", [f"the guest panicked instead of resetting: {obs['panic']}"]
    return "fail", ["the guest did not reset" + (" and lives on" if obs["guest_alive"] else "")]


def _judge_untold(exp, obs):
    """The error is expected to wait in a bank nobody reads (an AMD
    deferred error in a guest without the handler)"""
    if not obs["qemu_alive"]:
        return "fail", [f"QEMU died ({qemu_exit_words(obs)})"]
    if obs.get("reset"):
        return "fail", [f"the guest reset ({obs['reset']}), though a deferred error raises no machine check"]
    if obs["panic"]:
        return "fail", [f"the guest panicked: {obs['panic']}"]
    if not obs["guest_alive"]:
        return "fail", ["the guest stopped answering"]
    return "pass", [f"the guest lives on, untold: {exp.note}"]


def _judge_refused(exp, obs):
    """vmced is expected to refuse the error (an Arm64 guest's QEMU that
    cannot tell it): journaled as refused, nobody signalled, QEMU running,
    the guest too, or (an AR) paused"""
    records = [i for i in obs.get("injected") or [] if isinstance(i, dict)]
    fails = [f"vmced's record: result {r.get('result')}, path {r.get('path')}, expected refused"
             + (f" ({r.get('error')})" if r.get("error") else "")
             for r in records if r.get("result") != "refused" or r.get("path") != "refused"]
    if not records:
        fails.append("vmced journaled nothing")
    if obs.get("signals"):
        fails.append(f"the guest was told: {obs['signals']}")
    paused = exp.case.kind == "ar"
    if not obs["qemu_alive"]:
        fails.append(f"QEMU died ({qemu_exit_words(obs)})")
    elif paused and obs.get("qemu_status") != "paused":
        fails.append(f"the VM is {obs.get('qemu_status')}, not paused")
    elif not paused and not obs["guest_alive"]:
        fails.append("the guest stopped answering")
    if fails:
        return "fail", fails
    return "pass", [f"vmced refused it: {records[0].get('detail')}", exp.note]


def _judge_oops(exp, obs):
    """The guest kernel is expected to oops (read the page itself) before
    its handler says anything"""
    oops = obs.get("panic") or next((t for t in obs.get("trouble") or [] if t.startswith(OOPS)), None)
    if not obs["qemu_alive"]:
        return "fail", [f"QEMU died ({qemu_exit_words(obs)})"]
    if not oops:
        return "fail", ["the guest kernel did not oops"]
    return "pass", [f"the guest kernel oopsed: {oops}"]


# what the guest as a whole is expected to come to, where no handler's
# word is judged
_JUDGE_FATE = {"qemu-died": _judge_qemu_died, "dropped": _judge_dropped, "reset": _judge_reset,
               "untold": _judge_untold, "refused": _judge_refused, "oops": _judge_oops}


def _judge_handled(case, exp, obs):
    """The guest kernel's handler took the error: its word on each page,
    who got which signal, what the workloads saw, what came after"""
    fails, oddities = [], []
    if not obs["qemu_alive"]:
        fails.append(f"QEMU died ({qemu_exit_words(obs)})")
    after = obs.get("aftermath")
    trouble = list(obs.get("trouble") or [])
    # the kernel may read a page it still uses (ksmd's comparisons, the slab
    # allocator) before the campaign provokes it
    crash = obs["panic"] or next((t for t in trouble if t.startswith(OOPS)), None)
    if crash and exp.aftermath:
        after = {"how": "the kernel read it on its own", "crash": crash}
        trouble = [t for t in trouble if t != crash]
    elif obs["panic"]:
        fails.append(f"the guest panicked: {obs['panic']}")
    elif not obs["guest_alive"]:
        fails.append("the guest stopped answering")
    fails += _action_problems(case, exp, obs)
    if exp.signals == "none":
        if obs["signals"]:
            oddities.append(f"signals nobody expected: {obs['signals']}")
    elif obs["guest_alive"]:
        fails += _signal_problems(exp, obs["workloads"], obs["signals"])
    fails += _victim_problems(exp, obs)
    fails += _journal_problems(case, obs)
    fails += _check_problems(exp, obs)
    fails += _node_stats_problems(obs)
    hc = obs.get("hardware_corrupted_kb")
    if exp.hc_kb is not None and hc is not None and hc != exp.hc_kb:
        oddities.append(f"HardwareCorrupted grew by {hc} kB, expected {exp.hc_kb}")
    for t in trouble:
        oddities.append(f"guest log: {t}")
    fails += _aftermath_problems(exp, obs, after)
    if obs.get("overflows"):
        oddities.append(f"memory_failure() queue overflowed for {len(obs['overflows'])} page(s)")
    if fails:
        return "fail", fails
    if oddities:
        return "unexpected", oddities
    reasons = [exp.summary]
    if after and after.get("crash"):
        reasons.append(f"aftermath ({after['how']}): {after['crash']}")
    return "pass", reasons


def _action_problems(case, exp, obs):
    """The handler's "recovery action" line for each page (and, for a
    repeat, its "already poisoned")"""
    problems = []
    for w in obs["workloads"]:
        got = obs["actions"].get(w["pfn"])
        if case.repeat and got is None:
            continue
        if got is None:
            problems.append(f"no \"recovery action\" line for pfn {w['pfn']}")
        elif tuple(got) != tuple(exp.action):
            problems.append(f"pfn {w['pfn']}: \"{got[0]}: {got[1]}\", expected "
                            f"\"{exp.action[0]}: {exp.action[1]}\"")
    if case.repeat and not obs["already"]:
        problems.append("the second error was not reported as already poisoned")
    return problems


# how vmced tells an Arm64 guest each kind (decision.c's Arm paths)
ARM64_PATHS = {"ao": "ghes-qmp", "ar": "sea"}


def _journal_problems(case, obs):
    """An Arm64 guest's host error: vmced's record says it was told, by the
    kind's path, at the workload's GPA (x86's is judged by the guest's word
    alone: its mce line names the address)"""
    if getattr(case, "arch", "amd64") != "arm64" or not case.host_side:
        return []
    problems = []
    want = ARM64_PATHS[case.kind]
    records = [i for i in obs.get("injected") or [] if isinstance(i, dict)]
    for w, rec in zip(obs["workloads"], records):
        if rec.get("result") != "injected" or rec.get("path") != want:
            problems.append(f"vmced's record: result {rec.get('result')}, path {rec.get('path')}, expected "
                            f"injected through {want}" + (f" ({rec.get('error') or rec.get('detail')})"
                                                          if rec.get("error") or rec.get("detail") else ""))
        elif w.get("gpa") and int(rec.get("gpa") or "0", 16) >> 12 != int(w["gpa"], 16) >> 12:
            problems.append(f"vmced journaled GPA {rec.get('gpa')}, not the workload's page {w['gpa']}")
    if not records:
        problems.append("vmced journaled nothing")
    return problems


def _victim_problems(exp, obs):
    """Processes that died though nothing was to kill them"""
    if exp.signals not in ("none", "ao") or not obs["guest_alive"]:
        return []
    dead = sorted(int(p) for p, alive in (obs.get("victims_alive") or {}).items() if not alive)
    if not dead:
        return []
    return [f"process(es) {', '.join(map(str, dead))} died, though "
            + ("nobody was to be signalled" if exp.signals == "none" else "an AO is advice they survive")]


def _check_problems(exp, obs):
    """What the workload saw of its file afterwards: fsync's EIO, the data
    read back"""
    problems = []
    for check in obs.get("checks") or []:
        if exp.fsync_eio and check.get("fsync_errno") != 5:
            problems.append(f"fsync returned errno {check.get('fsync_errno')}, not EIO")
        if exp.reread_ok and check.get("reread_ok") is not True:
            problems.append("the data did not read back right")
    if (exp.fsync_eio or exp.reread_ok) and not obs.get("checks") and obs["guest_alive"]:
        problems.append("the workload did not report its check")
    return problems


def _aftermath_problems(exp, obs, after):
    """What happens when the kernel uses the page again (AFTERMATH), where
    it was brought about"""
    if exp.aftermath in ("ksm-merge", "exit"):
        if after is None:
            if obs["guest_alive"]:
                return [f"the aftermath was not brought about: {AFTERMATH[exp.aftermath]}"]
        elif not after.get("crash"):
            return [f"expected: {AFTERMATH[exp.aftermath]}; the guest lived on"]
    elif exp.aftermath in MERGE_LIVES:
        if after is None or not after.get("merged"):
            if obs["guest_alive"]:
                return [f"the aftermath was not brought about: {AFTERMATH[exp.aftermath]}"
                        + (f" ({after.get('error')})" if after and after.get("error") else "")]
        elif after.get("crash"):
            return [f"ksmd read the poisoned page: {after['crash']}"]
    return []


def _judge_selftest(exp, obs):
    """A selftest's TAP results against the tests its kernel is expected
    to fail; the guest must live through it"""
    program, failing = exp.selftest
    st = obs.get("selftest") or {}
    results = st.get("results") or []
    fails = []
    if not obs["qemu_alive"]:
        fails.append(f"QEMU died ({qemu_exit_words(obs)})")
    elif not obs["guest_alive"]:
        fails.append(f"the guest went down: {obs.get('panic') or 'it stopped answering'}")
    if st.get("timed_out"):
        fails.append(f"{program} did not finish in time")
    if not results or (st.get("planned") is not None and len(results) != st["planned"]):
        why = st.get("bail") or st.get("error") or f"it ended with {st.get('exit')}"
        fails.append(f"{program} reported {len(results)} of {st.get('planned') or '?'} tests ({why})")
    failed = {desc.split(": ", 1)[-1] for ok, desc in results if not ok}
    skipped = [desc for ok, desc in results if ok and "# SKIP" in desc]
    if skipped:
        fails.append(f"{program} skipped: {skipped[0]}")
    if results and (not failed <= set(failing) or bool(failed) != bool(failing)):
        fails.append(f"{program} failed {sorted(failed) or 'nothing'}, expected "
                     + (f"one or both of {sorted(failing)}" if failing else "nothing"))
    if fails:
        return "fail", fails
    passed = len(results) - len([1 for ok, _ in results if not ok])
    return "pass", [f"{program}: {passed} of {len(results)} passed"
                    + (f", and {', '.join(sorted(failed))} failed as expected" if failed else "")
                    + f": {exp.note}"]


def _judge_override(expect, obs):
    """expect = recovered | panic | ignored | failed | delayed, from a [case]"""
    if expect == "panic":
        return ("pass", ["the guest panicked"]) if obs["panic"] else ("fail", ["no panic"])
    results = {a[1].lower() for a in obs["actions"].values() if a}
    if expect in results:
        return "pass", [f"the handler said {expect}"]
    return "fail", [f"expected {expect}, the handler said {', '.join(sorted(results)) or 'nothing'}"]
