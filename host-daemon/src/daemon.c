/*
 * What vmced is: the VMs it watches, its journal, its control socket.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-daemon"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "daemon.h"
#include "error.h"
#include "forward.h"
#include "guest-answer.h"
#include "journal.h"
#include "json-util.h"
#include "hugepage-loss.h"
#include "hugepage-salvage.h"
#include "log-writer.h"
#include "metrics.h"
#include "metrics-export.h"
#include "migration-guard.h"
#include "migration-incoming.h"
#include "poison-index.h"
#include "proc-info.h"
#include "ras-lookup.h"
#include "reset-guard.h"
#include "sim-poison.h"
#include "vm-json.h"

/* records kept in memory for `vmcectl events`: as their JSON lines, not
 * json-glib trees, which took about 8 KB a memory-error record (8 MB for
 * the ring) where the line takes one; an attach record, with the VM's
 * layout, is larger still, and a host attaches hundreds. Read back only
 * when asked for */
#define VMCE_RECENT_MAX 1000

typedef struct {
  gchar *vm; /* the VM it is about, for filtering without parsing */
  gint64 host_pfn; /* the host page it is about, -1 for none: `vmcectl events --pfn` */
  gchar *line;
} VmceRecentRecord;

/* rasdaemon's row for a host page is looked for after these waits (ms):
 * it reads the kernel's tracepoint some time after the signal */
static const guint vmce_ras_waits_ms[] = { 500, 1000, 2000, 4000, 0 };

static void
vmce_recent_record_free (VmceRecentRecord *r)
{
  g_free (r->vm);
  g_free (r->line);
  g_free (r);
}

struct _VmceDaemon {
  VmceJournal *journal;
  VmceControl *control;
  GPtrArray *vms; /* of VmceVm, owned */
  GQueue recent;  /* of VmceRecentRecord */
  guint64 next_seq;
  guint inject_gap_ms;
  gint64 start_time_us;
  /* poisoned pages of QEMUs not watched now, from the journal */
  VmcePoisonIndex *index;
  VmcePoisonIndexStats replay;
  VmceRasLookup *ras; /* what rasdaemon recorded for a real error's host page */
  VmceMigrationPolicy migration;
  VmceHugepagePolicy hugepage;
  gchar *libvirt_uri; /* libvirt mode's; NULL in direct mode */
  const VmceConfig *config;
  VmceMetrics *metrics;
  VmceMetricsExport *export; /* NULL: no metrics asked for */
};

/* (cheap: it schedules the write, maybe while a QEMU thread waits) */
static void
vmce_daemon_metrics_changed (VmceDaemon *self)
{
  if (self->export != NULL)
    vmce_metrics_export_changed (self->export);
}

static void
vmce_daemon_journal_error_cb (gpointer journal, gpointer user_data)
{
  VmceDaemon *self = user_data;

  vmce_metrics_count_journal_error (self->metrics);
  vmce_daemon_metrics_changed (self);
}

/* What vmced knew of poisoned pages before it stopped: a reset after a
 * restart must still replace them (poison-index.h) */
static gboolean
vmce_daemon_replay_journal (VmceDaemon *self, const gchar *path, GError **error)
{
  VmcePoisonIndexStats *st = &self->replay;

  if (!vmce_poison_index_load (self->index, path, st, error))
    return FALSE;
  if (st->bad_lines > 0)
    g_warning ("journal %s:%" G_GUINT64_FORMAT ": %s, skipped (%" G_GUINT64_FORMAT " such "
               "line(s)); every other record counts",
               path, st->first_bad_line,
               st->first_bad_line == st->lines
                   ? "the last record was cut short (vmced stopped in the middle of a write)"
                   : "not a JSON record",
               st->bad_lines);
  if (st->records > 0)
    g_message ("journal %s: %" G_GUINT64_FORMAT " record(s) read in %" G_GINT64_FORMAT " us: "
               "%u poisoned page(s) of %u QEMU(s) kept for when vmced attaches to them",
               path, st->records, st->elapsed_us, vmce_poison_index_get_n_pages (self->index),
               vmce_poison_index_get_n_qemus (self->index));
  return TRUE;
}

void
vmce_daemon_keep_poisoned (VmceDaemon *self, VmceVm *vm, gboolean exited)
{
  if (exited) {
    vmce_poison_index_forget (self->index, vmce_vm_get_qemu_id (vm));
    return;
  }
  if (g_hash_table_size (vmce_vm_get_poisoned (vm)) == 0)
    return;
  /* the vm keeps an empty set; the index takes the pages */
  vmce_poison_index_keep (self->index, vmce_vm_get_qemu_id (vm), vmce_vm_steal_poisoned (vm));
}

