/*
 * Delivers vmced's metrics text (metrics.h) to a scraper, each way opt-in:
 * a file for node_exporter's textfile collector (written whole and renamed
 * into place, from a worker thread, at most once a second), or an HTTP
 * endpoint served by libsoup (GET /metrics).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "metrics.h"

/* The text now, in the main loop */
typedef GBytes *(*VmceMetricsRenderFunc) (VmceMetricsFormat format, gpointer user_data);

typedef struct _VmceMetricsExport VmceMetricsExport;

VmceMetricsExport *vmce_metrics_export_new (VmceMetricsRenderFunc render, gpointer user_data);
void vmce_metrics_export_free (VmceMetricsExport *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceMetricsExport, vmce_metrics_export_free)

/* Writes @path (a *.prom file) from now on, the first time at once. Its
 * directory missing or not writable: the error, and each later change
 * tries again (vmced needs none of it to forward errors). */
gboolean vmce_metrics_export_set_textfile (VmceMetricsExport *self, const gchar *path, GError **error);
/* Serves GET /metrics on @address ("127.0.0.1:9469", "[::1]:9469"; port
 * 0: any free one) */
gboolean vmce_metrics_export_listen (VmceMetricsExport *self, const gchar *address, GError **error);
/* The port it listens on, 0 if none */
guint16 vmce_metrics_export_get_port (VmceMetricsExport *self);

/* Something counted changed: the file is written again, within a second */
void vmce_metrics_export_changed (VmceMetricsExport *self);
/* Writes done, since the start (for tests) */
guint vmce_metrics_export_get_n_written (VmceMetricsExport *self);
