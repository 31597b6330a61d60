/*
 * A poisoned page across a guest reset (see reset-guard.h).
 *
 * QEMU keeps this promise itself for the errors it handles: under KVM it
 * records each poisoned page (kvm_hwpoison_page_add()) and replaces it on
 * reset (kvm_unpoison_all(), a reset handler, so before anything else of
 * the reset touches RAM). vmced takes those signals first, so QEMU never
 * learns of the pages and vmced must replace them: otherwise the next boot
 * reads the page, and a machine check before the guest kernel enables MCE
 * (CR4.MCE) shuts the guest down again, at every boot.
 *
 * What vmced sees of a reset, in QEMU 7.2's order (qemu_system_reset()):
 *  1. the vCPUs are paused;
 *  2. reset handlers run on the main thread, among them rom_reset(), which
 *     writes the ROM blobs that live in RAM (a direct-boot kernel's ELF
 *     segments) again: a poisoned page there faults in the main thread
 *     now, before anything was announced. The ROM list (HMP `info roms`)
 *     says it is a reset: the page is replaced and the write goes on;
 *  3. the RESET event is sent, then the vCPUs are resumed. vmced reads
 *     the event a little later; a vCPU may have touched a poisoned page
 *     by then, and that stop comes with the event already in vmced's
 *     monitor socket (it was written first), so such a stop waits until
 *     the event is read;
 *  4. on the event, vmced holds every vCPU, replaces every page still
 *     unreadable (through a held vCPU, so QEMU's main loop goes on),
 *     lets the vCPUs go and journals what it did.
 * A page QEMU can read already (replaced in step 2, or by QEMU itself, or
 * a simulated error under KVM, which never takes the page away) is left
 * alone: the guest may have written to it since.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-reset"

#include <string.h>

#include "json-util.h"
#include "page-replace.h"
#include "page.h"
#include "reset-guard.h"
#include "sim-poison.h"

/* a vCPU that does not stop for this long is left out of the hold */
#define VMCE_RESET_HOLD_TIMEOUT_MS 1000

typedef struct {
  VmceVm *vm;
  VmceStop stop;
  guint idle_source;
} VmceDeferredStop;

struct _VmceResetPass {
  VmceVm *vm;
  guint id; /* ptrace ops queued for a pass find it by this */
  gint64 start_us;     /* monotonic, when vmced read RESET */
  gint64 qemu_time_us; /* QEMU's timestamp of RESET, wall clock */
  gchar *reason;
  GArray *held;   /* of pid_t: vCPUs this pass holds */
  pid_t via_tid;  /* a stopped thread to make the system calls */
  guint waiting;  /* vCPUs not stopped yet */
  guint timeout_source;
};

/* A ptrace op of a pass; the pass may be over when it runs */
typedef struct {
  VmceVm *vm;
  guint pass_id;
} VmcePassOp;

/* The guard's own, per VM (layer data of the session) */
typedef struct {
  VmceResetPass *pass;
  GPtrArray *deferred; /* of VmceDeferredStop: waiting for a pass or the monitor */
  GPtrArray *early;    /* of JsonNode: replaced before the RESET event */
  GHashTable *recent;  /* host pages replaced since the last reset */
} VmceResetGuard;

GQuark vmce_reset_guard_quark (void);
G_DEFINE_QUARK (vmce-reset-guard, vmce_reset_guard)

static guint vmce_reset_pass_next_id = 0;

static void
vmce_reset_guard_free (VmceResetGuard *g)
{
  /* a pass and each deferred stop hold the VM: none is left when it goes */
  g_ptr_array_unref (g->deferred);
  g_ptr_array_unref (g->early);
  g_hash_table_unref (g->recent);
  g_free (g);
}

static VmceResetGuard *
vmce_reset_guard_new (void)
{
  VmceResetGuard *g = g_new0 (VmceResetGuard, 1);

  g->deferred = g_ptr_array_new ();

  g->early = g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);

  g->recent = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  return g;
}