/* Before attaching: what is known of this QEMU's poisoned pages */
static void
vmce_daemon_restore_poisoned (VmceDaemon *self, VmceVm *vm)
{
  g_autofree gchar *other = NULL;
  g_autofree gchar *from = NULL;
  guint64 n_records = 0;
  gboolean kept = FALSE;
  GHashTable *pages;

  pages = vmce_poison_index_take (self->index, vmce_vm_get_qemu_id (vm), &n_records, &kept, &other);
  if (pages != NULL) {
    from = kept ? g_strdup_printf ("kept: %u page(s) known when vmced last detached from this "
                                   "QEMU",
                                   g_hash_table_size (pages))
                : g_strdup_printf ("journal: %u page(s) rebuilt from %" G_GUINT64_FORMAT
                                   " record(s) of this QEMU (%s)",
                                   g_hash_table_size (pages), n_records, vmce_vm_get_qemu_id (vm));
    g_message ("vm pid %d: %s", vmce_vm_get_pid (vm), from);
    vmce_vm_restore_poisoned (vm, pages, from);
    return;
  }
  if (other != NULL) {
    g_autofree gchar *when = vmce_format_time (vmce_proc_identity_start_time (other));
    from = g_strdup_printf ("none: the journal's poisoned pages for pid %d are of another process "
                            "(%s, started %s), not this QEMU (%s): not restored",
                            vmce_vm_get_pid (vm), other, when, vmce_vm_get_qemu_id (vm));
    g_warning ("%s", from);
    vmce_vm_set_poisoned_from (vm, from);
  }
}

static void
vmce_daemon_ras_record_cb (JsonNode *record, gpointer user_data)
{
  vmce_daemon_emit_record (user_data, "HOST_PAGE", record);
}

VmceDaemon *
vmce_daemon_new (const VmceDaemonOptions *options, GError **error)
{
  g_autoptr(VmceDaemon) self = g_new0 (VmceDaemon, 1);

  self->vms = g_ptr_array_new_with_free_func ((GDestroyNotify) vmce_vm_unref);
  g_queue_init (&self->recent);
  self->inject_gap_ms = options->inject_gap_ms;
  self->migration = options->migration;
  self->hugepage = options->hugepage;
  self->start_time_us = g_get_monotonic_time ();
  self->index = vmce_poison_index_new ();
  self->metrics = vmce_metrics_new (g_get_real_time (), PACKAGE_VERSION);
  self->ras = vmce_ras_lookup_new (VMCE_RASDAEMON_DB, vmce_ras_waits_ms, vmce_daemon_ras_record_cb, self);
  if (!vmce_daemon_replay_journal (self, options->journal_path, error))
    return NULL;
  self->journal = vmce_journal_open (options->journal_path, error);
  if (self->journal == NULL)
    return NULL;
  vmce_journal_set_error_func (self->journal, vmce_daemon_journal_error_cb, self);
  self->control = vmce_control_new (options->socket_path, error);
  if (self->control == NULL)
    return NULL;
  return g_steal_pointer (&self);
}

VmceControl *
vmce_daemon_get_control (VmceDaemon *self)
{
  return self->control;
}

void
vmce_daemon_shutdown (VmceDaemon *self)
{
  g_autoptr(GError) error = NULL;

  /* copy: shutting a VM down removes it from the list */
  while (self->vms->len > 0) {
    g_autoptr(VmceVm) vm = vmce_vm_ref (g_ptr_array_index (self->vms, self->vms->len - 1));
    vmce_vm_shutdown_sync (vm);
    g_ptr_array_remove (self->vms, vm);
  }
  if (self->journal != NULL && !vmce_journal_flush_sync (self->journal, &error))
    g_warning ("%s", error->message);
}

void
vmce_daemon_free (VmceDaemon *self)
{
  if (self == NULL)
    return;
  vmce_daemon_shutdown (self);
  /* (before the journal: its last failure would tell it) */
  g_clear_pointer (&self->export, vmce_metrics_export_free);
  g_clear_pointer (&self->control, vmce_control_free);
  g_clear_pointer (&self->journal, vmce_journal_free);
  g_clear_pointer (&self->index, vmce_poison_index_free);
  g_clear_pointer (&self->metrics, vmce_metrics_free);
  g_clear_pointer (&self->ras, vmce_ras_lookup_free);
  g_ptr_array_unref (self->vms);
  g_queue_clear_full (&self->recent, (GDestroyNotify) vmce_recent_record_free);
  g_free (self->libvirt_uri);
  g_free (self);
}

