/*
 * vmced's metrics and their text (see metrics.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-metrics"

#include <string.h>

#include "json-util.h"
#include "metrics.h"
#include "policy.h"

static const gchar *const kinds[] = { "ao", "ar" };
#define N_KINDS G_N_ELEMENTS (kinds)
static const gchar *const outcomes[] = { "forwarded", "not_injected", "refused", "passed", "ignored",
                                         "paused" };
#define N_OUTCOMES G_N_ELEMENTS (outcomes)
/* indexed by VmceHugepagePolicy */
static const gchar *const hugepage_policies[] = { "one", "all", "salvage" };
#define N_HUGEPAGE G_N_ELEMENTS (hugepage_policies)
static const gchar *const salvage_results[] = { "salvaged", "failed" };

typedef struct {
  gboolean attached;
  guint64 errors[N_KINDS][N_OUTCOMES];
  guint64 hugepage_losses[N_HUGEPAGE];
  guint64 salvages[2];
  guint64 migrations_refused;
  guint poisoned;
} VmceVmMetrics;

struct _VmceMetrics {
  gint64 start_time_us;
  gchar *version;
  GHashTable *vms; /* name -> VmceVmMetrics */
  guint64 attach_failures;
  guint64 journal_errors;
  guint poisoned_detached;
  guint64 generation;
};

VmceMetrics *
vmce_metrics_new (gint64 start_time_us, const gchar *version)
{
  VmceMetrics *self = g_new0 (VmceMetrics, 1);

  self->start_time_us = start_time_us;
  self->version = g_strdup (version);
  self->vms = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return self;
}

void
vmce_metrics_free (VmceMetrics *self)
{
  if (self == NULL)
    return;
  g_hash_table_unref (self->vms);
  g_free (self->version);
  g_free (self);
}

/* (a VM with no name yet is counted under its pid's name by the caller) */
static VmceVmMetrics *
vmce_metrics_vm (VmceMetrics *self, const gchar *vm)
{
  VmceVmMetrics *m = g_hash_table_lookup (self->vms, vm != NULL ? vm : "");

  if (m == NULL) {
    m = g_new0 (VmceVmMetrics, 1);
    g_hash_table_insert (self->vms, g_strdup (vm != NULL ? vm : ""), m);
  }
  return m;
}

void
vmce_metrics_vm_attached (VmceMetrics *self, const gchar *vm)
{
  vmce_metrics_vm (self, vm)->attached = TRUE;
  self->generation++;
}

void
vmce_metrics_vm_gone (VmceMetrics *self, const gchar *vm)
{
  if (g_hash_table_remove (self->vms, vm != NULL ? vm : ""))
    self->generation++;
}

const gchar *
vmce_metrics_outcome (VmceResult result)
{
  switch (result) {
  case VMCE_RESULT_INJECTED:
  case VMCE_RESULT_COALESCED:
  case VMCE_RESULT_MIGRATED: /* (the destination injects it) */
    return "forwarded";
  case VMCE_RESULT_REFUSED:
    return "refused";
  case VMCE_RESULT_PASSED:
    return "passed";
  case VMCE_RESULT_IGNORED:
    return "ignored";
  case VMCE_RESULT_STOPPED:
    return "paused";
  case VMCE_RESULT_PENDING:
  case VMCE_RESULT_FAILED:
    break;
  }
  return "not_injected";
}

void
vmce_metrics_count_error (VmceMetrics *self, const gchar *vm, VmceMceKind kind, VmceResult result)
{
  const gchar *outcome = vmce_metrics_outcome (result);
  guint o = 0;

  while (o < N_OUTCOMES - 1 && strcmp (outcomes[o], outcome) != 0)
    o++;
  vmce_metrics_vm (self, vm)->errors[kind == VMCE_MCE_KIND_AR ? 1 : 0][o]++;
  self->generation++;
}

