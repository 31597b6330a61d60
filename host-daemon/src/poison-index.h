/*
 * The poisoned pages of QEMU processes vmced does not watch right now,
 * rebuilt from the journal when vmced starts: so that a vmced restarted
 * (Restart=on-failure, an upgrade) or a QEMU attached again still replaces
 * them when its guest resets.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

typedef struct _VmcePoisonIndex VmcePoisonIndex;

typedef struct {
  guint64 lines;
  guint64 records;   /* lines that were JSON records */
  guint64 bad_lines; /* lines that were not (a write cut short) */
  guint64 first_bad_line;
  gint64 elapsed_us;
} VmcePoisonIndexStats;

VmcePoisonIndex *vmce_poison_index_new (void);
void vmce_poison_index_free (VmcePoisonIndex *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcePoisonIndex, vmce_poison_index_free)

/* Reads a journal; a missing one is empty. A line that is not a JSON
 * object is counted in @stats and skipped: the rest still counts. */
gboolean vmce_poison_index_load (VmcePoisonIndex *self,
                                 const gchar *path,
                                 VmcePoisonIndexStats *stats,
                                 GError **error);
/* One journal record */
void vmce_poison_index_apply (VmcePoisonIndex *self, JsonObject *record);
/* One line of a journal; FALSE if it is not a JSON object */
gboolean vmce_poison_index_apply_line (VmcePoisonIndex *self, const gchar *line, gsize len);

/* Takes the pages kept for the QEMU @identity (gpa -> VmcePoisonedPage),
 * or NULL if none; @n_records says from how many journal records, @kept
 * whether they were kept at a detach rather than read from the journal. If none
 * are kept but some are for another process that had the same pid,
 * @other_identity names it. */
GHashTable *vmce_poison_index_take (VmcePoisonIndex *self,
                                    const gchar *identity,
                                    guint64 *n_records,
                                    gboolean *kept,
                                    gchar **other_identity);
/* A migration's destination whose marks were not in when the last vmced
 * went: the pages of its `receiving` records after the last `received` or
 * `abandoned` (of VmcePoisonedPage, owned), or NULL; @source who sent
 * them, @autostart_off whether that vmced turned the QEMU's autostart off
 * (and so is to let it run once they are in). */
GPtrArray *vmce_poison_index_take_receiving (VmcePoisonIndex *self,
                                             const gchar *identity,
                                             gchar **source,
                                             gboolean *autostart_off);
/* Keeps @pages (taken) for @identity, a QEMU that was detached */
void vmce_poison_index_keep (VmcePoisonIndex *self, const gchar *identity, GHashTable *pages);
void vmce_poison_index_forget (VmcePoisonIndex *self, const gchar *identity);
/* QEMUs with pages kept, and those pages */
guint vmce_poison_index_get_n_qemus (VmcePoisonIndex *self);
guint vmce_poison_index_get_n_pages (VmcePoisonIndex *self);