static VmceResetGuard *
vmce_reset_guard (VmceVm *vm)
{
  return vmce_vm_ensure_layer_data (vm, vmce_reset_guard_quark (), (VmceLayerNewFunc) vmce_reset_guard_new,
                                    (GDestroyNotify) vmce_reset_guard_free);
}

static void vmce_reset_pass_run (VmceResetPass *pass);

/* --- journal --------------------------------------------------------------- */

/* One page of a reset record */
static JsonNode *
vmce_reset_page_json (const VmcePoisonedPage *p,
                      guint64 hva,
                      const VmcePageReplace *r,
                      const gchar *result,
                      const gchar *detail)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  vmce_json_builder_add_hex (b, "gpa", p != NULL ? p->gpa : 0);
  vmce_json_builder_add_hex (b, "hva", hva);
  json_builder_set_member_name (b, "source");
  json_builder_add_string_value (b, p == NULL || p->simulated ? "simulated" : "kernel");
  json_builder_set_member_name (b, "result");
  json_builder_add_string_value (b, result);
  if (r != NULL && r->backing != NULL) {
    json_builder_set_member_name (b, "backing");
    json_builder_add_string_value (b, r->backing);
  }
  if (r != NULL && r->how != NULL) {
    json_builder_set_member_name (b, "how");
    json_builder_add_string_value (b, r->how);
  }
  if (r != NULL && r->len > VMCE_PAGE_SIZE) {
    /* the kernel poisons a huge page whole: the rest of it goes too */
    vmce_json_builder_add_hex (b, "range_start", r->start);
    vmce_json_builder_add_hex (b, "range_size", r->len);
  }
  json_builder_set_member_name (b, "detail");
  if (detail != NULL)
    json_builder_add_string_value (b, detail);
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* --- replacing one page ------------------------------------------------------ */

static void
vmce_reset_note_replaced (VmceVm *vm, guint64 host_page, guint64 len)
{
  for (guint64 off = 0; off < len; off += VMCE_PAGE_SIZE) {
    guint64 *key = g_new (guint64, 1);
    *key = host_page + off;
    g_hash_table_add (vmce_reset_guard (vm)->recent, key);
  }
}

/* Replaces @p (through the stopped @tid) unless QEMU can read it already;
 * returns the page's entry for the journal, and whether it is fine now */
static JsonNode *
vmce_reset_replace_page (VmceVm *vm,
                         VmcePoisonedPage *p,
                         pid_t tid,
                         VmceVmaTable *vmas,
                         const gchar *why,
                         gboolean *fine,
                         gboolean *failed)
{
  VmcePageReplace r = { 0 };
  g_autoptr(GError) error = NULL;
  g_autofree gchar *detail = NULL;
  guint64 hva = p->hva;
  JsonNode *entry;

  *fine = FALSE;
  *failed = FALSE;
  /* the layout knows best where the page is now */
  if (vmce_vm_get_layout (vm) != NULL)
    (void) vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (vm), p->gpa, &hva, NULL);
  hva &= VMCE_PAGE_MASK;
  if (vmce_page_is_readable (vmce_vm_get_pid (vm), hva)) {
    *fine = TRUE;
    return vmce_reset_page_json (
        p, hva, NULL, "usable",
        /* QEMU remaps the pages it knows of in a reset handler, before
         * RESET is sent (kvm_unpoison_all(); QEMU 10.0 discards a shared
         * page first): vmced leaves them to it */
        p->result == VMCE_RESULT_PASSED ? "QEMU replaced it itself at the reset: it handled this "
                                          "error (vmced passed it on)"
        : p->simulated && vmce_vm_is_kvm (vm) ? "a simulated error under KVM never takes the page away"
        : !vmce_vm_is_kvm (vm) && p->kind == VMCE_MCE_KIND_AR
            ? "QEMU can read it already: a TCG vCPU consumed it, and vmced gave it a page then "
              "so that its load could complete"
            : "QEMU can read it already: it was replaced before");
  }
  if (!vmce_page_replace (vmce_vm_get_pid (vm), tid, vmas, hva, &r, &error)) {
    *failed = TRUE;
    g_warning ("vm %s: cannot replace the poisoned page at GPA 0x%" G_GINT64_MODIFIER "x: %s",
               vmce_vm_get_name (vm), p->gpa, error->message);
    entry = vmce_reset_page_json (p, hva, &r, "failed", error->message);
    vmce_page_replace_clear (&r);
    return entry;
  }
  *fine = TRUE;
  vmce_reset_note_replaced (vm, r.start, r.len);
  vmce_sim_forget_page (vm, hva, "the guest was reset and the page replaced before a thread "
                                 "touched it");
  if (r.len > VMCE_PAGE_SIZE)
    detail = g_strdup_printf ("%s; the whole %" G_GUINT64_FORMAT " kB huge page is replaced: the "
                              "kernel poisons a huge page whole",
                              why, r.len / 1024);
  entry = vmce_reset_page_json (p, hva, &r, "replaced", detail != NULL ? detail : why);
  vmce_page_replace_clear (&r);
  return entry;
}