void
vmce_metrics_count_record (VmceMetrics *self, JsonNode *record)
{
  JsonObject *obj = json_node_get_object (record);
  const gchar *type = vmce_json_object_get_string_opt (obj, "type");
  const gchar *vm = vmce_json_object_get_string_opt (obj, "vm");
  VmceHugepagePolicy policy;

  if (g_strcmp0 (type, "huge-page-loss") == 0 &&
      vmce_hugepage_policy_from_string (vmce_json_object_get_string_opt (obj, "policy"), &policy) &&
      (guint) policy < N_HUGEPAGE)
    vmce_metrics_vm (self, vm)->hugepage_losses[policy]++;
  else if (g_strcmp0 (type, "huge-page-salvage") == 0)
    vmce_metrics_vm (self, vm)->salvages[json_object_has_member (obj, "fallback") ? 1 : 0]++;
  else if (g_strcmp0 (type, "migration") == 0 &&
           g_strcmp0 (vmce_json_object_get_string_opt (obj, "action"), "refused") == 0)
    vmce_metrics_vm (self, vm)->migrations_refused++;
  else if (g_strcmp0 (type, "attach-failed") == 0)
    self->attach_failures++;
  else
    return;
  self->generation++;
}

void
vmce_metrics_count_journal_error (VmceMetrics *self)
{
  self->journal_errors++;
  self->generation++;
}

void
vmce_metrics_set_poisoned (VmceMetrics *self, const gchar *vm, guint pages)
{
  VmceVmMetrics *m = g_hash_table_lookup (self->vms, vm != NULL ? vm : "");

  if (m != NULL && m->poisoned != pages) {
    m->poisoned = pages;
    self->generation++;
  }
}

void
vmce_metrics_set_poisoned_detached (VmceMetrics *self, guint pages)
{
  if (self->poisoned_detached != pages)
    self->generation++;
  self->poisoned_detached = pages;
}

guint64
vmce_metrics_get_generation (VmceMetrics *self)
{
  return self->generation;
}

/* --- text ------------------------------------------------------------------ */

/* `NAME="VALUE"`: a VM's name is the operator's, so any byte may come;
 * both formats escape \, " and newline in a label value, and want UTF-8 */
static gchar *
vmce_metrics_label (const gchar *name, const gchar *value)
{
  g_autofree gchar *valid = g_utf8_make_valid (value, -1);
  GString *s = g_string_new (name);

  g_string_append (s, "=\"");

  for (const gchar *p = valid; *p != '\0'; p++) {
    if (*p == '\\')
      g_string_append (s, "\\\\");
    else if (*p == '"')
      g_string_append (s, "\\\"");
    else if (*p == '\n')
      g_string_append (s, "\\n");
    else
      g_string_append_c (s, *p);
  }
  g_string_append_c (s, '"');
  return g_string_free (s, FALSE);
}

/* The family's header. OpenMetrics names a counter's family without its
 * _total and an info's without its _info; Prometheus 0.0.4 names it as
 * its samples are named, and has no info type (a gauge of 1) */
static void
vmce_metrics_family (GString *s, VmceMetricsFormat format, const gchar *name, const gchar *type,
                     const gchar *help)
{
  const gchar *suffix = g_str_equal (type, "counter") ? "_total" : g_str_equal (type, "info") ? "_info" : "";

  if (format == VMCE_METRICS_OPENMETRICS) {
    g_string_append_printf (s, "# TYPE %s %s\n# HELP %s %s\n", name, type, name, help);
    return;
  }
  g_string_append_printf (s, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix,
                          g_str_equal (type, "info") ? "gauge" : type);
}

/* NAME{VM,MORE} N, either label part optional */
static void
vmce_metrics_sample (GString *s, const gchar *name, const gchar *vm, const gchar *more, guint64 n)
{
  g_string_append (s, name);
  if (vm != NULL || more != NULL)
    g_string_append_printf (s, "{%s%s%s}", vm != NULL ? vm : "", vm != NULL && more != NULL ? "," : "",
                            more != NULL ? more : "");
  g_string_append_printf (s, " %" G_GUINT64_FORMAT "\n", n);
}

