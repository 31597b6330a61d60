/*
 * vmced's metrics text: what an operator's scraper reads, in both formats.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "json-util.h"
#include "metrics.h"

static gchar *
render (VmceMetrics *m, VmceMetricsFormat format)
{
  g_autoptr(GBytes) b = vmce_metrics_render (m, format);

  return g_strndup (g_bytes_get_data (b, NULL), g_bytes_get_size (b));
}

static void
count (VmceMetrics *m, const gchar *json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) record = vmce_json_parse_object (json, -1, "test", &error);

  g_assert_no_error (error);
  vmce_metrics_count_record (m, record);
}

/* An attached VM's series are there at 0 before anything happens: an
 * alert on their increase sees the first error */
static void
test_metrics_attached_at_zero (void)
{
  g_autoptr(VmceMetrics) m = vmce_metrics_new (1765000000123456, "1.2");
  g_autofree gchar *om = NULL;

  vmce_metrics_vm_attached (m, "web1");
  om = render (m, VMCE_METRICS_OPENMETRICS);
  g_assert_nonnull (strstr (om, "# TYPE vmce_memory_errors counter\n"));
  g_assert_nonnull (strstr (om, "vmce_memory_errors_total{vm=\"web1\",kind=\"ao\",outcome=\"forwarded\"} 0\n"));
  g_assert_nonnull (strstr (om, "vmce_memory_errors_total{vm=\"web1\",kind=\"ar\",outcome=\"not_injected\"} 0\n"));
  g_assert_nonnull (strstr (om, "vmce_migrations_refused_total{vm=\"web1\"} 0\n"));
  g_assert_nonnull (strstr (om, "vmce_poisoned_pages{vm=\"web1\"} 0\n"));
  g_assert_nonnull (strstr (om, "vmce_attached_vms 1\n"));
  g_assert_nonnull (strstr (om, "vmce_start_time_seconds 1765000000.123456\n"));
  g_assert_nonnull (strstr (om, "# TYPE vmce_build info\n"));
  g_assert_nonnull (strstr (om, "vmce_build_info{version=\"1.2\"} 1\n"));
  /* (no loss yet: no series, its label is the policy at the time) */
  g_assert_null (strstr (om, "vmce_huge_page_losses_total{"));
  g_assert_true (g_str_has_suffix (om, "} 1\n# EOF\n"));
}

