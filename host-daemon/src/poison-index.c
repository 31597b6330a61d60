/*
 * Poisoned pages of QEMUs not watched right now (see poison-index.h).
 *
 * Which records count, by "qemu_id" (a process, not a pid: see
 * proc-info.h): memory-error records add pages, and a huge-page-loss
 * record every other page of the lost huge page; a reset record removes the
 * pages it replaced; a page-replaced record (QEMU reloaded a ROM into the
 * page) removes its page; a vm-exit record ends the QEMU, and with it
 * every page. Apart: a migration's `receiving` records, until its
 * `received` or `abandoned` (a destination whose vmced went before its
 * marks were in). Records of vmced before qemu_id existed name no process and
 * are left out.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-daemon"

#include <gio/gio.h>
#include <string.h>

#include "json-util.h"
#include "page.h"
#include "poison-index.h"
#include "poison-set.h"
#include "proc-info.h"

typedef struct {
  GHashTable *pages; /* gpa -> VmcePoisonedPage */
  guint64 records;
  gboolean kept; /* from a detach, not from the journal */
} VmceIndexEntry;

typedef struct {
  GPtrArray *pages; /* of VmcePoisonedPage */
  gchar *source;
  gboolean autostart_off;
} VmceIndexReceiving;

struct _VmcePoisonIndex {
  GHashTable *qemus;     /* identity -> VmceIndexEntry */
  GHashTable *receiving; /* identity -> VmceIndexReceiving */
  JsonParser *parser;
};

static void
vmce_index_receiving_free (VmceIndexReceiving *r)
{
  g_clear_pointer (&r->pages, g_ptr_array_unref);
  g_free (r->source);
  g_free (r);
}

static void
vmce_index_entry_free (VmceIndexEntry *e)
{
  g_clear_pointer (&e->pages, g_hash_table_unref);
  g_free (e);
}

VmcePoisonIndex *
vmce_poison_index_new (void)
{
  VmcePoisonIndex *self = g_new0 (VmcePoisonIndex, 1);

  self->qemus = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                       (GDestroyNotify) vmce_index_entry_free);
  self->receiving = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                           (GDestroyNotify) vmce_index_receiving_free);
  self->parser = json_parser_new_immutable ();
  return self;
}

void
vmce_poison_index_free (VmcePoisonIndex *self)
{
  if (self == NULL)
    return;
  g_hash_table_unref (self->qemus);
  g_hash_table_unref (self->receiving);
  g_object_unref (self->parser);
  g_free (self);
}

static VmceIndexEntry *
vmce_poison_index_get (VmcePoisonIndex *self, const gchar *identity)
{
  VmceIndexEntry *e = g_hash_table_lookup (self->qemus, identity);

  if (e == NULL) {
    e = g_new0 (VmceIndexEntry, 1);
    e->pages = vmce_poison_set_new ();
    g_hash_table_insert (self->qemus, g_strdup (identity), e);
  }
  return e;
}

static void
vmce_poison_index_remove_page (VmceIndexEntry *e, const gchar *gpa_str)
{
  guint64 gpa = 0;

  if (gpa_str != NULL && vmce_parse_u64 (gpa_str, &gpa, NULL)) {
    gpa &= VMCE_PAGE_MASK;
    g_hash_table_remove (e->pages, &gpa);
  }
}

/* a huge-page-salvage record (hugepage-salvage.c): the pages of its loss
 * that were kept are fine again; the lost ones, and any the guest was told
 * of, stay. A fallback (to `all`) keeps them all. */
static void
vmce_poison_index_apply_salvage (VmceIndexEntry *e, JsonObject *record)
{
  g_autoptr(GHashTable) lost = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  JsonNode *node = json_object_get_member (record, "lost");
  guint64 about = (guint64) json_object_get_int_member_with_default (record, "about_seq", 0);
  g_autoptr(GArray) kept = g_array_new (FALSE, FALSE, sizeof (guint64));
  GHashTableIter iter;
  gpointer value;

  /* not salvaged after all: lost whole, as a loss's record says */
  if (json_object_has_member (record, "fallback")) {
    (void) vmce_poison_set_add_loss_record (e->pages, record);
    return;
  }
  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node) || about == 0)
    return;
  for (guint i = 0; i < json_array_get_length (json_node_get_array (node)); i++) {
    JsonObject *page = json_array_get_object_element (json_node_get_array (node), i);
    guint64 gpa = 0;
    if (page != NULL && vmce_parse_u64 (vmce_json_object_get_string_opt (page, "gpa"), &gpa, NULL)) {
      gpa &= VMCE_PAGE_MASK;
      g_hash_table_add (lost, g_memdup2 (&gpa, sizeof gpa));
    }
  }
  g_hash_table_iter_init (&iter, e->pages);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    const VmcePoisonedPage *p = value;
    if (p->lost_with == about && p->count == 0 && !g_hash_table_contains (lost, &p->gpa))
      g_array_append_val (kept, p->gpa);
  }
  for (guint i = 0; i < kept->len; i++)
    g_hash_table_remove (e->pages, &g_array_index (kept, guint64, i));
}

