/*
 * The journal's memory-error record.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <signal.h>
#include <string.h>

#include "json-util.h"
#include "mce-event.h"

static VmceMceEvent *
sample_event (void)
{
  VmceMceEvent *ev = vmce_mce_event_new ();
  static const VmceCpuModel skylake = { .vendor = "GenuineIntel", .family = 6, .model = 94,
                                        .ser_p = TRUE };

  ev->seq = 7;
  ev->time_us = G_GINT64_CONSTANT (1796296830123456); /* 2026-12-03T11:20:30.123456Z */
  ev->vm = g_strdup ("guest1");
  ev->pid = 4242;
  ev->tid = 4242;
  ev->thread = g_strdup ("main");
  ev->si_code = BUS_MCEERR_AO;
  ev->hva = G_GUINT64_CONSTANT (0x7f5a12345000);
  ev->lsb = 12;
  ev->source = "simulated";
  ev->have_gpa = TRUE;
  ev->gpa = G_GUINT64_CONSTANT (0x140005000);
  ev->block = g_strdup ("pc.ram");
  ev->block_offset = G_GUINT64_CONSTANT (0x100005000);
  ev->kind = VMCE_MCE_KIND_AO;
  ev->style = VMCE_MCE_STYLE_INTEL;
  ev->policy = "forward";
  vmce_mce_encode (VMCE_MCE_KIND_AO, ev->gpa, 0, &skylake, ev->style, &ev->mce);
  ev->have_mce = TRUE;
  ev->via = g_strdup ("hmp");
  ev->handled_by = g_strdup ("vmced");
  ev->result = VMCE_RESULT_INJECTED;
  ev->to_monitor_us = 37;
  ev->queued_us = 5;
  ev->latency_us = 412;
  return ev;
}

static void
test_mce_event_json (void)
{
  g_autoptr(VmceMceEvent) ev = sample_event ();
  g_autoptr(JsonNode) node = vmce_mce_event_to_json (ev);
  g_autofree gchar *line = vmce_json_to_line (node);
  JsonObject *obj = json_node_get_object (node);
  JsonObject *mce = json_object_get_object_member (obj, "mce");

  g_assert_null (strchr (line, '\n'));
  g_assert_cmpstr (json_object_get_string_member (obj, "type"), ==, "memory-error");
  g_assert_cmpstr (json_object_get_string_member (obj, "time"), ==,
                   "2026-12-03T11:20:30.123456Z");
  g_assert_cmpstr (json_object_get_string_member (obj, "vm"), ==, "guest1");
  g_assert_cmpint (json_object_get_int_member (obj, "pid"), ==, 4242);
  g_assert_cmpstr (json_object_get_string_member (obj, "si_code"), ==, "BUS_MCEERR_AO");
  /* 64-bit values travel as hex strings: json-glib has no unsigned type */
  g_assert_cmpstr (json_object_get_string_member (obj, "hva"), ==, "0x7f5a12345000");
  g_assert_cmpstr (json_object_get_string_member (obj, "gpa"), ==, "0x140005000");
  g_assert_cmpstr (json_object_get_string_member (obj, "block"), ==, "pc.ram");
  g_assert_cmpstr (json_object_get_string_member (obj, "block_offset"), ==, "0x100005000");
  g_assert_cmpint (json_object_get_int_member (obj, "vcpu"), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (mce, "status"), ==, "0xbd000000000000c0");
  g_assert_cmpstr (json_object_get_string_member (mce, "kind"), ==, "SRAO");
  g_assert_cmpstr (json_object_get_string_member (mce, "style"), ==, "intel");
  g_assert_cmpstr (json_object_get_string_member (obj, "policy"), ==, "forward");
  g_assert_cmpstr (json_object_get_string_member (obj, "result"), ==, "injected");
  g_assert_cmpstr (json_object_get_string_member (obj, "handled_by"), ==, "vmced");
  g_assert_cmpint (json_object_get_int_member (obj, "latency_us"), ==, 412);
  g_assert_true (json_object_get_null_member (obj, "detail"));
}

/* The journal line whole: readers see the members in this order, and
 * what is unknown as null rather than missing */
