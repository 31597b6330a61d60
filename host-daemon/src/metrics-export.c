/*
 * vmced's metrics to a scraper (see metrics-export.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-metrics"

#include <errno.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>

#include "config.h"
#include "metrics-export.h"

/* at most one write of the file a second, however busy: a storm of errors
 * is one rewrite a second, not one per error */
#define VMCE_METRICS_FILE_GAP_US G_USEC_PER_SEC
/* a failed write is tried again this often with no change (a directory
 * made after vmced started: prometheus-node-exporter installed later) */
#define VMCE_METRICS_FILE_RETRY_S 10

/* The textfile writer: shared with its write in flight, which may finish
 * after vmced has let the export go */
typedef struct {
  gchar *path;
  guint timer;
  guint retry; /* after a failed write, with no change since */
  gboolean writing;
  gboolean dirty;
  gboolean closed;
  gint64 last_write_us;
  gchar *last_error; /* the last failure's kind, once said */
  guint n_written;
  VmceMetricsExport *owner;
} VmceTextfile;

struct _VmceMetricsExport {
  VmceMetricsRenderFunc render;
  gpointer render_data;
  VmceTextfile *textfile; /* an rc box, or NULL */
  SoupServer *server;
  guint16 port;
};

static void
vmce_textfile_clear (VmceTextfile *t)
{
  g_free (t->path);
  g_free (t->last_error);
}

VmceMetricsExport *
vmce_metrics_export_new (VmceMetricsRenderFunc render, gpointer user_data)
{
  VmceMetricsExport *self = g_new0 (VmceMetricsExport, 1);

  self->render = render;
  self->render_data = user_data;
  return self;
}

void
vmce_metrics_export_free (VmceMetricsExport *self)
{
  if (self == NULL)
    return;
  if (self->textfile != NULL) {
    g_clear_handle_id (&self->textfile->timer, g_source_remove);
    g_clear_handle_id (&self->textfile->retry, g_source_remove);
    self->textfile->closed = TRUE;
    g_rc_box_release_full (self->textfile, (GDestroyNotify) vmce_textfile_clear);
  }
  if (self->server != NULL)
    soup_server_disconnect (self->server);
  g_clear_object (&self->server);
  g_free (self);
}

/* --- the textfile ------------------------------------------------------------ */

static void vmce_textfile_schedule (VmceTextfile *t);

static gboolean
vmce_textfile_retry_cb (gpointer user_data)
{
  VmceTextfile *t = user_data;

  t->retry = 0;
  vmce_textfile_schedule (t);
  return G_SOURCE_REMOVE;
}

/* In a worker thread: a file write may wait on the disk, and the main
 * loop is where held QEMU threads are let go */
static void
vmce_textfile_write_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  VmceTextfile *t = g_task_get_task_data (task);
  GBytes *text = g_object_get_data (G_OBJECT (task), "text");
  g_autoptr(GError) error = NULL;
  gsize len;
  const gchar *data = g_bytes_get_data (text, &len);

  g_autofree gchar *tmp = g_strconcat (t->path, ".tmp", NULL);
  int saved;

  /* written whole beside it (node_exporter reads only *.prom), then
   * renamed: a scrape never sees half a file. The mode is set by chmod,
   * which the unit's UMask=0077 does not touch: created 0600, the file was
   * unreadable to node_exporter, which runs as another user */
  if (!g_file_set_contents_full (tmp, data, (gssize) len, G_FILE_SET_CONTENTS_NONE, 0644, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (g_chmod (tmp, 0644) == 0 && g_rename (tmp, t->path) == 0) {
    g_task_return_boolean (task, TRUE);
    return;
  }
  saved = errno;
  g_unlink (tmp);
  g_task_return_new_error (task, G_FILE_ERROR, g_file_error_from_errno (saved), "%s: %s", t->path,
                           g_strerror (saved));
}

/* One line for a failure, once until it changes; one when it writes again */
static void
vmce_textfile_written_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceTextfile *t = user_data;
  g_autoptr(GError) error = NULL;

  if (t->closed) {
    g_rc_box_release_full (t, (GDestroyNotify) vmce_textfile_clear);
    return;
  }
  t->writing = FALSE;
  t->last_write_us = g_get_monotonic_time ();
  if (!g_task_propagate_boolean (G_TASK (res), &error)) {
    /* (by its kind: GLib's message names the temporary file, new each time) */
    g_autofree gchar *kind = g_strdup_printf ("%s %d", g_quark_to_string (error->domain), error->code);

    if (g_strcmp0 (kind, t->last_error) != 0)
      g_warning ("metrics: cannot write %s: %s%s; tried again at the next change or in %d s", t->path,
                 error->message,
                 g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT)
                     ? " (is prometheus-node-exporter installed?)"
                     : "",
                 VMCE_METRICS_FILE_RETRY_S);
    g_free (t->last_error);
    t->last_error = g_steal_pointer (&kind);
  } else {
    if (t->last_error != NULL)
      g_message ("metrics: %s written again", t->path);
    g_clear_pointer (&t->last_error, g_free);
    t->n_written++;
  }
  if (t->dirty)
    vmce_textfile_schedule (t);
  else if (t->last_error != NULL)
    t->retry = g_timeout_add_seconds (VMCE_METRICS_FILE_RETRY_S, vmce_textfile_retry_cb, t);
  g_rc_box_release_full (t, (GDestroyNotify) vmce_textfile_clear);
}