/* a reset record's pages that are fine again */
static void
vmce_poison_index_apply_reset (VmceIndexEntry *e, JsonObject *record)
{
  JsonNode *pages = json_object_get_member (record, "pages");
  JsonArray *arr;

  if (pages == NULL || !JSON_NODE_HOLDS_ARRAY (pages))
    return;
  arr = json_node_get_array (pages);
  for (guint i = 0; i < json_array_get_length (arr); i++) {
    JsonNode *node = json_array_get_element (arr, i);
    JsonObject *page;
    const gchar *result;

    if (!JSON_NODE_HOLDS_OBJECT (node))
      continue;
    page = json_node_get_object (node);
    result = vmce_json_object_get_string_opt (page, "result");
    if (g_strcmp0 (result, "replaced") == 0 || g_strcmp0 (result, "usable") == 0)
      vmce_poison_index_remove_page (e, vmce_json_object_get_string_opt (page, "gpa"));
  }
}

static void
vmce_poison_index_apply_migration (VmcePoisonIndex *self, const gchar *identity, JsonObject *record)
{
  const gchar *action = vmce_json_object_get_string_opt (record, "action");
  JsonNode *pages = json_object_get_member (record, "pages");
  VmceIndexReceiving *r;
  JsonArray *arr;

  if (g_strcmp0 (action, "received") == 0 || g_strcmp0 (action, "abandoned") == 0) {
    g_hash_table_remove (self->receiving, identity);
    return;
  }
  if (g_strcmp0 (action, "receiving") != 0 || pages == NULL || !JSON_NODE_HOLDS_ARRAY (pages))
    return;
  r = g_hash_table_lookup (self->receiving, identity);
  if (r == NULL) {
    r = g_new0 (VmceIndexReceiving, 1);
    r->pages = g_ptr_array_new_with_free_func (g_free);
    r->source = g_strdup (vmce_json_object_get_string_opt (record, "source"));
    g_hash_table_insert (self->receiving, g_strdup (identity), r);
  }
  r->autostart_off |= json_object_get_boolean_member_with_default (record, "autostart_off", FALSE);
  arr = json_node_get_array (pages);
  for (guint i = 0; i < json_array_get_length (arr); i++) {
    JsonNode *node = json_array_get_element (arr, i);
    VmcePoisonedPage *p = JSON_NODE_HOLDS_OBJECT (node)
                            ? vmce_poisoned_page_carried_from_json (json_node_get_object (node))
                            : NULL;
    if (p != NULL)
      g_ptr_array_add (r->pages, p);
  }
}

void
vmce_poison_index_apply (VmcePoisonIndex *self, JsonObject *record)
{
  const gchar *type = vmce_json_object_get_string_opt (record, "type");
  const gchar *identity = vmce_json_object_get_string_opt (record, "qemu_id");
  VmceIndexEntry *e;

  if (identity == NULL || type == NULL)
    return;
  if (g_strcmp0 (type, "vm-exit") == 0) {
    g_hash_table_remove (self->qemus, identity);
    g_hash_table_remove (self->receiving, identity);
    return;
  }
  if (g_strcmp0 (type, "migration") == 0) {
    vmce_poison_index_apply_migration (self, identity, record);
    return;
  }
  if (g_strcmp0 (type, "memory-error") == 0) {
    e = vmce_poison_index_get (self, identity);
    if (vmce_poison_set_add_record (e->pages, record))
      e->records++;
    return;
  }
  if (g_strcmp0 (type, "huge-page-loss") == 0) {
    /* its memory-error record came first and made the entry */
    e = g_hash_table_lookup (self->qemus, identity);
    if (e != NULL && vmce_poison_set_add_loss_record (e->pages, record) > 0)
      e->records++;
    return;
  }
  e = g_hash_table_lookup (self->qemus, identity);
  if (e == NULL)
    return;
  if (g_strcmp0 (type, "reset") == 0) {
    vmce_poison_index_apply_reset (e, record);
    e->records++;
  } else if (g_strcmp0 (type, "huge-page-salvage") == 0) {
    vmce_poison_index_apply_salvage (e, record);
    e->records++;
  } else if (g_strcmp0 (type, "page-replaced") == 0 &&
             !json_object_get_boolean_member_with_default (record, "still_poisoned", FALSE)) {
    vmce_poison_index_remove_page (e, vmce_json_object_get_string_opt (record, "gpa"));
    e->records++;
  }
}

