/*
 * What the host's rasdaemon recorded for a host page (see ras-lookup.h).
 *
 * rasdaemon built with --enable-memory-failure (Debian 13's 0.8.3 is;
 * Debian 12's 0.6.8 is not, and has no such table) writes one row per ras:memory_failure_event tracepoint into the table
 * memory_failure_event (id, timestamp, pfn TEXT as "0x%llx", page_type,
 * action_result: ras-record.c, ras-memory-failure-handler.c). The kernel
 * fires it from action_result(), after memory_failure() has unmapped the
 * page and signalled QEMU, and rasdaemon reads it from the trace buffer
 * some time later: the row may not be there while vmced handles the
 * signal, so it is looked for a few times, each read a worker thread's,
 * with the database opened read-only and a busy timeout (rasdaemon holds
 * it open for writing).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-hostpage"

#include <sqlite3.h>

#include "json-util.h"
#include "mce-event.h"
#include "ras-lookup.h"

#define VMCE_RAS_BUSY_MS 1000

struct _VmceRasLookup {
  gatomicrefcount ref;
  gchar *db_path;
  guint *waits_ms;
  VmceRasRecordFunc func;
  gpointer user_data;
  GCancellable *cancellable; /* cancelled at free: no record after */
  GHashTable *timers;        /* of VmceRasQuery waiting for its next try -> NULL */
};

typedef struct {
  VmceRasLookup *lookup; /* a reference */
  gchar *vm;
  guint64 seq;
  guint64 pfn;
  guint tries;
  gint64 start_us;
  guint timer;
} VmceRasQuery;

static VmceRasLookup *
vmce_ras_lookup_ref (VmceRasLookup *self)
{
  g_atomic_ref_count_inc (&self->ref);
  return self;
}

static void
vmce_ras_lookup_unref (VmceRasLookup *self)
{
  if (!g_atomic_ref_count_dec (&self->ref))
    return;
  g_hash_table_unref (self->timers);
  g_object_unref (self->cancellable);
  g_free (self->waits_ms);
  g_free (self->db_path);
  g_free (self);
}

static void
vmce_ras_query_free (VmceRasQuery *q)
{
  g_clear_handle_id (&q->timer, g_source_remove);
  vmce_ras_lookup_unref (q->lookup);
  g_free (q->vm);
  g_free (q);
}

static JsonNode *
vmce_ras_row_to_json (sqlite3_stmt *stmt)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  vmce_json_builder_add_int (b, "id", sqlite3_column_int64 (stmt, 0));
  vmce_json_builder_add_string (b, "timestamp", (const gchar *) sqlite3_column_text (stmt, 1));
  vmce_json_builder_add_string (b, "pfn", (const gchar *) sqlite3_column_text (stmt, 2));
  vmce_json_builder_add_string (b, "page_type", (const gchar *) sqlite3_column_text (stmt, 3));
  vmce_json_builder_add_string (b, "action_result", (const gchar *) sqlite3_column_text (stmt, 4));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
vmce_ras_query_row (sqlite3 *db, const gchar *db_path, guint64 pfn, GError **error)
{
  g_autofree gchar *key = g_strdup_printf ("0x%" G_GINT64_MODIFIER "x", pfn);
  sqlite3_stmt *stmt = NULL;
  JsonNode *row;
  int rc;

  rc = sqlite3_prepare_v2 (db,
                           "SELECT id, timestamp, pfn, page_type, action_result FROM memory_failure_event "
                           "WHERE pfn = ?1 ORDER BY id DESC LIMIT 1",
                           -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                 "rasdaemon's %s has no memory_failure_event records (%s): rasdaemon without "
                 "memory-failure support, or not recording", db_path, sqlite3_errmsg (db));
    return NULL;
  }
  sqlite3_bind_text (stmt, 1, key, -1, SQLITE_STATIC);
  rc = sqlite3_step (stmt);
  if (rc == SQLITE_ROW)
    row = vmce_ras_row_to_json (stmt);
  else if (rc == SQLITE_DONE)
    row = json_node_new (JSON_NODE_NULL);
  else {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot read rasdaemon's %s: %s", db_path,
                 sqlite3_errmsg (db));
    row = NULL;
  }
  sqlite3_finalize (stmt);
  return row;
}

JsonNode *
vmce_ras_lookup_row (const gchar *db_path, guint64 pfn, GError **error)
{
  sqlite3 *db = NULL;
  JsonNode *row;

  if (!g_file_test (db_path, G_FILE_TEST_EXISTS)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "no rasdaemon database at %s (rasdaemon not installed, or never run)", db_path);
    return NULL;
  }
  if (sqlite3_open_v2 (db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot open rasdaemon's %s: %s", db_path,
                 db != NULL ? sqlite3_errmsg (db) : "out of memory");
    sqlite3_close (db);
    return NULL;
  }
  sqlite3_busy_timeout (db, VMCE_RAS_BUSY_MS);
  row = vmce_ras_query_row (db, db_path, pfn, error);
  sqlite3_close (db);
  return row;
}