typedef struct {
  const gchar *name;
  gchar *label; /* vm="NAME", escaped */
  const VmceVmMetrics *m;
} VmceVmRow;

static gint
vmce_metrics_cmp_rows (gconstpointer a, gconstpointer b)
{
  return strcmp (((const VmceVmRow *) a)->name, ((const VmceVmRow *) b)->name);
}

static void
vmce_vm_row_clear (VmceVmRow *row)
{
  g_free (row->label);
}

/* The VMs in name order, so that the text is the same for the same counts */
static GArray *
vmce_metrics_rows (VmceMetrics *self)
{
  GArray *rows = g_array_sized_new (FALSE, FALSE, sizeof (VmceVmRow), g_hash_table_size (self->vms));
  GHashTableIter it;
  gpointer key, value;

  g_array_set_clear_func (rows, (GDestroyNotify) vmce_vm_row_clear);
  g_hash_table_iter_init (&it, self->vms);
  while (g_hash_table_iter_next (&it, &key, &value)) {
    VmceVmRow row = { .name = key, .label = vmce_metrics_label ("vm", key), .m = value };
    g_array_append_val (rows, row);
  }
  g_array_sort (rows, vmce_metrics_cmp_rows);
  return rows;
}

static void
vmce_metrics_render_errors (GString *s, VmceMetricsFormat format, GArray *rows)
{
  vmce_metrics_family (s, format, "vmce_memory_errors", "counter",
                       "Host memory errors in a guest's RAM, by kind (ao: found, ar: consumed) and by what "
                       "vmced did (forwarded into the guest, not_injected: it tried and could not, refused, "
                       "passed to QEMU, ignored, paused)");
  gchar *more[N_KINDS][N_OUTCOMES];

  for (guint k = 0; k < N_KINDS; k++)
    for (guint o = 0; o < N_OUTCOMES; o++)
      more[k][o] = g_strdup_printf ("kind=\"%s\",outcome=\"%s\"", kinds[k], outcomes[o]);
  for (guint i = 0; i < rows->len; i++) {
    const VmceVmRow *row = &g_array_index (rows, VmceVmRow, i);
    for (guint k = 0; k < N_KINDS; k++)
      for (guint o = 0; o < N_OUTCOMES; o++)
        vmce_metrics_sample (s, "vmce_memory_errors_total", row->label, more[k][o], row->m->errors[k][o]);
  }
  for (guint k = 0; k < N_KINDS; k++)
    for (guint o = 0; o < N_OUTCOMES; o++)
      g_free (more[k][o]);
}

/* Per VM, only where there was one: these are rare, and their labels
 * (the policy) may change with the configuration */
static void
vmce_metrics_render_hugepages (GString *s, VmceMetricsFormat format, GArray *rows)
{
  vmce_metrics_family (s, format, "vmce_huge_page_losses", "counter",
                       "Huge pages of guest RAM lost on the host, by the VM's hugepage policy");
  for (guint i = 0; i < rows->len; i++) {
    const VmceVmRow *row = &g_array_index (rows, VmceVmRow, i);
    for (guint p = 0; p < N_HUGEPAGE; p++) {
      g_autofree gchar *more = g_strdup_printf ("policy=\"%s\"", hugepage_policies[p]);
      if (row->m->hugepage_losses[p] > 0)
        vmce_metrics_sample (s, "vmce_huge_page_losses_total", row->label, more, row->m->hugepage_losses[p]);
    }
  }
  vmce_metrics_family (s, format, "vmce_huge_page_salvages", "counter",
                       "Salvages of a lost huge page: salvaged (its healthy 4 KiB pages kept) or failed "
                       "(handled as hugepage all)");
  for (guint i = 0; i < rows->len; i++) {
    const VmceVmRow *row = &g_array_index (rows, VmceVmRow, i);
    for (guint r = 0; r < 2; r++) {
      g_autofree gchar *more = g_strdup_printf ("result=\"%s\"", salvage_results[r]);
      if (row->m->salvages[r] > 0)
        vmce_metrics_sample (s, "vmce_huge_page_salvages_total", row->label, more, row->m->salvages[r]);
    }
  }
}