/* --- QEMU reloading a ROM blob into a poisoned page ------------------------------- */

static gboolean
vmce_reset_guard_rom_write (VmceVm *vm, VmcePoisonedPage *p, pid_t tid, const gchar *rom)
{
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *why = g_strdup_printf ("QEMU's main thread was writing ROM blob \"%s\" into "

                                           "it (rom_reset(): the guest is being reset)",
                                           rom);
  JsonNode *entry;
  gboolean fine, failed;

  vmas = vmce_vma_table_read (vmce_vm_get_pid (vm), &error);
  if (vmas == NULL) {
    g_warning ("vm %s: %s", vmce_vm_get_name (vm), error->message);
    return FALSE;
  }
  entry = vmce_reset_replace_page (vm, p, tid, vmas, why, &fine, &failed);
  if (!fine) {
    json_node_unref (entry);
    return FALSE;
  }
  /* journaled now, in case the reset never gets as far as its event */
  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "page-replaced");
  vmce_json_builder_add_hex (b, "gpa", p->gpa);
  json_builder_set_member_name (b, "page");
  json_builder_add_value (b, json_node_ref (entry));
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "PAGE_REPLACED", record);
  g_message ("vm %s: poisoned page at GPA 0x%" G_GINT64_MODIFIER "x replaced: %s", vmce_vm_get_name (vm),
             p->gpa, why);
  g_ptr_array_add (vmce_reset_guard (vm)->early, entry);
  g_hash_table_remove (vmce_vm_get_poisoned (vm), &p->gpa);
  vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), tid, 0);
  return TRUE;
}

/* --- stops that wait ------------------------------------------------------------- */

static void
vmce_deferred_stop_free (VmceDeferredStop *d)
{
  g_clear_handle_id (&d->idle_source, g_source_remove);
  g_free (d);
}

static void
vmce_deferred_stop_decide (VmceDeferredStop *d)
{
  VmceVm *vm = d->vm;
  guint64 hva = (guint64) (guintptr) d->stop.info.si_addr;
  guint64 gpa = 0;

  g_ptr_array_remove (vmce_reset_guard (vm)->deferred, d);
  /* replaced meanwhile: the access is tried again on the fresh page */
  if (vmce_vm_find_host_poisoned (vm, hva, &gpa) == NULL || vmce_page_is_readable (vmce_vm_get_pid (vm), hva)) {
    g_debug ("vm %s: thread %d goes on: the page at HVA 0x%" G_GINT64_MODIFIER "x was replaced",
             vmce_vm_get_name (vm), d->stop.tid, hva);
    vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), d->stop.tid, 0);
  } else {
    vmce_vm_redeliver (vm, &d->stop, TRUE);
  }
  vmce_deferred_stop_free (d);
}