static const gchar *vmce_record_vm_name (JsonNode *record);

static void
vmce_daemon_keep_recent (VmceDaemon *self, JsonNode *record)
{
  VmceRecentRecord *r = g_new0 (VmceRecentRecord, 1);

  JsonNode *pfn = json_object_get_member (json_node_get_object (record), "host_pfn");

  r->vm = g_strdup (vmce_record_vm_name (record));
  r->host_pfn = pfn != NULL && json_node_get_value_type (pfn) == G_TYPE_INT64 ? json_node_get_int (pfn) : -1;
  r->line = vmce_json_to_line (record);
  g_queue_push_tail (&self->recent, r);
  while (self->recent.length > VMCE_RECENT_MAX)
    vmce_recent_record_free (g_queue_pop_head (&self->recent));
}

/* The journald line of a memory error, its kind (MESSAGE_ID) by what
 * became of it: what an operator's alert matches */
static VmceLogKind
vmce_daemon_log_kind (VmceResult result)
{
  switch (result) {
  case VMCE_RESULT_INJECTED:
  case VMCE_RESULT_COALESCED:
  case VMCE_RESULT_MIGRATED: /* (told on the destination) */
    return VMCE_LOG_FORWARDED;
  case VMCE_RESULT_PASSED:
    return VMCE_LOG_PASSED;
  case VMCE_RESULT_IGNORED:
    return VMCE_LOG_IGNORED;
  case VMCE_RESULT_REFUSED:
    return VMCE_LOG_REFUSED;
  case VMCE_RESULT_STOPPED:
    return VMCE_LOG_PAUSED;
  case VMCE_RESULT_PENDING:
  case VMCE_RESULT_FAILED:
    break;
  }
  return VMCE_LOG_NOT_INJECTED;
}

static void
vmce_daemon_log_memory_error (const VmceMceEvent *ev)
{
  const gchar *what = ev->si_code != 0 ? vmce_si_code_to_string (ev->si_code) : "injection";
  const gchar *sep = ev->detail != NULL ? " - " : "";
  const gchar *detail = ev->detail != NULL ? ev->detail : "";
  VmceLogKind kind = vmce_daemon_log_kind (ev->result);

  if (ev->have_gpa)
    vmce_log_record (kind, ev->vm, &ev->gpa, ev->seq,
                     "vm %s: %s at HVA 0x%" G_GINT64_MODIFIER "x, GPA 0x%" G_GINT64_MODIFIER "x: %s%s%s", ev->vm,
                     what, ev->hva, ev->gpa, vmce_result_to_string (ev->result), sep, detail);
  else
    vmce_log_record (kind, ev->vm, NULL, ev->seq, "vm %s: %s at HVA 0x%" G_GINT64_MODIFIER "x: %s to QEMU%s%s",
                     ev->vm, what, ev->hva, vmce_result_to_string (ev->result), sep, detail);
}

JsonNode *
vmce_daemon_emit_event (VmceDaemon *self, VmceMceEvent *ev)
{
  JsonNode *json;

  ev->seq = ++self->next_seq;
  json = vmce_mce_event_to_json (ev);
  vmce_journal_append (self->journal, json);
  vmce_daemon_keep_recent (self, json);
  vmce_control_broadcast (self->control, "MEMORY_ERROR", json);
  vmce_daemon_log_memory_error (ev);
  vmce_metrics_count_error (self->metrics, ev->vm, ev->kind, ev->result);
  vmce_daemon_metrics_changed (self);
  /* the host's own record of a real error's page, once rasdaemon wrote it */
  if (g_strcmp0 (ev->source, "kernel") == 0 && ev->host_pfn.from != VMCE_HOST_PFN_UNKNOWN &&
      ev->host_pfn.from != VMCE_HOST_PFN_NONE)
    vmce_ras_lookup_start (self->ras, ev->vm, ev->seq, ev->host_pfn.pfn);
  return json;
}

void
vmce_daemon_emit_record (VmceDaemon *self, const gchar *event, JsonNode *record)
{
  vmce_journal_append (self->journal, record);
  vmce_daemon_keep_recent (self, record);
  vmce_control_broadcast (self->control, event, record);
  vmce_metrics_count_record (self->metrics, record);
  vmce_daemon_metrics_changed (self);
}

