/*
 * What the host's rasdaemon recorded for a host page: its
 * memory_failure_event rows, read from its sqlite database off the signal
 * path, and tied to vmced's record of the error.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

/* where Debian's rasdaemon keeps it (RASSTATEDIR/RAS_DB_FNAME) */
#define VMCE_RASDAEMON_DB "/var/lib/rasdaemon/ras-mc_event.db"

/* rasdaemon's latest memory_failure_event row for @pfn, as an object
 * (id, timestamp, pfn, page_type, action_result); a null node where it has
 * none (yet); NULL and @error where it cannot say: no database
 * (G_IO_ERROR_NOT_FOUND), none of these records in it
 * (G_IO_ERROR_NOT_SUPPORTED), sqlite's own error. Blocks (sqlite, a busy
 * timeout): for a worker thread */
JsonNode *vmce_ras_lookup_row (const gchar *db_path, guint64 pfn, GError **error);

typedef struct _VmceRasLookup VmceRasLookup;

/* @record: a "host-page" record to journal */
typedef void (*VmceRasRecordFunc) (JsonNode *record, gpointer user_data);

/* Lookups in @db_path; each one's record goes to @func. @waits_ms: how
 * long to wait before each try, 0-terminated (rasdaemon writes its row
 * after the kernel's signal, when it reads the tracepoint) */
VmceRasLookup *vmce_ras_lookup_new (const gchar *db_path,
                                    const guint *waits_ms,
                                    VmceRasRecordFunc func,
                                    gpointer user_data);
/* Cancels what is pending: no record comes after */
void vmce_ras_lookup_free (VmceRasLookup *self);

/* The memory error @seq of @vm hit host page @pfn: rasdaemon's row for it
 * is looked for, and the record journaled once it is found or the waits
 * are over */
void vmce_ras_lookup_start (VmceRasLookup *self, const gchar *vm, guint64 seq, guint64 pfn);
