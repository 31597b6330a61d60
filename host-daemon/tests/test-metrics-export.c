/*
 * vmced's metrics delivered: the textfile node_exporter reads and the
 * HTTP endpoint, and what goes wrong with each.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>
#include <sys/stat.h>

#include "metrics-export.h"

typedef struct {
  guint renders;
  gchar *text;
} Source;

static GBytes *
render_cb (VmceMetricsFormat format, gpointer user_data)
{
  Source *src = user_data;

  src->renders++;
  g_free (src->text);
  src->text = g_strdup_printf ("# format %s\nvmce_renders_total %u\n%s",
                               format == VMCE_METRICS_OPENMETRICS ? "openmetrics" : "prometheus", src->renders,
                               format == VMCE_METRICS_OPENMETRICS ? "# EOF\n" : "");
  return g_bytes_new (src->text, strlen (src->text));
}

/* The main loop for 10 ms, whatever comes */
static void
iterate_a_moment (void)
{
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_usleep (10000);
}

static void
wait_written (VmceMetricsExport *e, guint n)
{
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  while (vmce_metrics_export_get_n_written (e) < n && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (vmce_metrics_export_get_n_written (e), ==, n);
}

/* Written at once, whole, 0644 (node_exporter does not run as root);
 * changes a moment apart are one write, a second later */
static void
test_export_textfile (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-metrics-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "vmce.prom", NULL);
  g_autofree gchar *text = NULL;
  g_autoptr(GError) error = NULL;
  Source src = { 0 };
  VmceMetricsExport *e = vmce_metrics_export_new (render_cb, &src);
  struct stat st;
  gint64 t0;

  /* vmced.service's umask: the file must be 0644 all the same */
  mode_t old_umask = umask (0077);

  g_assert_true (vmce_metrics_export_set_textfile (e, path, &error));
  wait_written (e, 1);
  umask (old_umask);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "# format prometheus\nvmce_renders_total 1\n");
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0644);
  t0 = g_get_monotonic_time ();
  vmce_metrics_export_changed (e);
  vmce_metrics_export_changed (e);
  vmce_metrics_export_changed (e);
  wait_written (e, 2);
  g_assert_cmpuint (src.renders, ==, 2);
  g_assert_cmpint (g_get_monotonic_time () - t0, >=, G_USEC_PER_SEC / 2);
  vmce_metrics_export_free (e);
  g_assert_cmpint (g_unlink (path), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
  g_free (src.text);
}

/* Its directory missing: one line, and vmced goes on; the directory made,
 * the next change writes it */
static void
test_export_textfile_missing_dir (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vmce-metrics-XXXXXX", NULL);
  g_autofree gchar *sub = g_build_filename (dir, "node-exporter", NULL);
  g_autofree gchar *path = g_build_filename (sub, "vmce.prom", NULL);
  g_autoptr(GError) error = NULL;
  Source src = { 0 };
  VmceMetricsExport *e = vmce_metrics_export_new (render_cb, &src);
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  g_test_expect_message ("vmce-metrics", G_LOG_LEVEL_WARNING,
                         "metrics: cannot write *vmce.prom*No such file or directory (is prometheus-node-exporter installed?)*");
  g_assert_true (vmce_metrics_export_set_textfile (e, path, &error));
  while (src.renders < 1 || g_get_monotonic_time () < deadline - 4 * G_USEC_PER_SEC)
    iterate_a_moment ();
  g_test_assert_expected_messages ();
  /* again, a second later: no second line (warnings are fatal here) */
  vmce_metrics_export_changed (e);
  while (src.renders < 2)
    g_main_context_iteration (NULL, TRUE);
  while (g_get_monotonic_time () < deadline - 2 * G_USEC_PER_SEC)
    iterate_a_moment ();
  g_assert_cmpuint (vmce_metrics_export_get_n_written (e), ==, 0);
  g_assert_cmpint (g_mkdir (sub, 0755), ==, 0);
  g_test_expect_message ("vmce-metrics", G_LOG_LEVEL_MESSAGE, "metrics: *vmce.prom written again");
  vmce_metrics_export_changed (e);
  wait_written (e, 1);
  g_test_assert_expected_messages ();
  vmce_metrics_export_free (e);
  g_assert_cmpint (g_unlink (path), ==, 0);
  g_assert_cmpint (g_rmdir (sub), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
  g_free (src.text);
}

static void
test_export_textfile_bad_path (void)
{
  g_autoptr(GError) error = NULL;
  Source src = { 0 };
  g_autoptr(VmceMetricsExport) e = vmce_metrics_export_new (render_cb, &src);

  g_assert_false (vmce_metrics_export_set_textfile (e, "/tmp/vmce.txt", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "ending in .prom"));
}

static void
got_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (res);
}