static const gchar *
vmce_record_vm_name (JsonNode *record)
{
  JsonObject *obj = json_node_get_object (record);
  JsonNode *vm = json_object_get_member (obj, "vm");

  /* attach records carry the whole vm object */
  if (vm != NULL && JSON_NODE_HOLDS_OBJECT (vm))
    return vmce_json_object_get_string_opt (json_node_get_object (vm), "name");
  return vmce_json_object_get_string_opt (obj, "vm");
}

JsonNode *
vmce_daemon_get_recent (VmceDaemon *self, const gchar *vm, gint64 host_pfn, guint limit)
{
  g_autoptr(JsonArray) arr = json_array_new ();
  g_autoptr(GPtrArray) matching = g_ptr_array_new ();
  JsonNode *node = json_node_new (JSON_NODE_ARRAY);
  guint first;

  for (GList *l = self->recent.head; l != NULL; l = l->next) {
    VmceRecentRecord *r = l->data;
    if ((vm == NULL || g_strcmp0 (r->vm, vm) == 0) && (host_pfn < 0 || r->host_pfn == host_pfn))
      g_ptr_array_add (matching, r);
  }
  first = limit > 0 && matching->len > limit ? matching->len - limit : 0;
  for (guint i = first; i < matching->len; i++) {
    VmceRecentRecord *r = g_ptr_array_index (matching, i);
    g_autoptr(GError) error = NULL;
    JsonNode *record = vmce_json_parse_object (r->line, -1, "recent record", &error);

    /* written by vmce_json_to_line() above: cannot fail but by a bug */
    if (record == NULL) {
      g_warning ("%s", error->message);
      continue;
    }
    json_array_add_element (arr, record);
  }
  json_node_set_array (node, arr);
  return node;
}

typedef struct {
  VmceDaemon *daemon;
  VmceVm *vm;
} VmceAttachData;

/* The journal keeps what an operator would ask about later: which QEMU
 * was not watched, and why (a QEMU gone before vmced got to it, a monitor
 * that answered nonsense, one held by another client). The requester has
 * had the same line as its error; a libvirt host's attaches, and those of
 * [attach]'s sockets, have no requester to read it */
static void
vmce_daemon_journal_attach_failed_as (VmceDaemon *self, const gchar *name, pid_t pid, const gchar *who,
                                      const GError *error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *time = vmce_format_time (g_get_real_time ());

  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "type", "attach-failed");
  vmce_json_builder_add_string (b, "time", time);
  vmce_json_builder_add_string (b, "vm", name);
  vmce_json_builder_add_int (b, "pid", pid);
  vmce_json_builder_add_string (b, "reason", error->message);
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  vmce_daemon_emit_record (self, "ATTACH_FAILED", record);
  vmce_log_record (VMCE_LOG_ATTACH_FAILED, name, NULL, 0, "%s: cannot attach: %s", who, error->message);
}

static void
vmce_daemon_journal_attach_failed (VmceDaemon *self, VmceVm *vm, const GError *error)
{
  g_autofree gchar *who = vmce_vm_get_name (vm) != NULL ? g_strdup_printf ("vm %s", vmce_vm_get_name (vm))
                                                         : g_strdup_printf ("pid %d", vmce_vm_get_pid (vm));

  vmce_daemon_journal_attach_failed_as (self, vmce_vm_get_name (vm), vmce_vm_get_pid (vm), who, error);
}

void
vmce_daemon_attach_failed (VmceDaemon *self, pid_t pid, const gchar *who, const GError *error)
{
  vmce_daemon_journal_attach_failed_as (self, NULL, pid, who, error);
}

static void
vmce_daemon_attach_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  VmceAttachData *data = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) receiving = NULL;
  g_autofree gchar *sender = NULL;
  gboolean autostart_off = FALSE;

  if (!vmce_vm_attach_finish (data->vm, res, &error)) {
    g_ptr_array_remove (data->daemon->vms, data->vm);
    vmce_daemon_journal_attach_failed (data->daemon, data->vm, error);
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  /* its name is known now */
  vmce_migration_guard_set_policy (data->vm,
                                   vmce_config_migration_for (data->daemon->config,
                                                              vmce_vm_get_name (data->vm),
                                                              data->daemon->migration));
  vmce_hugepage_loss_set_policy (data->vm, vmce_config_hugepage_for (data->daemon->config,
                                                                     vmce_vm_get_name (data->vm),
                                                                     data->daemon->hugepage));
  /* a migration's destination whose marks were not in when the last
   * vmced went: this one puts them in */
  receiving = vmce_poison_index_take_receiving (data->daemon->index, vmce_vm_get_qemu_id (data->vm), &sender,
                                                &autostart_off);
  if (receiving != NULL)
    vmce_migration_incoming_resume (data->vm, sender, receiving, autostart_off);
  g_task_return_pointer (task, vmce_vm_ref (data->vm), (GDestroyNotify) vmce_vm_unref);
}

