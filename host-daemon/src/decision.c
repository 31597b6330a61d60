/*
 * What vmced does with one memory-error signal.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-decision"

#include <string.h>

#include "decision.h"

const gchar *
vmce_decision_action_to_string (VmceDecisionAction action)
{
  switch (action) {
  case VMCE_DECISION_PASS:
    return "pass";
  case VMCE_DECISION_RELOOK:
    return "relook";
  case VMCE_DECISION_COALESCE:
    return "coalesce";
  case VMCE_DECISION_IGNORE:
    return "ignore";
  case VMCE_DECISION_STOP:
    return "stop";
  case VMCE_DECISION_REFUSE:
    return "refuse";
  case VMCE_DECISION_INJECT:
    return "inject";
  case VMCE_DECISION_RETRY:
    return "retry";
  case VMCE_DECISION_PARK:
    return "park";
  }
  return "unknown";
}

/* Whether an injection waits for the injection gap after the last one
 * into its VM. HMP 'mce' injects unconditionally: a second uncorrected
 * error on a vCPU whose guest has not finished the first (MCG_STATUS.MCIP
 * still set) makes QEMU reset the guest, as a real CPU shuts down, so HMP
 * keeps a gap. inject-mce needs none: it refuses such an error and says
 * so, or (KVM, where the check is made on the vCPU) drops it and says so
 * in MEMORY_FAILURE, and vmced asks again (vmce_decide_after_answer()).
 * A fixed gap capped a storm at 50 errors/s and was most of the AO tail;
 * and an SRAR whose vCPU is held must not wait at all: let go to wait, a
 * TCG vCPU takes any interrupt that fell due before the machine check,
 * and the guest panics in its interrupt handler ("Data load in
 * unrecoverable area of kernel", about 1 SRAR in 100 on a 2-core host). */
gboolean
vmce_decide_waits_gap (gboolean via_inject_mce)
{
  return !via_inject_mce;
}

const gchar *
vmce_answer_to_string (VmceAnswer answer)
{
  switch (answer) {
  case VMCE_ANSWER_TAKEN:
    return "taken";
  case VMCE_ANSWER_QUEUED:
    return "queued";
  case VMCE_ANSWER_BUSY:
    return "busy";
  case VMCE_ANSWER_DROPPED:
    return "dropped";
  case VMCE_ANSWER_SILENT:
    return "silent";
  case VMCE_ANSWER_ERROR:
    return "error";
  }
  return "unknown";
}

/* After each answer about one injection. "Busy" and "dropped" both mean
 * the guest is still in its handler for an earlier machine check (or has
 * not enabled machine checks yet): the error is sent again once the
 * guest has had time to finish, for at most @bound_ms, then journaled as
 * not injected: a guest that never finishes its handler is hung, and a
 * QEMU that says busy for ever must not hold the queue behind it. A
 * dropped error is never journaled as injected. Under KVM inject-mce
 * answers when the injection is queued on the vCPU, before the vCPU
 * checks MCIP: only MEMORY_FAILURE says whether it went in. None comes
 * where the guest disabled the bank in MCi_CTL or MCG_CTL (QEMU drops the
 * error silently), so a missing event is journaled as injected but
 * unconfirmed, not as lost. */
VmceThen
vmce_decide_after_answer (VmceAnswer answer, gint64 retrying_for_ms, gint64 bound_ms)
{
  switch (answer) {
  case VMCE_ANSWER_TAKEN:
    return VMCE_THEN_INJECTED;
  case VMCE_ANSWER_QUEUED:
    return VMCE_THEN_AWAIT_EVENT;
  case VMCE_ANSWER_BUSY:
  case VMCE_ANSWER_DROPPED:
    return retrying_for_ms < bound_ms ? VMCE_THEN_RETRY : VMCE_THEN_FAILED;
  case VMCE_ANSWER_SILENT:
    return VMCE_THEN_UNCONFIRMED;
  case VMCE_ANSWER_ERROR:
    return VMCE_THEN_FAILED;
  }
  return VMCE_THEN_FAILED;
}

/* A Linux guest clears MCIP at the end of do_machine_check(), tens of
 * microseconds after the #MC for an AO outside its own memory, longer for
 * one that kills a process or where the vCPU waits for CPU time: ask again
 * soon, then less often, so that a slow guest costs few monitor round
 * trips. 1, 2, 4 ... 32 ms. */