static gboolean
vmce_deferred_stop_idle_cb (gpointer user_data)
{
  VmceDeferredStop *d = user_data;

  d->idle_source = 0;
  /* a pass started in between: it decides when it is done */
  if (vmce_reset_guard (d->vm)->pass != NULL)
    return G_SOURCE_REMOVE;
  vmce_deferred_stop_decide (d);
  return G_SOURCE_REMOVE;
}

static void
vmce_reset_guard_defer (VmceVm *vm, const VmceStop *stop)
{
  VmceResetGuard *g = vmce_reset_guard (vm);
  VmceDeferredStop *d = g_new0 (VmceDeferredStop, 1);

  d->vm = vm;
  d->stop = *stop;
  g_ptr_array_add (g->deferred, d);
  /* after everything the main loop has ready, the monitor's input first */
  if (g->pass == NULL)
    d->idle_source = g_idle_add_full (G_PRIORITY_LOW, vmce_deferred_stop_idle_cb, d, NULL);
}

static void
vmce_reset_guard_decide_deferred (VmceVm *vm)
{
  VmceResetGuard *g = vmce_reset_guard (vm);

  while (g->deferred->len > 0)
    vmce_deferred_stop_decide (g_ptr_array_index (g->deferred, 0));
}

VmceResetAction
vmce_reset_guard_decide (const VmceResetFacts *f)
{
  if (!f->poisoned)
    return VMCE_RESET_PASS_ON;
  /* rom_reset(): the reset is under way, though not announced yet. Only a
   * touch says so: an AO on the main thread (the kernel's, or vmcectl
   * poison's repeat of a known page) is no write by QEMU */
  if (f->main_thread && f->in_rom && !f->found_only)
    return VMCE_RESET_REPLACE_NOW;
  if (f->pass_running)
    return VMCE_RESET_WAIT;
  /* QEMU sent RESET before it resumed its vCPUs: if it is in the socket,
   * the touch may belong to the new boot */
  if (f->monitor_pending && !f->again)
    return VMCE_RESET_WAIT;
  return VMCE_RESET_PASS_ON;
}

gboolean
vmce_reset_guard_signal (VmceVm *vm, const VmceStop *stop, gboolean again)
{
  guint64 gpa = 0;

  VmcePoisonedPage *p = vmce_vm_find_host_poisoned (vm, (guint64) (guintptr) stop->info.si_addr,
                                                    &gpa);
  const gchar *rom = p != NULL && stop->tid == vmce_vm_get_pid (vm) ? vmce_rom_blobs_lookup (vmce_vm_get_roms (vm), gpa)
                                                       : NULL;
  VmceResetFacts facts = {
    .poisoned = p != NULL,
    .main_thread = stop->tid == vmce_vm_get_pid (vm),
    .in_rom = rom != NULL,
    .pass_running = vmce_reset_guard (vm)->pass != NULL,
    /* a poll of the socket: nothing is read here */
    .monitor_pending = p != NULL && vmce_vm_get_qmp (vm) != NULL && vmce_qmp_client_has_input (vmce_vm_get_qmp (vm)),
    .again = again,
    .found_only = stop->info.si_signo == SIGBUS && stop->info.si_code == BUS_MCEERR_AO,
  };

  switch (vmce_reset_guard_decide (&facts)) {
  case VMCE_RESET_REPLACE_NOW:
    if (vmce_reset_guard_rom_write (vm, p, stop->tid, rom))
      return TRUE;
    /* it could not be replaced: as any other touch of the page */
    facts.in_rom = FALSE;
    if (vmce_reset_guard_decide (&facts) != VMCE_RESET_WAIT)
      return FALSE;
    G_GNUC_FALLTHROUGH;
  case VMCE_RESET_WAIT:
    vmce_reset_guard_defer (vm, stop);
    return TRUE;
  case VMCE_RESET_PASS_ON:
    break;
  }
  return FALSE;
}