static void
vmce_attach_data_free (VmceAttachData *data)
{
  vmce_vm_unref (data->vm);
  g_free (data);
}

/* --- what a vm session reports (VmceVmHandler) ----------------------------- */

/* A memory-error stop goes past the guards to the forwarder */
static void
vmce_daemon_vm_memory_error (VmceVm *vm, const VmceStop *stop, gboolean again, gpointer user_data)
{
  /* a page known to be poisoned, touched as the guest resets */
  if (vmce_reset_guard_signal (vm, stop, again))
    return;
  /* the migration thread reading a poisoned page */
  if (vmce_migration_guard_signal (vm, stop))
    return;
  vmce_forward_signal (vm, stop);
}

/* A signal-stop past the salvage of a lost huge page: the guards, the
 * simulator's rewrite, the forwarder. FALSE: not a memory error, the
 * thread gets its signal as it came. */
static gboolean
vmce_daemon_vm_signal_stop_rest (VmceVm *vm, pid_t tid, siginfo_t *info, gint64 stop_time_us, gpointer user_data)
{
  guint64 request_id = 0;
  gboolean simulated;
  VmceStop stop;

  if (vmce_reset_guard_stale_fault (vm, tid, info))
    return TRUE;
  simulated = vmce_sim_rewrite (vm, tid, info, &request_id);
  if (info->si_signo != SIGBUS ||
      (info->si_code != BUS_MCEERR_AO && info->si_code != BUS_MCEERR_AR))
    return FALSE;
  stop = (VmceStop) { .tid = tid, .info = *info, .time_us = stop_time_us,
                      .source = simulated ? "simulated" : "kernel", .request_id = request_id };
  vmce_daemon_vm_memory_error (vm, &stop, FALSE, user_data);
  return TRUE;
}

/* The AO of a huge page being salvaged, held until it was (hugepage-salvage.c) */
static void
vmce_daemon_vm_signal_stop_later (VmceVm *vm, pid_t tid, siginfo_t *info, gint64 stop_time_us, gpointer user_data)
{
  if (!vmce_daemon_vm_signal_stop_rest (vm, tid, info, stop_time_us, user_data) && vmce_vm_get_watch (vm) != NULL)
    vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), tid, info->si_signo);
}

static gboolean
vmce_daemon_vm_signal_stop (VmceVm *vm,
                            pid_t tid,
                            siginfo_t *info,
                            gint64 stop_time_us,
                            gpointer user_data)
{
  /* a touch of a huge page being salvaged waits for it, then tries again */
  if (vmce_hugepage_salvage_fault (vm, tid, info, vmce_hugepage_loss_get_policy (vm) == VMCE_HUGEPAGE_SALVAGE,
                                   stop_time_us, vmce_daemon_vm_signal_stop_later, user_data))
    return TRUE;
  return vmce_daemon_vm_signal_stop_rest (vm, tid, info, stop_time_us, user_data);
}

static void
vmce_daemon_vm_qemu_event (VmceVm *vm,
                           const gchar *name,
                           JsonObject *data,
                           gint64 time_us,
                           gpointer user_data)
{
  if (g_strcmp0 (name, "MEMORY_FAILURE") == 0 && data != NULL)
    vmce_forward_qemu_event (vm, data);
  else if (g_strcmp0 (name, "MIGRATION") == 0 && data != NULL)
    vmce_migration_guard_on_event (vm, data);
  else if (g_strcmp0 (name, "RESET") == 0) {
    vmce_reset_guard_on_reset (vm, data, time_us);
    vmce_guest_answer_on_reset (vm);
  }
  else if (g_strcmp0 (name, "STOP") == 0)
    vmce_migration_guard_on_stop (vm, time_us);
}

