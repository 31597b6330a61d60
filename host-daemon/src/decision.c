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
  }
  return "unknown";
}

/* Whether an injection goes at once, within the injection gap after the
 * last one. An SRAR whose vCPU is held goes through inject-mce at once.
 * Let go to wait for the gap, a TCG vCPU takes any interrupt that fell due
 * before the machine check that comes later, and the guest panics in its
 * interrupt handler ("Data load in unrecoverable area of kernel": run/bench
 * --only tail, about 1 SRAR in 100 on a 2-core host); kept held, the guest
 * would stall for the gap. And the gap protects nothing here: the vCPU that
 * consumed the poison is not in a machine-check handler, and inject-mce
 * refuses, rather than resets the guest, while one is in progress. HMP
 * 'mce' needs the vCPU to run and may reset the guest: it keeps the gap. */
gboolean
vmce_decide_jumps_gap (VmceMceKind kind, gboolean vcpu_held, gboolean via_inject_mce)
{
  return kind == VMCE_MCE_KIND_AR && vcpu_held && via_inject_mce;
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
  /* an AO can wait for the consumption; a refused AR would fault again at
   * once, and forever */
  if (d->kind == VMCE_MCE_KIND_AO) {
    vmce_decision_take (d, VMCE_DECISION_REFUSE, g_strdup_printf ("refused: %s", refusal));
    return FALSE;
  }
  d->pause = TRUE;
  vmce_decision_take (d, VMCE_DECISION_REFUSE,
                      g_strdup_printf ("refused: %s; VM paused, as the vCPU would fault on the "
                                       "page again and again", refusal));
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
    d->free_tcg_vcpu = TRUE;
    vmce_decision_say (d, g_strdup (f->simulated
        ? "TCG: the simulated page is given back so the vCPU's load completes; the vCPU "
          "takes the machine check as it leaves its translation block"
        : "TCG: the poisoned host page is replaced by a zeroed one so the vCPU's load "
          "completes; the vCPU takes the machine check as it leaves its translation block"));
  }

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

  if (!vmce_decide_style (f, d))
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