static gboolean
vmce_textfile_timer_cb (gpointer user_data)
{
  VmceTextfile *t = user_data;
  g_autoptr(GTask) task = g_task_new (NULL, NULL, vmce_textfile_written_cb, g_rc_box_acquire (t));
  GBytes *text = t->owner->render (VMCE_METRICS_PROMETHEUS, t->owner->render_data);

  t->timer = 0;
  t->dirty = FALSE;
  t->writing = TRUE;
  g_task_set_task_data (task, t, NULL);
  g_object_set_data_full (G_OBJECT (task), "text", text, (GDestroyNotify) g_bytes_unref);
  g_task_run_in_thread (task, vmce_textfile_write_thread);
  return G_SOURCE_REMOVE;
}

/* At once if the last write is a second old, else when it is */
static void
vmce_textfile_schedule (VmceTextfile *t)
{
  gint64 wait_us;

  g_clear_handle_id (&t->retry, g_source_remove);
  t->dirty = TRUE;
  if (t->timer != 0 || t->writing)
    return;
  wait_us = t->last_write_us == 0 ? 0 : t->last_write_us + VMCE_METRICS_FILE_GAP_US - g_get_monotonic_time ();
  t->timer = g_timeout_add (wait_us > 0 ? (guint) (wait_us / 1000) + 1 : 0, vmce_textfile_timer_cb, t);
}

/* @path is vmced.conf's, checked there (config.c): a directory missing or
 * not writable is the first write's one line */
gboolean
vmce_metrics_export_set_textfile (VmceMetricsExport *self, const gchar *path, GError **error)
{
  VmceTextfile *t;

  if (!g_path_is_absolute (path) || !g_str_has_suffix (path, ".prom")) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "metrics textfile %s: must be an absolute path ending in .prom (node_exporter reads only those)",
                 path);
    return FALSE;
  }
  t = self->textfile = g_rc_box_new0 (VmceTextfile);
  t->path = g_strdup (path);
  t->owner = self;
  vmce_textfile_schedule (t);
  return TRUE;
}

void
vmce_metrics_export_changed (VmceMetricsExport *self)
{
  if (self->textfile != NULL)
    vmce_textfile_schedule (self->textfile);
}

guint
vmce_metrics_export_get_n_written (VmceMetricsExport *self)
{
  return self->textfile != NULL ? self->textfile->n_written : 0;
}

/* --- the endpoint -------------------------------------------------------------- */

/* GET /metrics: OpenMetrics to a scraper that asks for it (Prometheus
 * does), the 0.0.4 text to anything else (curl, an older scraper) */
static void
vmce_metrics_http_cb (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                      gpointer user_data)
{
  VmceMetricsExport *self = user_data;
  const gchar *method = soup_server_message_get_method (msg);
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  const gchar *accept = soup_message_headers_get_one (req, "Accept");
  VmceMetricsFormat format = accept != NULL && strstr (accept, "application/openmetrics-text") != NULL
                                 ? VMCE_METRICS_OPENMETRICS
                                 : VMCE_METRICS_PROMETHEUS;
  g_autoptr(GBytes) text = NULL;

  if (g_strcmp0 (path, "/metrics") != 0) {
    soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
    return;
  }
  if (g_strcmp0 (method, SOUP_METHOD_GET) != 0 && g_strcmp0 (method, SOUP_METHOD_HEAD) != 0) {
    soup_server_message_set_status (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL);
    soup_message_headers_append (soup_server_message_get_response_headers (msg), "Allow", "GET, HEAD");
    return;
  }
  text = self->render (format, self->render_data);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg,
                                    format == VMCE_METRICS_OPENMETRICS ? VMCE_METRICS_OPENMETRICS_TYPE
                                                                       : VMCE_METRICS_PROMETHEUS_TYPE,
                                    SOUP_MEMORY_COPY, g_bytes_get_data (text, NULL), g_bytes_get_size (text));
}

gboolean
vmce_metrics_export_listen (VmceMetricsExport *self, const gchar *address, GError **error)
{
  g_autoptr(GSocketAddress) sa = vmce_config_parse_address (address, error);
  g_autoptr(SoupServer) server = NULL;
  g_autoslist(GUri) uris = NULL;

  if (sa == NULL)
    return FALSE;
  server = soup_server_new ("server-header", "vmced", NULL);
  soup_server_add_handler (server, NULL, vmce_metrics_http_cb, self, NULL);
  if (!soup_server_listen (server, sa, 0, error)) {
    g_prefix_error (error, "metrics: cannot listen on %s: ", address);
    return FALSE;
  }
  uris = soup_server_get_uris (server);
  self->port = uris != NULL ? (guint16) g_uri_get_port (uris->data) : 0;
  self->server = g_steal_pointer (&server);
  return TRUE;
}

guint16
vmce_metrics_export_get_port (VmceMetricsExport *self)
{
  return self->port;
}