gboolean
vmce_reset_guard_stale_fault (VmceVm *vm, pid_t tid, const siginfo_t *info)
{
  guint64 page = (guint64) (guintptr) info->si_addr & VMCE_PAGE_MASK;

  if (info->si_signo != SIGSEGV && info->si_signo != SIGBUS)
    return FALSE;
  if (!g_hash_table_contains (vmce_reset_guard (vm)->recent, &page) ||
      !vmce_page_is_readable (vmce_vm_get_pid (vm), page))
    return FALSE;
  g_debug ("vm %s: thread %d faulted on HVA 0x%" G_GINT64_MODIFIER "x before it was replaced: "
           "it tries again",
           vmce_vm_get_name (vm), tid, page);
  vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), tid, 0);
  return TRUE;
}

/* --- the pass ------------------------------------------------------------------ */

static void
vmce_reset_pass_free (VmceResetPass *pass)
{
  g_clear_handle_id (&pass->timeout_source, g_source_remove);
  g_array_unref (pass->held);
  g_free (pass->reason);
  vmce_vm_unref (pass->vm);
  g_free (pass);
}

static void
vmce_reset_pass_release (VmceResetPass *pass)
{
  VmceVm *vm = pass->vm;

  for (guint i = 0; i < pass->held->len; i++)
    if (vmce_vm_get_watch (vm) != NULL)
      vmce_ptrace_watch_release (vmce_vm_get_watch (vm), g_array_index (pass->held, pid_t, i));
  g_array_set_size (pass->held, 0);
}

static VmcePassOp *
vmce_pass_op_new (VmceResetPass *pass)
{
  VmcePassOp *op = g_new0 (VmcePassOp, 1);

  op->vm = vmce_vm_ref (pass->vm);
  op->pass_id = pass->id;
  return op;
}

/* The pass @op was queued for, if it is still going */
static void
vmce_pass_op_free (gpointer data)
{
  VmcePassOp *op = data;

  vmce_vm_unref (op->vm);
  g_free (op);
}

static VmceResetPass *
vmce_pass_op_take (VmcePassOp *op)
{
  VmceResetPass *pass = vmce_reset_guard (op->vm)->pass;

  if (pass != NULL && pass->id != op->pass_id)
    pass = NULL;
  vmce_vm_unref (op->vm);
  g_free (op);
  return pass;
}

static void
vmce_pass_hold_free (gpointer data)
{
  VmceResetPass *pass = vmce_pass_op_take (data);

  /* the thread ended before it stopped */
  if (pass != NULL && pass->waiting > 0 && --pass->waiting == 0)
    vmce_reset_pass_run (pass);
}

static void
vmce_pass_hold_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceResetPass *pass = vmce_pass_op_take (user_data);

  if (pass == NULL)
    return;
  /* one held already (a vCPU waiting for its machine check) stays its
   * holder's to let go */
  if (!vmce_ptrace_watch_is_held (watch, tid)) {
    vmce_ptrace_watch_hold (watch, tid);
    g_array_append_val (pass->held, tid);
  }
  if (pass->via_tid == 0)
    pass->via_tid = tid;
  if (pass->waiting > 0 && --pass->waiting == 0)
    vmce_reset_pass_run (pass);
}

static gboolean
vmce_reset_pass_timeout_cb (gpointer user_data)
{
  VmceResetPass *pass = user_data;

  pass->timeout_source = 0;
  g_warning ("vm %s: %u vCPU(s) did not stop within %d ms of the reset: replacing the poisoned "
             "pages without holding them",
             vmce_vm_get_name (pass->vm), pass->waiting, VMCE_RESET_HOLD_TIMEOUT_MS);
  pass->waiting = 0;
  vmce_reset_pass_run (pass);
  return G_SOURCE_REMOVE;
}