static void
vmce_metrics_render_vms (GString *s, VmceMetricsFormat format, GArray *rows)
{
  guint attached = 0;

  vmce_metrics_family (s, format, "vmce_migrations_refused", "counter",
                       "Migrations vmced cancelled: the VM has poisoned pages and its policy is migration "
                       "refuse, or they could not be carried");
  for (guint i = 0; i < rows->len; i++) {
    const VmceVmRow *row = &g_array_index (rows, VmceVmRow, i);
    vmce_metrics_sample (s, "vmce_migrations_refused_total", row->label, NULL, row->m->migrations_refused);
  }
  vmce_metrics_family (s, format, "vmce_poisoned_pages", "gauge",
                       "Guest pages known to be poisoned on the host, kept from the journal across vmced "
                       "restarts");
  for (guint i = 0; i < rows->len; i++) {
    const VmceVmRow *row = &g_array_index (rows, VmceVmRow, i);
    vmce_metrics_sample (s, "vmce_poisoned_pages", row->label, NULL, row->m->poisoned);
    attached += row->m->attached ? 1 : 0;
  }
  vmce_metrics_family (s, format, "vmce_attached_vms", "gauge", "QEMU processes vmced watches");
  vmce_metrics_sample (s, "vmce_attached_vms", NULL, NULL, attached);
}

static void
vmce_metrics_render_daemon (VmceMetrics *self, GString *s, VmceMetricsFormat format)
{
  g_autofree gchar *version = vmce_metrics_label ("version", self->version);

  vmce_metrics_family (s, format, "vmce_poisoned_pages_detached", "gauge",
                       "Poisoned pages of QEMUs vmced does not watch now, from its journal, restored when "
                       "it attaches to them again");
  vmce_metrics_sample (s, "vmce_poisoned_pages_detached", NULL, NULL, self->poisoned_detached);
  vmce_metrics_family (s, format, "vmce_attach_failures", "counter",
                       "QEMU processes vmced could not attach to (the journal's attach-failed records say why)");
  vmce_metrics_sample (s, "vmce_attach_failures_total", NULL, NULL, self->attach_failures);
  vmce_metrics_family (s, format, "vmce_journal_write_errors", "counter",
                       "Failed writes or syncs of vmced's journal (retried: records are held, not dropped)");
  vmce_metrics_sample (s, "vmce_journal_write_errors_total", NULL, NULL, self->journal_errors);
  vmce_metrics_family (s, format, "vmce_start_time_seconds", "gauge", "When vmced started, Unix time");
  g_string_append_printf (s, "vmce_start_time_seconds %" G_GINT64_FORMAT ".%06" G_GINT64_FORMAT "\n",
                          self->start_time_us / G_USEC_PER_SEC, self->start_time_us % G_USEC_PER_SEC);
  vmce_metrics_family (s, format, "vmce_build", "info", "vmced's version");
  vmce_metrics_sample (s, "vmce_build_info", NULL, version, 1);
}

GBytes *
vmce_metrics_render (VmceMetrics *self, VmceMetricsFormat format)
{
  g_autoptr(GArray) rows = vmce_metrics_rows (self);
  /* about 100 bytes a series, 15 series a VM */
  GString *s = g_string_sized_new (2048 + rows->len * 1600);

  vmce_metrics_render_errors (s, format, rows);
  vmce_metrics_render_hugepages (s, format, rows);
  vmce_metrics_render_vms (s, format, rows);
  vmce_metrics_render_daemon (self, s, format);
  if (format == VMCE_METRICS_OPENMETRICS)
    g_string_append (s, "# EOF\n");
  return g_string_free_to_bytes (s);
}
