/*
 * The event journal: one JSON object per line, appended and fdatasync'ed
 * through io_uring so that a QEMU thread held by vmced never waits on disk.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

typedef struct _VmceJournal VmceJournal;

VmceJournal *vmce_journal_open (const gchar *path, GError **error);
/* Writes what is queued, waiting for the disk; for shutdown */
gboolean vmce_journal_flush_sync (VmceJournal *self, GError **error);
void vmce_journal_free (VmceJournal *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceJournal, vmce_journal_free)

/* Queues one record; returns at once. The record is on disk (data synced)
 * once vmce_journal_get_n_synced() has passed the returned sequence number. */
guint64 vmce_journal_append (VmceJournal *self, JsonNode *record);

const gchar *vmce_journal_get_path (VmceJournal *self);
guint64 vmce_journal_get_n_appended (VmceJournal *self);
guint64 vmce_journal_get_n_synced (VmceJournal *self);
/* Appended, not on disk yet */
guint64 vmce_journal_get_n_held (VmceJournal *self);
/* Degraded: the last write failed (its error), or NULL; writes are
 * retried, nothing is dropped */
const gchar *vmce_journal_get_last_error (VmceJournal *self);
/* Who to tell of each write or sync that fails (each retry too):
 * func (journal, user_data), in the main loop */
void vmce_journal_set_error_func (VmceJournal *self, GFunc func, gpointer user_data);