static void
vmce_reset_pass_main_stopped_cb (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceResetPass *pass = vmce_pass_op_take (user_data);

  if (pass == NULL)
    return;
  pass->via_tid = tid;
  vmce_reset_pass_run (pass);
}

/* What a pass did with the poisoned pages, for its record */
typedef struct {
  guint replaced, usable, failed;
  GString *failures;  /* "GPA (why)", for the pause's reason */
  GHashTable *tried;  /* host pages, replaced or not */
} VmceResetTally;

static void
vmce_reset_tally_clear (VmceResetTally *t)
{
  g_string_free (t->failures, TRUE);
  g_hash_table_unref (t->tried);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VmceResetTally, vmce_reset_tally_clear)

/* Each of @pages (poison-set.h's host pages), replaced (or why not) into the
 * record's "pages" array; @vmas NULL: QEMU's mappings could not be read,
 * @why says so */
static void
vmce_reset_pass_replace_poisoned (VmceResetPass *pass,
                                  GPtrArray *pages,
                                  VmceVmaTable *vmas,
                                  const gchar *why,
                                  JsonBuilder *b,
                                  VmceResetTally *t)
{
  VmceVm *vm = pass->vm;

  for (guint i = 0; i < pages->len; i++) {
    VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    gboolean fine = FALSE, failed = FALSE;
    JsonNode *entry;
    JsonObject *o;

    if (vmas == NULL) {
      entry = vmce_reset_page_json (p, p->hva, NULL, "failed", why);
      failed = TRUE;
    } else {
      entry = vmce_reset_replace_page (
          vm, p, pass->via_tid, vmas,
          /* QEMU before 10.0 maps a shared file's page again as it was
           * (qemu_ram_remap()): the same poisoned page */
          p->result == VMCE_RESULT_PASSED
              ? "QEMU handled this error itself (vmced passed it on), but its reset left the page "
                "poisoned: replaced while the vCPUs were held after the reset"
              : "replaced while the vCPUs were held after the reset",
          &fine, &failed);
    }
    o = json_node_get_object (entry);
    if (failed) {
      t->failed++;
      g_string_append_printf (t->failures, "%s0x%" G_GINT64_MODIFIER "x (%s)",
                              t->failures->len > 0 ? ", " : "", p->gpa,
                              json_object_get_string_member (o, "detail"));
    } else if (g_strcmp0 (json_object_get_string_member (o, "result"), "usable") == 0) {
      t->usable++;
    } else {
      t->replaced++;
    }
    json_builder_add_value (b, entry);
    g_hash_table_add (t->tried, g_memdup2 (&p->hva, sizeof p->hva));
    if (fine)
      g_hash_table_remove (vmce_vm_get_poisoned (vm), &p->gpa);
  }
}

/* Taken away by vmcectl poison but never reported (AR on access that no
 * thread touched): the new boot gets it back */
static void
vmce_reset_pass_give_back_simulated (VmceResetPass *pass, VmceVmaTable *vmas, GArray *sim_pages,
                                     GHashTable *tried)
{
  VmceVm *vm = pass->vm;

  for (guint i = 0; vmas != NULL && sim_pages != NULL && i < sim_pages->len; i++) {
    guint64 host_page = g_array_index (sim_pages, guint64, i);
    VmcePageReplace r = { 0 };
    g_autoptr(GError) local = NULL;

    if (!vmce_sim_is_protected (vm, host_page) || g_hash_table_contains (tried, &host_page))
      continue; /* replaced above, or tried and failed */
    if (vmce_page_replace (vmce_vm_get_pid (vm), pass->via_tid, vmas, host_page, &r, &local)) {
      vmce_reset_note_replaced (vm, r.start, r.len);
      vmce_sim_forget_page (vm, host_page, "the guest was reset before a thread touched the "
                                           "page; it was replaced");
    } else {
      g_warning ("vm %s: cannot give the simulated-poisoned page at HVA 0x%" G_GINT64_MODIFIER
                 "x back: %s",
                 vmce_vm_get_name (vm), host_page, local->message);
    }
    vmce_page_replace_clear (&r);
  }
}