static JsonNode *
vmce_daemon_vm_memory_error_event (VmceVm *vm, VmceMceEvent *ev, gpointer user_data)
{
  JsonNode *json = vmce_daemon_emit_event (user_data, ev);

  /* after it has its seq: the loss's record names it */
  vmce_hugepage_loss_on_event (vm, ev);
  vmce_migration_guard_on_error (vm, ev);
  vmce_guest_answer_on_event (vm, ev);
  return json;
}

static void
vmce_daemon_vm_record (VmceVm *vm, const gchar *event, JsonNode *record, gpointer user_data)
{
  vmce_daemon_emit_record (user_data, event, record);
}

static void
vmce_daemon_vm_letting_go (VmceVm *vm, const gchar *why, gboolean release_pages, gpointer user_data)
{
  vmce_reset_guard_cancel_all (vm);
  vmce_forward_cancel_all (vm, why);
  vmce_sim_cancel_all (vm, why);
  vmce_hugepage_loss_cancel_all (vm);
  vmce_hugepage_salvage_cancel_all (vm);
  if (release_pages)
    vmce_sim_release_all (vm);
}

/* The attach record: the vm as vmcectl vm shows it but for the layout,
 * which the journal's readers do not need, and the poisoned pages: counted,
 * not listed, since the journal has a record of each already (a restarted
 * vmced that attaches to a QEMU of 10^4 pages built them all into one
 * record, and its heap stayed that size: 39 MB against 18 here) */
static void
vmce_daemon_vm_attached (VmceVm *vm, gpointer user_data)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *time = vmce_format_time (g_get_real_time ());

  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "type", "attach");
  vmce_json_builder_add_string (b, "time", time);
  json_builder_set_member_name (b, "vm");
  json_builder_add_value (b, vmce_vm_to_json (vm, VMCE_VM_JSON_LISTS));
  json_builder_end_object (b);
  record = json_builder_get_root (b);
  /* (before its record: the change that record makes shows it) */
  vmce_metrics_vm_attached (((VmceDaemon *) user_data)->metrics, vmce_vm_get_name (vm));
  vmce_daemon_emit_record (user_data, "VM_ATTACHED", record);
}

static void
vmce_daemon_vm_gone (VmceVm *vm, gboolean was_ready, gboolean exited, gpointer user_data)
{
  VmceDaemon *self = user_data;

  if (was_ready) {
    vmce_metrics_vm_gone (self->metrics, vmce_vm_get_name (vm));
    vmce_daemon_metrics_changed (self);
    vmce_daemon_keep_poisoned (self, vm, exited);
  }
  vmce_migration_guard_on_detach (vm);
  vmce_daemon_remove_vm (user_data, vm);
}

static gboolean
vmce_daemon_vm_found_taken_away (VmceVm *vm, guint64 hva, guint64 gpa, gpointer user_data)
{
  if (vmce_sim_is_protected (vm, hva))
    return FALSE;
  vmce_sim_adopt_page (vm, hva, gpa);
  return TRUE;
}

static void
vmce_daemon_vm_to_json (VmceVm *vm, JsonBuilder *b, gpointer user_data)
{
  vmce_json_builder_add_int (b, "simulated_poisoned_host_pages", vmce_sim_count_protected (vm));
  vmce_migration_guard_to_json (vm, b);
  vmce_hugepage_loss_to_json (vm, b);
  vmce_hugepage_salvage_to_json (vm, b);
  vmce_forward_to_json (vm, b);
}

static GPtrArray *
vmce_daemon_vm_peers (VmceVm *vm, gpointer user_data)
{
  return vmce_daemon_get_vms (user_data);
}

static const VmceVmHandler vmce_daemon_vm_handler = {
  .signal_stop = vmce_daemon_vm_signal_stop,
  .memory_error = vmce_daemon_vm_memory_error,
  .qemu_event = vmce_daemon_vm_qemu_event,
  .memory_error_event = vmce_daemon_vm_memory_error_event,
  .record = vmce_daemon_vm_record,
  .letting_go = vmce_daemon_vm_letting_go,
  .attached = vmce_daemon_vm_attached,
  .gone = vmce_daemon_vm_gone,
  .found_taken_away = vmce_daemon_vm_found_taken_away,
  .to_json = vmce_daemon_vm_to_json,
  .peers = vmce_daemon_vm_peers,
};

static VmceVm *
vmce_daemon_new_vm (VmceDaemon *self,
                    pid_t pid,
                    const gchar *qmp_path,
                    const gchar *name,
                    const gchar *agent_path,
                    VmcePolicy policy)
{
  VmceVm *vm = vmce_vm_new (&vmce_daemon_vm_handler, self, pid, qmp_path, name, agent_path, policy);

  vmce_forward_set_gap (vm, self->inject_gap_ms);
  return vm;
}