guint
vmce_decide_retry_pause_ms (guint tries)
{
  return 1u << MIN (tries > 0 ? tries - 1 : 0, 5u);
}

/* vmced opens SIGBUS in every thread while it is attached, so the kernel
 * sends each error the same way; without vmced it would not. An AO
 * (kill_proc() -> send_sig_mceerr()) to a thread that blocks SIGBUS stays
 * pending, and QEMU's main thread reads it from its signalfd. An AR
 * (force_sig_mceerr() for the thread's own access) to a thread that blocks
 * it is forced: force_sig_info_to_task() sets SIGBUS's action to the
 * default and unblocks it, and QEMU is killed. That is what Debian's QEMU
 * 7.2 and 10.0 do under TCG, whose vCPU threads keep the main thread's
 * mask; let the signal be blocked again instead and the vCPU faults on the
 * page again at once, for ever. */
VmcePassHow
vmce_decide_pass_how (VmceMceKind kind, gboolean thread_blocks_sigbus)
{
  if (!thread_blocks_sigbus)
    return VMCE_PASS_AS_IS;
  return kind == VMCE_MCE_KIND_AR ? VMCE_PASS_FORCED : VMCE_PASS_PENDING;
}

void
vmce_decision_clear (VmceDecision *decision)
{
  g_clear_pointer (&decision->detail, g_free);
}

/* The journal's detail says every reason that applied, first the one that
 * decided */
static void
vmce_decision_say (VmceDecision *d, gchar *why)
{
  gchar *before = d->detail;

  if (before == NULL) {
    d->detail = why;
    return;
  }
  d->detail = g_strconcat (why, "; ", before, NULL);
  g_free (before);
  g_free (why);
}

static void
vmce_decision_take (VmceDecision *d, VmceDecisionAction action, gchar *why)
{
  d->action = action;
  vmce_decision_say (d, why);
}

/* Before anything is known about the guest: whether the error is the
 * guest's at all. Returns FALSE when that already decides it. */
static gboolean
vmce_decide_whose (const VmceFacts *f, VmceDecision *d)
{
  if (f->policy == VMCE_POLICY_PASS) {
    vmce_decision_take (d, VMCE_DECISION_PASS,
                        g_strdup ("policy pass: QEMU handles it as without vmced"));
    return FALSE;
  }
  if (f->where != VMCE_WHERE_RAM) {
    /* memory hot-plugged since the layout was read is not in it, and QEMU
     * 7.2 says nothing when a DIMM comes: read the layout again, the thread
     * held, before deciding (a bounded wait on a rare path) */
    if (!f->layout_fresh && !f->main_thread) {
      d->action = VMCE_DECISION_RELOOK;
      return FALSE;
    }
    /* but not with QEMU's main thread held: it runs the monitor, which
     * could not answer until the bound is over, and would then handle the
     * signal with a command of vmced's half done. The layout is read again
     * once it goes on, for the next error. */
    d->refresh_layout = !f->layout_fresh;
    if (f->where == VMCE_WHERE_BLOCK)
      vmce_decision_take (d, VMCE_DECISION_PASS,
                          g_strdup_printf ("HVA is in RAM block %s at offset 0x%" G_GINT64_MODIFIER
                                           "x, which no guest physical address maps",
                                           f->block, f->block_offset));
    else
      vmce_decision_take (d, VMCE_DECISION_PASS, g_strdup ("HVA is not guest RAM"));
    return FALSE;
  }
  if (f->kind == VMCE_MCE_KIND_AR && f->vcpu_index < 0) {
    /* QEMU itself (device emulation, migration) read the bad page, not
     * the guest. With KVM, QEMU exits in that case; here the guest is told
     * (SRAO, as nothing in it consumed the data), and a simulated page is
     * given back so QEMU can go on. A real one cannot be. */
    if (!f->simulated) {
      vmce_decision_take (d, VMCE_DECISION_PASS,
                          g_strdup ("QEMU itself consumed the poison (not a vCPU thread)"));
      return FALSE;
    }
    d->kind = VMCE_MCE_KIND_AO;
    d->give_back_page = TRUE;
    vmce_decision_say (d, g_strdup ("consumed by QEMU itself, not a vCPU: the guest is told "
                                    "with an AO error; simulated page given back so QEMU can "
                                    "go on"));
  }
  return TRUE;
}