/* The record's totals, once the vCPUs run again */
static void
vmce_reset_pass_end_record (VmceResetPass *pass, JsonBuilder *b, const VmceResetTally *t,
                            gint64 held_us)
{
  vmce_json_builder_add_int (b, "replaced", t->replaced);
  vmce_json_builder_add_int (b, "usable", t->usable);
  vmce_json_builder_add_int (b, "failed", t->failed);
  vmce_json_builder_add_bool (b, "vm_paused", t->failed > 0);
  /* RESET read -> vCPUs running again */
  vmce_json_builder_add_int (b, "held_us", held_us);
  /* QEMU's RESET -> vCPUs running again (wall clocks of QEMU and vmced) */
  json_builder_set_member_name (b, "since_reset_us");
  if (pass->qemu_time_us > 0)
    json_builder_add_int_value (b, g_get_real_time () - pass->qemu_time_us);
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
}

static void
vmce_reset_pass_run (VmceResetPass *pass)
{
  VmceVm *vm = pass->vm;
  VmceResetGuard *g = vmce_reset_guard (vm);
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  g_autoptr(GArray) sim_pages = vmce_sim_get_protected (vm);
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  g_auto(VmceResetTally) t = {
    .failures = g_string_new (NULL),
    .tried = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL),
  };
  gint64 held_us;

  g_clear_handle_id (&pass->timeout_source, g_source_remove);
  /* no vCPU stopped (none left, or none would): the main thread does it */
  if (pass->via_tid == 0 && (pages->len > 0 || sim_pages != NULL)) {
    vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (vm), vmce_vm_get_pid (vm),
                                    vmce_reset_pass_main_stopped_cb, vmce_pass_op_new (pass),
                                    vmce_pass_op_free);
    return;
  }
  vmas = vmce_vma_table_read (vmce_vm_get_pid (vm), &error);

  json_builder_begin_object (b);
  vmce_vm_begin_record (vm, b, "reset");
  vmce_json_builder_add_string (b, "reason", pass->reason);
  json_builder_set_member_name (b, "pages");
  json_builder_begin_array (b);
  /* those QEMU's ROM reload met first */
  for (guint i = 0; i < g->early->len; i++) {
    json_builder_add_value (b, json_node_ref (g_ptr_array_index (g->early, i)));
    t.replaced++;
  }
  g_ptr_array_set_size (g->early, 0);
  vmce_reset_pass_replace_poisoned (pass, pages, vmas, error != NULL ? error->message : NULL, b,
                                    &t);
  vmce_reset_pass_give_back_simulated (pass, vmas, sim_pages, t.tried);
  json_builder_end_array (b);

  /* a page that cannot be replaced: better a paused VM than one that boots
   * into the error again and again */
  if (t.failed > 0) {
    g_autofree gchar *why = g_strdup_printf ("%u poisoned page(s) cannot be replaced after the "
                                             "reset: %s",
                                             t.failed, t.failures->str);
    vmce_vm_pause (vm, why);
  }
  vmce_reset_pass_release (pass);
  held_us = g_get_monotonic_time () - pass->start_us;
  vmce_reset_pass_end_record (pass, b, &t, held_us);
  record = json_builder_get_root (b);
  vmce_vm_emit_record (vm, "RESET", record);
  g_message ("vm %s: reset (%s): %u poisoned page(s) replaced, %u usable already, %u failed; "
             "vCPUs held %" G_GINT64_FORMAT " us",
             vmce_vm_get_name (vm), pass->reason, t.replaced, t.usable, t.failed, held_us);

  g->pass = NULL;
  vmce_reset_guard_decide_deferred (vm);
  vmce_reset_pass_free (pass);
}