/* Takes @vm; refuses a second watcher of one QEMU or one name */
static void
vmce_daemon_attach_vm (VmceDaemon *self, VmceVm *vm, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, NULL, callback, user_data);
  VmceAttachData *data;

  for (guint i = 0; i < self->vms->len; i++) {
    VmceVm *other = g_ptr_array_index (self->vms, i);
    if (vmce_vm_get_pid (other) == vmce_vm_get_pid (vm) || (vmce_vm_get_name (vm) != NULL && g_strcmp0 (vmce_vm_get_name (other), vmce_vm_get_name (vm)) == 0)) {
      g_task_return_new_error (task, VMCE_ERROR, VMCE_ERROR_BUSY,
                               "vmced already watches %s (pid %d)", vmce_vm_get_name (other), vmce_vm_get_pid (other));
      g_object_unref (task);
      vmce_vm_unref (vm);
      return;
    }
  }
  vmce_daemon_restore_poisoned (self, vm);
  data = g_new0 (VmceAttachData, 1);
  data->daemon = self;
  data->vm = vm;
  g_task_set_task_data (task, data, (GDestroyNotify) vmce_attach_data_free);
  g_ptr_array_add (self->vms, vmce_vm_ref (data->vm));
  vmce_vm_attach_async (data->vm, vmce_daemon_attach_cb, task);
}

void
vmce_daemon_attach_async (VmceDaemon *self,
                          pid_t pid,
                          const gchar *qmp_path,
                          const gchar *name,
                          const gchar *agent_path,
                          VmcePolicy policy,
                          GAsyncReadyCallback callback,
                          gpointer user_data)
{
  vmce_daemon_attach_vm (self, vmce_daemon_new_vm (self, pid, qmp_path, name, agent_path, policy),
                         callback, user_data);
}

void
vmce_daemon_attach_domain_async (VmceDaemon *self,
                                 const VmceDomainInfo *domain,
                                 GSocket *qmp_socket,
                                 gpointer monitor,
                                 GDestroyNotify monitor_free,
                                 VmcePolicy policy,
                                 GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  VmceVm *vm = vmce_daemon_new_vm (self, domain->pid, NULL, domain->name, domain->agent_path,
                                   policy);

  vmce_vm_set_monitor (vm, qmp_socket, monitor, monitor_free);
  vmce_vm_set_uuid (vm, domain->uuid);
  vmce_daemon_attach_vm (self, vm, callback, user_data);
}

void
vmce_daemon_attach_socket_async (VmceDaemon *self,
                                 pid_t pid,
                                 GSocket *qmp_socket,
                                 const gchar *qmp_path,
                                 const gchar *name,
                                 const gchar *agent_path,
                                 VmcePolicy policy,
                                 GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  VmceVm *vm = vmce_daemon_new_vm (self, pid, qmp_path, name, agent_path, policy);

  vmce_vm_set_monitor (vm, qmp_socket, NULL, NULL);
  vmce_daemon_attach_vm (self, vm, callback, user_data);
}

VmceVm *
vmce_daemon_attach_finish (VmceDaemon *self, GAsyncResult *res, GError **error)
{
  return g_task_propagate_pointer (G_TASK (res), error);
}

VmceVm *
vmce_daemon_lookup_vm (VmceDaemon *self, const gchar *name_or_pid, GError **error)
{
  guint64 pid = 0;

  if (name_or_pid == NULL) {
    if (self->vms->len == 1)
      return g_ptr_array_index (self->vms, 0);
    g_set_error (error, VMCE_ERROR, VMCE_ERROR_INVALID_PARAMETER,
                 "name the vm: vmced watches %u", self->vms->len);
    return NULL;
  }
  (void) vmce_parse_u64 (name_or_pid, &pid, NULL);
  for (guint i = 0; i < self->vms->len; i++) {
    VmceVm *vm = g_ptr_array_index (self->vms, i);
    if (g_strcmp0 (vmce_vm_get_name (vm), name_or_pid) == 0 || (pid != 0 && (guint64) vmce_vm_get_pid (vm) == pid))
      return vm;
  }
  g_set_error (error, VMCE_ERROR, VMCE_ERROR_NOT_FOUND, "vmced watches no vm named %s",
               name_or_pid);
  return NULL;
}