/* The guest cannot be told: an AO can wait for the consumption; a refused
 * AR would fault again at once, and forever, so its VM is paused. */
static void
vmce_decision_refuse (VmceDecision *d, const gchar *why)
{
  if (d->kind == VMCE_MCE_KIND_AO) {
    vmce_decision_take (d, VMCE_DECISION_REFUSE, g_strdup_printf ("refused: %s", why));
    return;
  }
  d->pause = TRUE;
  vmce_decision_take (d, VMCE_DECISION_REFUSE,
                      g_strdup_printf ("refused: %s; VM paused, as the vCPU would fault on the "
                                       "page again and again", why));
}

/* How the guest can be told, if it can recover at all. Returns FALSE when
 * it cannot, which decides it. */
static gboolean
vmce_decide_style (const VmceFacts *f, VmceDecision *d)
{
  const gchar *refusal = NULL;

  d->style = vmce_mce_style_for (f->cpu_model, &refusal);
  if (d->style != VMCE_MCE_STYLE_NONE)
    return TRUE;
  if (f->policy == VMCE_POLICY_FORCE) {
    /* what QEMU up to 9.0 injects into any guest: to see what the guest
     * does with it (it panics), or to time the path against QEMU's */
    d->style = VMCE_MCE_STYLE_INTEL;
    vmce_decision_say (d, g_strdup_printf ("policy force: injected Intel-style although %s",
                                           refusal));
    return TRUE;
  }
  vmce_decision_refuse (d, refusal);
  return FALSE;
}

const gchar *
vmce_arm_path_to_string (VmceArmPath path)
{
  switch (path) {
  case VMCE_ARM_PATH_NONE:
    return NULL;
  case VMCE_ARM_PATH_GHES_QMP:
    return "ghes-qmp";
  case VMCE_ARM_PATH_SEA:
    return "sea";
  case VMCE_ARM_PATH_REFUSED:
    return "refused";
  }
  return NULL;
}

/* hw/core/machine.c's hw_compat_10_1 turns acpi-ged's x-has-hest-addr
 * off, and with it the second GHES source (hw/arm/virt-acpi-build.c's
 * hest_ghes_notify_10_0): "virt-10.2-machine" and newer have it */
gboolean
vmce_arm_machine_has_qmp_source (const gchar *machine)
{
  guint64 major, minor;
  gchar *end;

  if (machine == NULL || !g_str_has_prefix (machine, "virt-"))
    return FALSE;
  major = g_ascii_strtoull (machine + 5, &end, 10);
  if (end == machine + 5 || *end != '.')
    return FALSE;
  minor = g_ascii_strtoull (end + 1, NULL, 10);
  return major > 10 || (major == 10 && minor >= 2);
}

/* An AO has no vCPU to go to: QEMU 10.2's command records it and raises
 * the GED's error event, which the guest's HED driver hands to GHES.
 * An AR must come as the guest's own synchronous external abort on the
 * vCPU that consumed it, or Linux's ghes_do_proc() gives memory_failure()
 * no MF_ACTION_REQUIRED (sync is true for the SEA source alone). */
VmceArmPath
vmce_decide_arm_path (const VmceArmQemu *arm, VmceMceKind kind, guint cpu, gchar **why)
{
  *why = NULL;
  if (!arm->ras) {
    *why = g_strdup ("QEMU's machine has no GHES to record the error in: it takes -machine virt,ras=on "
                     "(libvirt >= 10.4: <features><ras state='on'/>)");
    return VMCE_ARM_PATH_REFUSED;
  }
  if (!arm->acpi) {
    *why = g_strdup ("the guest has no ACPI, so no GHES: QEMU's virt machine makes its ACPI device only "
                     "when it boots UEFI firmware with acpi=on (a direct -kernel boot has none)");
    return VMCE_ARM_PATH_REFUSED;
  }
  if (kind == VMCE_MCE_KIND_AR) {
    if (arm->sea_command)
      return VMCE_ARM_PATH_SEA;
    *why = g_strdup_printf ("an AR takes a synchronous external abort on vCPU %u with its GHES record, "
                            "and this QEMU has no command for it (" VMCE_QMP_INJECT_SEA ", vmce's QEMU "
                            "patch: vmce-10.2-arm64, make qemu-10.2-arm64)", cpu);
    return VMCE_ARM_PATH_REFUSED;
  }
  if (!arm->ghes_command) {
    *why = g_strdup ("this QEMU has no " VMCE_QMP_INJECT_GHES " to record the error in the guest's GHES: it "
                     "takes QEMU >= 10.2 (or vmce's QEMU patch)");
    return VMCE_ARM_PATH_REFUSED;
  }
  if (!vmce_arm_machine_has_qmp_source (arm->machine)) {
    *why = g_strdup_printf ("machine type %s has no GHES source for " VMCE_QMP_INJECT_GHES " (its HEST has "
                            "the SEA one only): it takes virt-10.2 or newer",
                            arm->machine != NULL ? arm->machine : "(unknown)");
    return VMCE_ARM_PATH_REFUSED;
  }
  return VMCE_ARM_PATH_GHES_QMP;
}