static void
test_metrics_counts (void)
{
  g_autoptr(VmceMetrics) m = vmce_metrics_new (0, "1.2");
  g_autofree gchar *text = NULL;
  guint64 gen;

  vmce_metrics_vm_attached (m, "web1");
  gen = vmce_metrics_get_generation (m);
  vmce_metrics_count_error (m, "web1", VMCE_MCE_KIND_AO, VMCE_RESULT_INJECTED);
  vmce_metrics_count_error (m, "web1", VMCE_MCE_KIND_AO, VMCE_RESULT_COALESCED);
  vmce_metrics_count_error (m, "web1", VMCE_MCE_KIND_AR, VMCE_RESULT_FAILED);
  vmce_metrics_count_error (m, "web1", VMCE_MCE_KIND_AR, VMCE_RESULT_STOPPED);
  g_assert_cmpuint (vmce_metrics_get_generation (m), >, gen);
  count (m, "{\"type\":\"huge-page-loss\",\"vm\":\"web1\",\"policy\":\"salvage\"}");
  count (m, "{\"type\":\"huge-page-salvage\",\"vm\":\"web1\",\"fallback\":\"all\"}");
  count (m, "{\"type\":\"migration\",\"vm\":\"web1\",\"action\":\"refused\"}");
  count (m, "{\"type\":\"migration\",\"vm\":\"web1\",\"action\":\"handed-over\"}");
  count (m, "{\"type\":\"attach-failed\",\"vm\":null,\"pid\":12}");
  count (m, "{\"type\":\"reset\",\"vm\":\"web1\"}");
  vmce_metrics_count_journal_error (m);
  vmce_metrics_set_poisoned (m, "web1", 3);
  vmce_metrics_set_poisoned_detached (m, 7);
  text = render (m, VMCE_METRICS_PROMETHEUS);
  g_assert_nonnull (strstr (text, "vmce_memory_errors_total{vm=\"web1\",kind=\"ao\",outcome=\"forwarded\"} 2\n"));
  g_assert_nonnull (strstr (text, "vmce_memory_errors_total{vm=\"web1\",kind=\"ar\",outcome=\"not_injected\"} 1\n"));
  g_assert_nonnull (strstr (text, "vmce_memory_errors_total{vm=\"web1\",kind=\"ar\",outcome=\"paused\"} 1\n"));
  g_assert_nonnull (strstr (text, "vmce_huge_page_losses_total{vm=\"web1\",policy=\"salvage\"} 1\n"));
  g_assert_nonnull (strstr (text, "vmce_huge_page_salvages_total{vm=\"web1\",result=\"failed\"} 1\n"));
  g_assert_nonnull (strstr (text, "vmce_migrations_refused_total{vm=\"web1\"} 1\n"));
  g_assert_nonnull (strstr (text, "vmce_attach_failures_total 1\n"));
  g_assert_nonnull (strstr (text, "vmce_journal_write_errors_total 1\n"));
  g_assert_nonnull (strstr (text, "vmce_poisoned_pages{vm=\"web1\"} 3\n"));
  g_assert_nonnull (strstr (text, "vmce_poisoned_pages_detached 7\n"));
  /* Prometheus 0.0.4: a counter's family is named as its samples are, no
   * info type, no # EOF */
  g_assert_nonnull (strstr (text, "# TYPE vmce_memory_errors_total counter\n"));
  g_assert_nonnull (strstr (text, "# TYPE vmce_build_info gauge\n"));
  g_assert_null (strstr (text, "# EOF"));
  g_assert_cmpstr (vmce_metrics_outcome (VMCE_RESULT_MIGRATED), ==, "forwarded");
  g_assert_cmpstr (vmce_metrics_outcome (VMCE_RESULT_PENDING), ==, "not_injected");
}

/* A VM's name is the operator's: a quote, a backslash or a newline in it
 * must not end the label or the line */
static void
test_metrics_escaping (void)
{
  g_autoptr(VmceMetrics) m = vmce_metrics_new (0, "1.2");
  g_autofree gchar *om = NULL;

  vmce_metrics_vm_attached (m, "a\"b\\c\nd");
  vmce_metrics_vm_attached (m, "bad\xff");
  om = render (m, VMCE_METRICS_OPENMETRICS);
  g_assert_nonnull (strstr (om, "vmce_poisoned_pages{vm=\"a\\\"b\\\\c\\nd\"} 0\n"));
  g_assert_true (g_utf8_validate (om, -1, NULL));
  g_assert_nonnull (strstr (om, "vmce_poisoned_pages{vm=\"bad\xef\xbf\xbd\"} 0\n"));
}

/* A VM that went takes its series; the next renders are the same text */
static void
test_metrics_gone (void)
{
  g_autoptr(VmceMetrics) m = vmce_metrics_new (0, "1.2");
  g_autofree gchar *before = NULL;
  g_autofree gchar *after = NULL;
  g_autofree gchar *again = NULL;

  vmce_metrics_vm_attached (m, "b");
  vmce_metrics_vm_attached (m, "a");
  before = render (m, VMCE_METRICS_OPENMETRICS);
  g_assert_true (strstr (before, "{vm=\"a\"}") < strstr (before, "{vm=\"b\"}"));
  vmce_metrics_vm_gone (m, "a");
  after = render (m, VMCE_METRICS_OPENMETRICS);
  again = render (m, VMCE_METRICS_OPENMETRICS);
  g_assert_null (strstr (after, "vm=\"a\""));
  g_assert_nonnull (strstr (after, "vmce_attached_vms 1\n"));
  g_assert_cmpstr (after, ==, again);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/metrics/attached-at-zero", test_metrics_attached_at_zero);
  g_test_add_func ("/metrics/counts", test_metrics_counts);
  g_test_add_func ("/metrics/escaping", test_metrics_escaping);
  g_test_add_func ("/metrics/gone", test_metrics_gone);
  return g_test_run ();
}