GPtrArray *
vmce_daemon_get_vms (VmceDaemon *self)
{
  return self->vms;
}

void
vmce_daemon_remove_vm (VmceDaemon *self, VmceVm *vm)
{
  g_ptr_array_remove (self->vms, vm);
}

void
vmce_daemon_set_config (VmceDaemon *self, const VmceConfig *config)
{
  self->config = config;
}

static gint64
vmce_daemon_rss_kb (void)
{
  gint64 kb = -1;

  return vmce_proc_status_number (0, "VmRSS", &kb, NULL) ? kb : -1;
}

void
vmce_daemon_set_libvirt_uri (VmceDaemon *self, const gchar *uri)
{
  g_free (self->libvirt_uri);
  self->libvirt_uri = g_strdup (uri);
}

JsonNode *
vmce_daemon_status_to_json (VmceDaemon *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_string_value (b, PACKAGE_VERSION);
  json_builder_set_member_name (b, "pid");
  json_builder_add_int_value (b, getpid ());
  json_builder_set_member_name (b, "uptime_s");
  json_builder_add_int_value (b, (g_get_monotonic_time () - self->start_time_us) / G_USEC_PER_SEC);
  json_builder_set_member_name (b, "rss_kb");
  json_builder_add_int_value (b, vmce_daemon_rss_kb ());
  /* what a drain asks of the vmced where domains land */
  json_builder_set_member_name (b, "libvirt");
  if (self->libvirt_uri != NULL)
    json_builder_add_string_value (b, self->libvirt_uri);
  else
    json_builder_add_null_value (b);
  vmce_json_builder_add_string (b, "migration", vmce_migration_policy_to_string (self->migration));
  json_builder_set_member_name (b, "journal");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "path");
  json_builder_add_string_value (b, vmce_journal_get_path (self->journal));
  json_builder_set_member_name (b, "records");
  json_builder_add_int_value (b, (gint64) vmce_journal_get_n_appended (self->journal));
  json_builder_set_member_name (b, "synced");
  json_builder_add_int_value (b, (gint64) vmce_journal_get_n_synced (self->journal));
  vmce_json_builder_add_string (b, "state", vmce_journal_get_last_error (self->journal) != NULL
                                                ? "degraded" : "ok");
  vmce_json_builder_add_int (b, "held", (gint64) vmce_journal_get_n_held (self->journal));
  json_builder_set_member_name (b, "error");
  if (vmce_journal_get_last_error (self->journal) != NULL)
    json_builder_add_string_value (b, vmce_journal_get_last_error (self->journal));
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "replay");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "records");
  json_builder_add_int_value (b, (gint64) self->replay.records);
  json_builder_set_member_name (b, "bad_lines");
  json_builder_add_int_value (b, (gint64) self->replay.bad_lines);
  json_builder_set_member_name (b, "elapsed_us");
  json_builder_add_int_value (b, self->replay.elapsed_us);
  json_builder_set_member_name (b, "kept_pages");
  json_builder_add_int_value (b, vmce_poison_index_get_n_pages (self->index));
  json_builder_end_object (b);
  json_builder_set_member_name (b, "vms");
  json_builder_begin_array (b);
  for (guint i = 0; i < self->vms->len; i++)
    json_builder_add_value (b, vmce_vm_to_json (g_ptr_array_index (self->vms, i), VMCE_VM_JSON_SUMMARY));
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* --- metrics (metrics.h) ------------------------------------------------------ */

void
vmce_daemon_set_metrics_export (VmceDaemon *self, VmceMetricsExport *export)
{
  g_clear_pointer (&self->export, vmce_metrics_export_free);
  self->export = export;
}

/* The gauges are read now: the poisoned pages of each VM (restored from
 * the journal at attach, so a restarted vmced shows them again) and of the
 * QEMUs not watched */
GBytes *
vmce_daemon_render_metrics (VmceMetricsFormat format, gpointer user_data)
{
  VmceDaemon *self = user_data;

  for (guint i = 0; i < self->vms->len; i++) {
    VmceVm *vm = g_ptr_array_index (self->vms, i);
    if (vmce_vm_get_state (vm) == VMCE_VM_READY)
      vmce_metrics_set_poisoned (self->metrics, vmce_vm_get_name (vm),
                                 g_hash_table_size (vmce_vm_get_poisoned (vm)));
  }
  vmce_metrics_set_poisoned_detached (self->metrics, vmce_poison_index_get_n_pages (self->index));
  return vmce_metrics_render (self->metrics, format);
}