/* The body; the status and content type through the pointers */
static gchar *
http_get (guint16 port, const gchar *path, const gchar *accept, guint *status, gchar **type)
{
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autofree gchar *uri = g_strdup_printf ("http://127.0.0.1:%u%s", port, path);
  g_autoptr(SoupMessage) msg = soup_message_new ("GET", uri);
  g_autoptr(GBytes) body = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GAsyncResult) res = NULL;

  if (accept != NULL)
    soup_message_headers_replace (soup_message_get_request_headers (msg), "Accept", accept);
  /* async: the server answers from this same main context */
  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL, got_cb, &res);
  while (res == NULL)
    g_main_context_iteration (NULL, TRUE);
  body = soup_session_send_and_read_finish (session, res, &error);
  g_assert_no_error (error);
  *status = soup_message_get_status (msg);
  *type = g_strdup (soup_message_headers_get_one (soup_message_get_response_headers (msg), "Content-Type"));
  return g_strndup (g_bytes_get_data (body, NULL), g_bytes_get_size (body));
}

/* OpenMetrics to Prometheus (which asks for it), the 0.0.4 text to curl;
 * nothing but /metrics */
static void
test_export_http (void)
{
  g_autoptr(GError) error = NULL;
  Source src = { 0 };
  g_autoptr(VmceMetricsExport) e = vmce_metrics_export_new (render_cb, &src);
  g_autofree gchar *om = NULL;
  g_autofree gchar *om_type = NULL;
  g_autofree gchar *text = NULL;
  g_autofree gchar *text_type = NULL;
  g_autofree gchar *other = NULL;
  g_autofree gchar *other_type = NULL;
  guint status = 0;
  guint16 port;

  g_assert_true (vmce_metrics_export_listen (e, "127.0.0.1:0", &error));
  g_assert_no_error (error);
  port = vmce_metrics_export_get_port (e);
  g_assert_cmpuint (port, >, 0);
  om = http_get (port, "/metrics",
                 "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                 &status, &om_type);
  g_assert_cmpuint (status, ==, 200);
  g_assert_cmpstr (om_type, ==, VMCE_METRICS_OPENMETRICS_TYPE);
  g_assert_cmpstr (om, ==, "# format openmetrics\nvmce_renders_total 1\n# EOF\n");
  text = http_get (port, "/metrics", NULL, &status, &text_type);
  g_assert_cmpuint (status, ==, 200);
  g_assert_cmpstr (text_type, ==, VMCE_METRICS_PROMETHEUS_TYPE);
  g_assert_cmpstr (text, ==, "# format prometheus\nvmce_renders_total 2\n");
  other = http_get (port, "/", NULL, &status, &other_type);
  g_assert_cmpuint (status, ==, 404);
  g_assert_cmpuint (src.renders, ==, 2);
  g_free (src.text);
}

/* An address in use is the error, naming it */
static void
test_export_http_in_use (void)
{
  g_autoptr(GError) error = NULL;
  Source src = { 0 };
  g_autoptr(VmceMetricsExport) first = vmce_metrics_export_new (render_cb, &src);
  g_autoptr(VmceMetricsExport) second = vmce_metrics_export_new (render_cb, &src);
  g_autofree gchar *addr = NULL;

  g_assert_true (vmce_metrics_export_listen (first, "127.0.0.1:0", &error));
  addr = g_strdup_printf ("127.0.0.1:%u", vmce_metrics_export_get_port (first));
  g_assert_false (vmce_metrics_export_listen (second, addr, &error));
  g_assert_nonnull (error);
  g_assert_true (g_str_has_prefix (error->message, "metrics: cannot listen on 127.0.0.1:"));
  g_assert_nonnull (strstr (error->message, "in use"));
  g_assert_cmpuint (vmce_metrics_export_get_port (second), ==, 0);
  g_clear_error (&error);
  g_assert_false (vmce_metrics_export_listen (second, "localhost:9469", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/metrics-export/textfile", test_export_textfile);
  g_test_add_func ("/metrics-export/textfile-missing-dir", test_export_textfile_missing_dir);
  g_test_add_func ("/metrics-export/textfile-bad-path", test_export_textfile_bad_path);
  g_test_add_func ("/metrics-export/http", test_export_http);
  g_test_add_func ("/metrics-export/http-in-use", test_export_http_in_use);
  return g_test_run ();
}