VmceRasLookup *
vmce_ras_lookup_new (const gchar *db_path, const guint *waits_ms, VmceRasRecordFunc func, gpointer user_data)
{
  VmceRasLookup *self = g_new0 (VmceRasLookup, 1);
  guint n = 0;

  while (waits_ms[n] != 0)
    n++;
  g_atomic_ref_count_init (&self->ref);
  self->db_path = g_strdup (db_path);
  self->waits_ms = g_memdup2 (waits_ms, (n + 1) * sizeof (guint));
  self->func = func;
  self->user_data = user_data;
  self->cancellable = g_cancellable_new ();
  self->timers = g_hash_table_new_full (NULL, NULL, (GDestroyNotify) vmce_ras_query_free, NULL);
  return self;
}

void
vmce_ras_lookup_free (VmceRasLookup *self)
{
  if (self == NULL)
    return;
  g_cancellable_cancel (self->cancellable);
  /* frees the queries waiting for a try; one in a worker frees itself */
  g_hash_table_remove_all (self->timers);
  vmce_ras_lookup_unref (self);
}

static void
vmce_ras_lookup_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  VmceRasQuery *q = task_data;
  GError *error = NULL;
  JsonNode *row = vmce_ras_lookup_row (q->lookup->db_path, q->pfn, &error);

  if (row == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, row, (GDestroyNotify) json_node_unref);
}

static JsonNode *
vmce_ras_record (VmceRasQuery *q, JsonNode *row, const gchar *detail)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autofree gchar *time = vmce_format_time (g_get_real_time ());

  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "type", "host-page");
  vmce_json_builder_add_string (b, "time", time);
  vmce_json_builder_add_string (b, "vm", q->vm);
  vmce_json_builder_add_int (b, "about_seq", (gint64) q->seq);
  vmce_json_builder_add_int (b, "host_pfn", (gint64) q->pfn);
  json_builder_set_member_name (b, "rasdaemon");
  json_builder_add_value (b, row != NULL ? json_node_ref (row) : json_node_new (JSON_NODE_NULL));
  vmce_json_builder_add_string (b, "detail", detail);
  vmce_json_builder_add_int (b, "waited_ms", (g_get_monotonic_time () - q->start_us) / 1000);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static void vmce_ras_query_wait (VmceRasQuery *q);

static void
vmce_ras_lookup_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceRasQuery *q = g_task_get_task_data (G_TASK (res));
  VmceRasLookup *self = q->lookup;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) row = g_task_propagate_pointer (G_TASK (res), &error);
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *none = NULL;

  if (g_cancellable_is_cancelled (self->cancellable))
    return;
  if (row != NULL && JSON_NODE_HOLDS_NULL (row) && self->waits_ms[q->tries] != 0) {
    /* not written yet, perhaps: looked for again; the task lets go of q */
    VmceRasQuery *again = g_memdup2 (q, sizeof *q);
    again->lookup = vmce_ras_lookup_ref (self);
    again->vm = g_strdup (q->vm);
    vmce_ras_query_wait (again);
    return;
  }
  if (row != NULL && JSON_NODE_HOLDS_NULL (row))
    none = g_strdup_printf ("rasdaemon recorded nothing for pfn 0x%" G_GINT64_MODIFIER "x in %u tries",
                            q->pfn, q->tries);
  record = vmce_ras_record (q, row != NULL && !JSON_NODE_HOLDS_NULL (row) ? row : NULL,
                            error != NULL ? error->message : none);
  self->func (record, self->user_data);
}

static gboolean
vmce_ras_query_try_cb (gpointer user_data)
{
  VmceRasQuery *q = user_data;
  VmceRasLookup *self = q->lookup;
  g_autoptr(GTask) task = g_task_new (NULL, NULL, vmce_ras_lookup_done_cb, NULL);

  q->timer = 0;
  q->tries++;
  g_hash_table_steal (self->timers, q);
  g_task_set_task_data (task, q, (GDestroyNotify) vmce_ras_query_free);
  g_task_run_in_thread (task, vmce_ras_lookup_thread);
  return G_SOURCE_REMOVE;
}

static void
vmce_ras_query_wait (VmceRasQuery *q)
{
  q->timer = g_timeout_add (q->lookup->waits_ms[q->tries], vmce_ras_query_try_cb, q);
  g_hash_table_add (q->lookup->timers, q);
}

void
vmce_ras_lookup_start (VmceRasLookup *self, const gchar *vm, guint64 seq, guint64 pfn)
{
  VmceRasQuery *q = g_new0 (VmceRasQuery, 1);

  q->lookup = vmce_ras_lookup_ref (self);
  q->vm = g_strdup (vm);
  q->seq = seq;
  q->pfn = pfn;
  q->start_us = g_get_monotonic_time ();
  vmce_ras_query_wait (q);
}