gchar *
vmce_decide_arm_said_at_attach (const VmceArmQemu *arm)
{
  g_autofree gchar *ao = NULL;
  g_autofree gchar *ar = NULL;

  if (vmce_decide_arm_path (arm, VMCE_MCE_KIND_AO, 0, &ao) != VMCE_ARM_PATH_REFUSED)
    g_clear_pointer (&ao, g_free);
  if (!arm->ras || !arm->acpi)
    return g_strdup_printf ("Arm64 guest: memory errors will not be told: %s", ao);
  if (!arm->sea_command)
    ar = g_strdup ("ARs will be refused (and the VM paused): no " VMCE_QMP_INJECT_SEA
                   " (vmce's QEMU patch: vmce-10.2-arm64, make qemu-10.2-arm64)");
  if (ao == NULL && ar == NULL)
    return NULL;
  return g_strdup_printf ("Arm64 guest: %s%s%s%s", ao != NULL ? "AOs will be refused: " : "",
                          ao != NULL ? ao : "", ao != NULL && ar != NULL ? "; " : "",
                          ar != NULL ? ar : "");
}

/* vmce_decide_style()'s counterpart for an Arm64 guest. Returns FALSE when
 * the guest cannot be told, which decides it. */
static gboolean
vmce_decide_arm (const VmceFacts *f, VmceDecision *d)
{
  g_autofree gchar *why = NULL;
  guint cpu = f->vcpu_index >= 0 ? (guint) f->vcpu_index : 0;

  d->path = vmce_decide_arm_path (f->arm, d->kind, cpu, &why);
  if (d->path != VMCE_ARM_PATH_REFUSED)
    return TRUE;
  vmce_decision_refuse (d, why);
  return FALSE;
}

/* A TCG vCPU stopped inside a load whose page vmced could not make
 * readable again (a lost huge page of a hugetlbfs mapping, which splits
 * only at its own size; anything else that fails) can leave that load no
 * way but by completing it. Nothing reaches it there: a machine check is
 * taken as it leaves its translation block, and QEMU's pause
 * (pause_all_vcpus()) waits for it to leave. Both would also freeze QEMU's
 * main loop and monitor with it: HMP mce's run_on_cpu() and QMP stop wait
 * for the vCPU, for ever. Resumed, it faults again at once (in the host
 * lab, 68 690 times in 100 s). So: nothing is sent to QEMU for it; it
 * tries again a bounded number of times (a give-back that failed once may
 * work), and then vmced keeps its thread stopped and holds the VM's other
 * vCPUs too, which is the pause QEMU cannot give. Returns FALSE when that
 * decides it. */
static gboolean
vmce_decide_stuck (const VmceFacts *f, VmceDecision *d)
{
  if (!d->free_tcg_vcpu || !f->stuck)
    return TRUE;
  g_clear_pointer (&d->detail, g_free);
  if (f->parked || f->stuck_faults + 1 >= VMCE_REFAULT_LIMIT) {
    vmce_decision_take (d, VMCE_DECISION_PARK,
                        g_strdup_printf ("paused by vmced: the vCPU read this page %u time(s) and "
                                         "cannot leave its load, as vmced cannot give the page back "
                                         "(%s); its thread and the VM's other vCPUs are held (QEMU's "
                                         "own pause would wait for the vCPU for ever); destroy the "
                                         "VM, or detach vmced and QEMU takes the error as without it",
                                         f->stuck_faults + 1, f->stuck_why));
    return FALSE;
  }
  vmce_decision_take (d, VMCE_DECISION_RETRY,
                      g_strdup_printf ("not injected: the vCPU cannot leave its load, as vmced cannot "
                                       "give the page back (%s); it reads it again (%u of %u before "
                                       "the VM is paused)",
                                       f->stuck_why, f->stuck_faults + 1, VMCE_REFAULT_LIMIT));
  return FALSE;
}