void
vmce_reset_guard_on_reset (VmceVm *vm, JsonObject *data, gint64 qemu_time_us)
{
  VmceResetGuard *g = vmce_reset_guard (vm);
  g_autoptr(GPtrArray) pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  g_autoptr(GArray) sim_pages = vmce_sim_get_protected (vm);
  VmceResetPass *pass;
  const gchar *reason = data != NULL ? vmce_json_object_get_string_opt (data, "reason") : NULL;

  /* what vmced replaced before belongs to the guest's last life */
  g_hash_table_remove_all (g->recent);
  if (vmce_vm_get_state (vm) != VMCE_VM_READY || vmce_vm_get_watch (vm) == NULL)
    return;
  if (pages->len == 0 && (sim_pages == NULL || sim_pages->len == 0) && g->early->len == 0)
    return;
  if (g->pass != NULL) {
    /* a reset while the last one's pass waits for its vCPUs: the same
     * pass covers both */
    return;
  }
  pass = g_new0 (VmceResetPass, 1);
  pass->vm = vmce_vm_ref (vm);
  pass->id = ++vmce_reset_pass_next_id;
  pass->start_us = g_get_monotonic_time ();
  pass->qemu_time_us = qemu_time_us;
  pass->reason = g_strdup (reason != NULL ? reason : "reset");
  pass->held = g_array_new (FALSE, FALSE, sizeof (pid_t));
  g->pass = pass;
  g_message ("vm %s: reset (%s) with %u poisoned page(s): holding its vCPUs to replace them",
             vmce_vm_get_name (vm), pass->reason, pages->len + g->early->len);

  /* only pages QEMU's ROM reload met, replaced already: nothing to hold */
  pass->waiting = pages->len > 0 || sim_pages != NULL ? vmce_vm_get_vcpus (vm)->len : 0;
  if (pass->waiting == 0) {
    vmce_reset_pass_run (pass);
    return;
  }
  pass->timeout_source = g_timeout_add (VMCE_RESET_HOLD_TIMEOUT_MS, vmce_reset_pass_timeout_cb,
                                        pass);
  /* copied: a vCPU held already runs its op at once, and the last one
   * runs the whole pass, which may end the VM's session */
  {
    guint id = pass->id;
    g_autoptr(GArray) tids = g_array_new (FALSE, FALSE, sizeof (pid_t));

    for (guint i = 0; i < vmce_vm_get_vcpus (vm)->len; i++)
      g_array_append_val (tids, g_array_index (vmce_vm_get_vcpus (vm), VmceVcpu, i).tid);
    for (guint i = 0; i < tids->len && g->pass != NULL && g->pass->id == id; i++)
      vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (vm), g_array_index (tids, pid_t, i),
                                      vmce_pass_hold_cb, vmce_pass_op_new (g->pass),
                                      vmce_pass_hold_free);
  }
}

void
vmce_reset_guard_cancel_all (VmceVm *vm)
{
  VmceResetGuard *g = vmce_reset_guard (vm);
  VmceResetPass *pass = g->pass;

  if (pass != NULL) {
    g->pass = NULL;
    vmce_reset_pass_release (pass);
    vmce_reset_pass_free (pass);
  }
  while (g->deferred != NULL && g->deferred->len > 0) {
    VmceDeferredStop *d = g_ptr_array_steal_index (g->deferred, 0);
    guint64 page = (guint64) (guintptr) d->stop.info.si_addr & VMCE_PAGE_MASK;

    /* the signal as it came, what QEMU would have got without vmced; but
     * a page vmced took away itself is given back as it lets go, and the
     * access is tried again then */
    if (vmce_vm_get_watch (vm) != NULL)
      vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), d->stop.tid,
                                vmce_sim_is_protected (vm, page) ? 0 : d->stop.info.si_signo);
    vmce_deferred_stop_free (d);
  }
}