gboolean
vmce_poison_index_apply_line (VmcePoisonIndex *self, const gchar *line, gsize len)
{
  JsonNode *root;

  if (!json_parser_load_from_data (self->parser, line, (gssize) len, NULL))
    return FALSE;
  root = json_parser_get_root (self->parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return FALSE;
  vmce_poison_index_apply (self, json_node_get_object (root));
  return TRUE;
}

gboolean
vmce_poison_index_load (VmcePoisonIndex *self,
                        const gchar *path,
                        VmcePoisonIndexStats *stats,
                        GError **error)
{
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GFileInputStream) in = NULL;
  g_autoptr(GDataInputStream) data = NULL;
  g_autoptr(GError) local = NULL;
  gint64 start = g_get_monotonic_time ();

  memset (stats, 0, sizeof *stats);
  in = g_file_read (file, NULL, &local);
  if (in == NULL) {
    if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND))
      return TRUE;
    g_propagate_prefixed_error (error, g_steal_pointer (&local), "cannot read the journal: ");
    return FALSE;
  }
  data = g_data_input_stream_new (G_INPUT_STREAM (in));
  g_data_input_stream_set_newline_type (data, G_DATA_STREAM_NEWLINE_TYPE_LF);
  for (;;) {
    gsize len = 0;
    g_autofree gchar *line = g_data_input_stream_read_line (data, &len, NULL, &local);

    if (line == NULL) {
      if (local != NULL) {
        g_propagate_prefixed_error (error, g_steal_pointer (&local),
                                    "cannot read the journal %s at line %" G_GUINT64_FORMAT ": ",
                                    path, stats->lines + 1);
        return FALSE;
      }
      break;
    }
    stats->lines++;
    if (len == 0)
      continue;
    if (vmce_poison_index_apply_line (self, line, len)) {
      stats->records++;
      continue;
    }
    if (stats->bad_lines++ == 0)
      stats->first_bad_line = stats->lines;
  }
  stats->elapsed_us = g_get_monotonic_time () - start;
  return TRUE;
}

GHashTable *
vmce_poison_index_take (VmcePoisonIndex *self,
                        const gchar *identity,
                        guint64 *n_records,
                        gboolean *kept,
                        gchar **other_identity)
{
  VmceIndexEntry *e = identity != NULL ? g_hash_table_lookup (self->qemus, identity) : NULL;
  GHashTable *pages = NULL;

  *n_records = 0;
  *kept = FALSE;
  if (other_identity != NULL)
    *other_identity = NULL;
  if (e != NULL) {
    *n_records = e->records;
    *kept = e->kept;
    if (g_hash_table_size (e->pages) > 0)
      pages = g_steal_pointer (&e->pages);
    g_hash_table_remove (self->qemus, identity);
    return pages;
  }
  if (other_identity != NULL) {
    pid_t pid = vmce_proc_identity_pid (identity);
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init (&iter, self->qemus);
    while (g_hash_table_iter_next (&iter, &key, &value)) {
      VmceIndexEntry *other = value;
      if (pid != 0 && vmce_proc_identity_pid (key) == pid && g_hash_table_size (other->pages) > 0) {
        *other_identity = g_strdup (key);
        break;
      }
    }
  }
  return NULL;
}

GPtrArray *
vmce_poison_index_take_receiving (VmcePoisonIndex *self,
                                  const gchar *identity,
                                  gchar **source,
                                  gboolean *autostart_off)
{
  VmceIndexReceiving *r = identity != NULL ? g_hash_table_lookup (self->receiving, identity) : NULL;
  GPtrArray *pages;

  *source = NULL;
  *autostart_off = FALSE;
  if (r == NULL || r->pages->len == 0)
    return NULL;
  pages = g_steal_pointer (&r->pages);
  *source = g_steal_pointer (&r->source);
  *autostart_off = r->autostart_off;
  g_hash_table_remove (self->receiving, identity);
  return pages;
}

void
vmce_poison_index_keep (VmcePoisonIndex *self, const gchar *identity, GHashTable *pages)
{
  VmceIndexEntry *e;

  if (identity == NULL || pages == NULL) {
    g_clear_pointer (&pages, g_hash_table_unref);
    return;
  }
  e = vmce_poison_index_get (self, identity);
  g_hash_table_unref (e->pages);
  e->pages = pages;
  e->kept = TRUE;
}

void
vmce_poison_index_forget (VmcePoisonIndex *self, const gchar *identity)
{
  if (identity != NULL)
    g_hash_table_remove (self->qemus, identity);
}

/* QEMUs with pages kept, and those pages */
static void
vmce_poison_index_count (VmcePoisonIndex *self, guint *qemus, guint *pages)
{
  GHashTableIter iter;
  gpointer value;

  *qemus = *pages = 0;
  g_hash_table_iter_init (&iter, self->qemus);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    guint n = g_hash_table_size (((VmceIndexEntry *) value)->pages);
    *qemus += n > 0;
    *pages += n;
  }
}

guint
vmce_poison_index_get_n_qemus (VmcePoisonIndex *self)
{
  guint qemus, pages;

  vmce_poison_index_count (self, &qemus, &pages);
  return qemus;
}

guint
vmce_poison_index_get_n_pages (VmcePoisonIndex *self)
{
  guint qemus, pages;

  vmce_poison_index_count (self, &qemus, &pages);
  return pages;
}