static void
test_mce_event_line (void)
{
  g_autoptr(VmceMceEvent) ev = sample_event ();
  g_autoptr(JsonNode) node = vmce_mce_event_to_json (ev);
  g_autoptr(JsonNode) bare_node = NULL;
  g_autofree gchar *line = vmce_json_to_line (node);
  g_autofree gchar *bare = NULL;

  g_assert_cmpstr (line, ==,
                   "{\"type\":\"memory-error\",\"seq\":7,\"time\":\"2026-12-03T11:20:30.123456Z\","
                   "\"vm\":\"guest1\",\"pid\":4242,\"tid\":4242,\"thread\":\"main\","
                   "\"source\":\"simulated\",\"si_code\":\"BUS_MCEERR_AO\","
                   "\"hva\":\"0x7f5a12345000\",\"lsb\":12,\"gpa\":\"0x140005000\","
                   "\"block\":\"pc.ram\",\"block_offset\":\"0x100005000\",\"vcpu\":0,"
                   "\"mce\":{\"kind\":\"SRAO\",\"style\":\"intel\",\"bank\":9,"
                   "\"status\":\"0xbd000000000000c0\",\"mcg_status\":\"0x5\","
                   "\"addr\":\"0x140005000\",\"misc\":\"0x8c\",\"broadcast\":true},"
                   "\"policy\":\"forward\",\"via\":\"hmp\",\"handled_by\":\"vmced\","
                   "\"result\":\"injected\",\"detail\":null,\"to_monitor_us\":37,\"queued_us\":5,\"latency_us\":412,"
                   "\"held_us\":null,\"repeats\":0,\"busy\":0,\"dropped\":0}");

  /* no signal, no thread, no GPA, no machine check; QEMU's event kept */
  ev->si_code = 0;
  ev->hva = 0;
  ev->tid = 0;
  ev->have_gpa = FALSE;
  ev->have_mce = FALSE;
  ev->latency_us = -1;
  ev->queued_us = -1;
  ev->held_us = 55;
  ev->qemu_event = json_from_string ("{\"event\":\"MEMORY_FAILURE\"}", NULL);
  bare_node = vmce_mce_event_to_json (ev);
  bare = vmce_json_to_line (bare_node);
  g_assert_cmpstr (bare, ==,
                   "{\"type\":\"memory-error\",\"seq\":7,\"time\":\"2026-12-03T11:20:30.123456Z\","
                   "\"vm\":\"guest1\",\"pid\":4242,\"tid\":null,\"thread\":\"main\","
                   "\"source\":\"simulated\",\"si_code\":null,\"hva\":null,\"lsb\":null,"
                   "\"gpa\":null,\"block\":\"pc.ram\",\"vcpu\":null,\"mce\":null,"
                   "\"policy\":\"forward\",\"via\":\"hmp\",\"handled_by\":\"vmced\","
                   "\"result\":\"injected\",\"detail\":null,\"to_monitor_us\":37,\"queued_us\":null,\"latency_us\":null,"
                   "\"held_us\":55,\"repeats\":0,\"busy\":0,\"dropped\":0,\"qemu_event\":{\"event\":\"MEMORY_FAILURE\"}}");
}

/* An error outside guest RAM: no GPA, no machine check, QEMU handles it */
static void
test_mce_event_passed (void)
{
  g_autoptr(VmceMceEvent) ev = sample_event ();
  g_autoptr(JsonNode) node = NULL;
  JsonObject *obj;

  ev->have_gpa = FALSE;
  ev->have_mce = FALSE;
  ev->result = VMCE_RESULT_PASSED;
  g_free (ev->handled_by);
  ev->handled_by = g_strdup ("qemu");
  ev->detail = g_strdup ("HVA is not guest RAM");
  ev->latency_us = -1;
  node = vmce_mce_event_to_json (ev);
  obj = json_node_get_object (node);
  g_assert_true (json_object_get_null_member (obj, "gpa"));
  g_assert_true (json_object_get_null_member (obj, "mce"));
  g_assert_true (json_object_get_null_member (obj, "vcpu"));
  g_assert_true (json_object_get_null_member (obj, "latency_us"));
  g_assert_cmpstr (json_object_get_string_member (obj, "result"), ==, "passed");
  g_assert_cmpstr (json_object_get_string_member (obj, "handled_by"), ==, "qemu");
}

static void
test_parse_u64 (void)
{
  g_autoptr(GError) error = NULL;
  guint64 v = 0;

  g_assert_true (vmce_parse_u64 ("0xbd000000000000c0", &v, &error));
  g_assert_cmphex (v, ==, G_GUINT64_CONSTANT (0xbd000000000000c0));
  g_assert_true (vmce_parse_u64 ("4096", &v, &error));
  g_assert_cmpuint (v, ==, 4096);
  g_assert_false (vmce_parse_u64 ("-1", &v, &error));
  g_clear_error (&error);
  g_assert_false (vmce_parse_u64 ("0x", &v, &error));
  g_clear_error (&error);
  g_assert_false (vmce_parse_u64 ("0x1g", &v, &error));
  g_clear_error (&error);
  g_assert_false (vmce_parse_u64 ("0x10000000000000000", &v, &error));
  g_assert_nonnull (strstr (error->message, "range"));
}

/* the host page: an integer where known, null and why where looked up in
 * vain, absent where nothing was looked up (an injection) */
static void
test_mce_event_host_pfn (void)
{
  g_autoptr(VmceMceEvent) ev = sample_event ();
  JsonNode *node;
  JsonObject *obj;

  node = vmce_mce_event_to_json (ev);
  g_assert_false (json_object_has_member (json_node_get_object (node), "host_pfn"));
  json_node_unref (node);

  ev->host_pfn = (VmceHostPfn) { .from = VMCE_HOST_PFN_HWPOISON, .pfn = G_GUINT64_CONSTANT (0x7fffffffffffff) };
  node = vmce_mce_event_to_json (ev);
  obj = json_node_get_object (node);
  g_assert_cmpint (json_object_get_int_member (obj, "host_pfn"), ==, G_GINT64_CONSTANT (0x7fffffffffffff));
  g_assert_cmpstr (json_object_get_string_member (obj, "host_pfn_from"), ==, "hwpoison-entry");
  g_assert_false (json_object_has_member (obj, "host_pfn_why"));
  json_node_unref (node);

  ev->host_pfn = (VmceHostPfn) { .from = VMCE_HOST_PFN_NONE, .why = "the page is swapped out" };
  node = vmce_mce_event_to_json (ev);
  obj = json_node_get_object (node);
  g_assert_true (json_object_get_null_member (obj, "host_pfn"));
  g_assert_true (json_object_get_null_member (obj, "host_pfn_from"));
  g_assert_cmpstr (json_object_get_string_member (obj, "host_pfn_why"), ==, "the page is swapped out");
  json_node_unref (node);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mce-event/json", test_mce_event_json);
  g_test_add_func ("/mce-event/passed", test_mce_event_passed);
  g_test_add_func ("/mce-event/line", test_mce_event_line);
  g_test_add_func ("/mce-event/host-pfn", test_mce_event_host_pfn);
  g_test_add_func ("/mce-event/parse-u64", test_parse_u64);
  return g_test_run ();
}