void
vmce_decide (const VmceFacts *f, VmceDecision *d)
{
  memset (d, 0, sizeof *d);
  d->kind = f->kind;
  if (!vmce_decide_whose (f, d))
    return;

  /* whatever happens next needs a TCG vCPU out of its translation block:
   * it is stopped inside a load, and QEMU can do nothing for it (deliver a
   * machine check, pause the VM) until the block ends. A simulated page is
   * given back; a really poisoned one, which the host kernel took away for
   * good, is replaced by a zeroed one (the guest is told the page is bad
   * and never reads it again). */
  if (!f->kvm && d->kind == VMCE_MCE_KIND_AR) {
    /* an Arm64 vCPU takes an SEA, not a machine check (0010's
     * CPU_INTERRUPT_SEA, taken at the same point) */
    const gchar *takes = f->arch == VMCE_ARCH_ARM64 ? "its synchronous external abort" : "the machine check";

    d->free_tcg_vcpu = TRUE;
    vmce_decision_say (d, g_strdup_printf (f->simulated
        ? "TCG: the simulated page is given back so the vCPU's load completes; the vCPU "
          "takes %s as it leaves its translation block"
        : "TCG: the poisoned host page is replaced by a zeroed one so the vCPU's load "
          "completes; the vCPU takes %s as it leaves its translation block", takes));
  }
  if (!vmce_decide_stuck (f, d))
    return;

  /* KVM re-enters the guest and faults on the page again until the
   * machine check is in: one error, counted, not a second injection */
  if (d->kind == VMCE_MCE_KIND_AR && f->same_page_on_its_way) {
    d->action = VMCE_DECISION_COALESCE;
    return;
  }
  /* a guest that keeps consuming a page after its machine check (it did
   * not handle it, or ignored it) would have vmced and the vCPU bounce
   * forever */
  if (d->kind == VMCE_MCE_KIND_AR && f->known_poisoned) {
    d->count_refault = TRUE;
    if (f->refaults + 1 >= VMCE_REFAULT_LIMIT) {
      d->pause = TRUE;
      vmce_decision_take (d, VMCE_DECISION_STOP,
                          g_strdup ("the guest keeps consuming this page after its machine "
                                    "check: paused rather than let the vCPU fault on it forever"));
      return;
    }
  }
  if (f->policy == VMCE_POLICY_IGNORE_AO && d->kind == VMCE_MCE_KIND_AO) {
    vmce_decision_take (d, VMCE_DECISION_IGNORE,
                        g_strdup ("policy ignore-ao: the guest hears of it when it consumes "
                                  "the page"));
    return;
  }
  if (f->policy == VMCE_POLICY_STOP) {
    d->pause = TRUE;
    vmce_decision_take (d, VMCE_DECISION_STOP, g_strdup ("policy stop: VM paused for inspection"));
    return;
  }

  if (f->arch == VMCE_ARCH_ARM64 ? !vmce_decide_arm (f, d) : !vmce_decide_style (f, d))
    return;
  d->action = VMCE_DECISION_INJECT;
  /* SRAR goes to the vCPU that consumed it, SRAO to the first */
  if (d->kind == VMCE_MCE_KIND_AR && f->vcpu_index >= 0)
    d->cpu = (guint) f->vcpu_index;
  else
    d->cpu = f->first_vcpu_index >= 0 ? (guint) f->first_vcpu_index : 0;
  /* KVM too: let go only once it is in. The vCPU would re-enter the
   * guest, which may take a timer interrupt before the machine check is
   * in, and an SRAR taken in guest kernel context panics it (seen in the
   * host lab) */
  d->hold = d->kind == VMCE_MCE_KIND_AR && f->vcpu_index >= 0;
}
