/*
 * poison-index and poison-set: the poisoned pages of a QEMU rebuilt from
 * journal records, as a restarted vmced does
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

#include "poison-index.h"
#include "poison-set.h"

#define ME "b00t/4242/1000"
#define OTHER "b00t/4242/999"

static const gchar *
error_record (const gchar *qemu_id, const gchar *gpa, const gchar *source, const gchar *result)
{
  static gchar buf[1024];

  g_snprintf (buf, sizeof buf,
              "{\"type\":\"memory-error\",\"seq\":7,\"time\":\"2026-12-03T22:58:44.983788Z\","
              "\"vm\":\"g\",\"pid\":4242,\"qemu_id\":\"%s\",\"source\":\"%s\","
              "\"si_code\":\"BUS_MCEERR_AO\",\"hva\":\"0x7f0000200000\",\"gpa\":\"%s\","
              "\"result\":\"%s\"}",
              qemu_id, source, gpa, result);
  return buf;
}

static void
apply (VmcePoisonIndex *idx, const gchar *line)
{
  g_assert_true (vmce_poison_index_apply_line (idx, line, strlen (line)));
}

static GHashTable *
take (VmcePoisonIndex *idx, const gchar *id, gchar **other)
{
  guint64 n = 0;
  gboolean kept = FALSE;

  return vmce_poison_index_take (idx, id, &n, &kept, other);
}

/* A lost 2 MiB: the memory-error that showed it, then the loss with its
 * ranges (pc.ram's first 2 MiB: the hole at 640 KiB splits it). A
 * restarted vmced has every page again, told or not, each with its HVA */
static void
test_index_huge_page_loss (void)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autoptr(GHashTable) pages = NULL;
  VmcePoisonedPage *p;

  apply (idx, error_record (ME, "0x0", "kernel", "injected"));
  apply (idx, "{\"type\":\"huge-page-loss\",\"qemu_id\":\"" ME "\",\"source\":\"kernel\","
              "\"about_seq\":7,\"lsb\":21,\"ranges\":[{\"gpa\":\"0x0\",\"hva\":\"0x7f0000200000\","
              "\"pages\":160},{\"gpa\":\"0xc0000\",\"hva\":\"0x7f00002c0000\",\"pages\":320}]}");
  /* a record of an older vmced, without HVAs, and a damaged one: nothing */
  apply (idx, "{\"type\":\"huge-page-loss\",\"qemu_id\":\"" ME "\",\"about_seq\":7,"
              "\"ranges\":[{\"gpa\":\"0x400000\",\"pages\":512}]}");
  apply (idx, "{\"type\":\"huge-page-loss\",\"qemu_id\":\"" ME "\",\"about_seq\":7,"
              "\"ranges\":[{\"gpa\":\"0x600000\",\"hva\":\"0x1000\",\"pages\":99999999}]}");
  /* nor a loss of a QEMU no error was recorded of */
  apply (idx, "{\"type\":\"huge-page-loss\",\"qemu_id\":\"" OTHER "\",\"about_seq\":3,"
              "\"ranges\":[{\"gpa\":\"0x0\",\"hva\":\"0x7f0000200000\",\"pages\":1}]}");
  g_assert_cmpuint (vmce_poison_index_get_n_qemus (idx), ==, 1);
  g_assert_cmpuint (vmce_poison_index_get_n_pages (idx), ==, 480);

  pages = take (idx, ME, NULL);
  g_assert_nonnull (pages);
  /* the page the error named: reported, told */
  p = vmce_poison_set_lookup (pages, 0x0);
  g_assert_nonnull (p);
  g_assert_true (vmce_poisoned_page_told (p));
  /* its neighbours: lost with it, not told, each at its own HVA */
  p = vmce_poison_set_lookup (pages, 0x9f000);
  g_assert_nonnull (p);
  g_assert_cmphex (p->hva, ==, 0x7f000029f000);
  g_assert_cmpuint (p->lost_with, ==, 7);
  g_assert_false (vmce_poisoned_page_told (p));
  p = vmce_poison_set_lookup (pages, 0x1ff000);
  g_assert_nonnull (p);
  g_assert_cmphex (p->hva, ==, 0x7f00003ff000);
  g_assert_null (vmce_poison_set_lookup (pages, 0xa0000));
  g_assert_null (vmce_poison_set_lookup (pages, 0x400000));
  g_assert_null (vmce_poison_set_lookup (pages, 0x600000));
}

/* hugepage = salvage: the pages kept are fine again, the raw one stays,
 * with the one the error named; a fallback keeps them all */
static void
test_index_salvage (void)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autoptr(GHashTable) pages = NULL;

  apply (idx, error_record (ME, "0x203000", "kernel", "injected"));
  apply (idx, "{\"type\":\"huge-page-loss\",\"qemu_id\":\"" ME "\",\"source\":\"kernel\","
              "\"about_seq\":7,\"lsb\":21,\"ranges\":[{\"gpa\":\"0x200000\",\"hva\":\"0x7f0000200000\","
              "\"pages\":512}]}");
  apply (idx, "{\"type\":\"huge-page-loss\",\"qemu_id\":\"" ME "\",\"source\":\"kernel\","
              "\"about_seq\":9,\"lsb\":21,\"ranges\":[{\"gpa\":\"0x400000\",\"hva\":\"0x7f0000400000\","
              "\"pages\":512}]}");
  g_assert_cmpuint (vmce_poison_index_get_n_pages (idx), ==, 1024);
  apply (idx, "{\"type\":\"huge-page-salvage\",\"qemu_id\":\"" ME "\",\"about_seq\":7,\"salvaged\":510,"
              "\"lost\":[{\"gpa\":\"0x203000\",\"hva\":\"0x7f0000203000\"},"
              "{\"gpa\":\"0x3ff000\",\"hva\":\"0x7f00003ff000\"}]}");
  /* the second loss could not be salvaged: all of it stays */
  apply (idx, "{\"type\":\"huge-page-salvage\",\"qemu_id\":\"" ME "\",\"about_seq\":9,"
              "\"fallback\":\"all\",\"detail\":\"not enough free memory for the copy\"}");
  g_assert_cmpuint (vmce_poison_index_get_n_pages (idx), ==, 2 + 512);
  pages = take (idx, ME, NULL);
  g_assert_nonnull (vmce_poison_set_lookup (pages, 0x203000));
  g_assert_nonnull (vmce_poison_set_lookup (pages, 0x3ff000));
  g_assert_null (vmce_poison_set_lookup (pages, 0x200000));
  g_assert_null (vmce_poison_set_lookup (pages, 0x3fe000));
  g_assert_nonnull (vmce_poison_set_lookup (pages, 0x5ff000));
}

static void
test_index_records (void)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autoptr(GHashTable) pages = NULL;
  VmcePoisonedPage *p;

  /* host errors count whatever became of them; a guest-only injection
   * only when it went in */
  apply (idx, error_record (ME, "0x200000", "kernel", "injected"));
  apply (idx, error_record (ME, "0x201fc0", "simulated", "ignored"));
  apply (idx, error_record (ME, "0x300000", "inject", "injected"));
  apply (idx, error_record (ME, "0x400000", "inject", "failed"));
  apply (idx, error_record (ME, "0x500000", "kernel", "failed"));
  /* no GPA (QEMU's own memory), no qemu_id (an older vmced): not pages */
  apply (idx, "{\"type\":\"memory-error\",\"qemu_id\":\"" ME "\",\"source\":\"kernel\","
              "\"gpa\":null,\"result\":\"passed\"}");
  apply (idx, "{\"type\":\"memory-error\",\"source\":\"kernel\",\"gpa\":\"0x600000\","
              "\"result\":\"injected\"}");
  /* a reset replaced one, QEMU's ROM reload another */
  apply (idx, "{\"type\":\"reset\",\"qemu_id\":\"" ME "\",\"pages\":[{\"gpa\":\"0x500000\","
              "\"result\":\"replaced\"},{\"gpa\":\"0x201000\",\"result\":\"failed\"}]}");
  apply (idx, "{\"type\":\"page-replaced\",\"qemu_id\":\"" ME "\",\"gpa\":\"0x300000\"}");
  /* given zeroed to a migration: still poisoned for the guest */
  apply (idx, "{\"type\":\"page-replaced\",\"qemu_id\":\"" ME "\",\"gpa\":\"0x200000\","
              "\"still_poisoned\":true}");
  g_assert_cmpuint (vmce_poison_index_get_n_qemus (idx), ==, 1);
  g_assert_cmpuint (vmce_poison_index_get_n_pages (idx), ==, 2);

  pages = take (idx, ME, NULL);
  g_assert_nonnull (pages);
  g_assert_cmpuint (g_hash_table_size (pages), ==, 2);
  p = vmce_poison_set_lookup (pages, 0x200abc);
  g_assert_nonnull (p);
  g_assert_true (p->host_poisoned && p->restored && !p->simulated);
  g_assert_cmphex (p->hva, ==, G_GUINT64_CONSTANT (0x7f0000200000));
  g_assert_cmpuint (p->last_seq, ==, 7);
  p = vmce_poison_set_lookup (pages, 0x201000);
  g_assert_nonnull (p);
  g_assert_true (p->simulated);
  g_assert_null (vmce_poison_set_lookup (pages, 0x300000));
  g_assert_null (vmce_poison_set_lookup (pages, 0x500000));
  /* taken: a second attach gets nothing */
  g_assert_null (take (idx, ME, NULL));
}

static void
test_index_other_process (void)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autofree gchar *other = NULL;

  apply (idx, error_record (OTHER, "0x200000", "kernel", "injected"));
  g_assert_null (take (idx, ME, &other));
  g_assert_cmpstr (other, ==, OTHER);
  g_clear_pointer (&other, g_free);
  /* its QEMU exited: nothing of it is kept */
  apply (idx, "{\"type\":\"vm-exit\",\"qemu_id\":\"" OTHER "\"}");
  g_assert_null (take (idx, ME, &other));
  g_assert_null (other);
  g_assert_cmpuint (vmce_poison_index_get_n_qemus (idx), ==, 0);
}

static void
test_index_keep (void)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  GHashTable *set = vmce_poison_set_new ();
  g_autoptr(GHashTable) back = NULL;
  guint64 n = 0;
  gboolean kept = FALSE;
  g_autoptr(JsonNode) rec = json_from_string (error_record (ME, "0x7000", "kernel", "injected"),
                                              NULL);

  g_assert_true (vmce_poison_set_add_record (set, json_node_get_object (rec)));
  vmce_poison_index_keep (idx, ME, set);
  back = vmce_poison_index_take (idx, ME, &n, &kept, NULL);
  g_assert_true (back == set);
  g_assert_true (kept);
}

static void
test_index_load (void)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *path = NULL;
  g_autoptr(GString) text = g_string_new (NULL);
  VmcePoisonIndexStats st;
  int fd;

  g_string_append_printf (text, "%s\n", error_record (ME, "0x1000", "kernel", "injected"));
  g_string_append (text, "not json at all\n\n");
  g_string_append_printf (text, "%s\n", error_record (ME, "0x2000", "kernel", "injected"));
  /* cut short by a crash */
  g_string_append (text, "{\"type\":\"memory-error\",\"qemu_id\":\"" ME "\",\"gpa\":\"0x3");
  fd = g_file_open_tmp ("vmce-journal-XXXXXX", &path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (write (fd, text->str, text->len), ==, (gssize) text->len);
  close (fd);

  g_assert_true (vmce_poison_index_load (idx, path, &st, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (st.lines, ==, 5);
  g_assert_cmpuint (st.records, ==, 2);
  g_assert_cmpuint (st.bad_lines, ==, 2);
  g_assert_cmpuint (st.first_bad_line, ==, 2);
  g_assert_cmpuint (vmce_poison_index_get_n_pages (idx), ==, 2);
  g_unlink (path);

  /* no journal yet: nothing known, no error */
  g_assert_true (vmce_poison_index_load (idx, "/nonexistent/journal.jsonl", &st, &error));
  g_assert_cmpuint (st.records, ==, 0);
}

/* A migration's destination whose vmced went between `receiving` and
 * `received`: the next one has the pages to put in, as they were sent (told
 * or not, kind, count, the loss), and whether to let the guest run after;
 * one whose marks are in, or whose QEMU exited, has none */
static void
test_index_receiving (void)
{
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autoptr(GPtrArray) pages = NULL;
  g_autofree gchar *source = NULL;
  gboolean autostart_off = FALSE;
  const VmcePoisonedPage *p;

  apply (idx, "{\"type\":\"migration\",\"qemu_id\":\"" ME "\",\"action\":\"receiving\",\"source\":\"src\","
              "\"pages\":[{\"gpa\":\"0x29a2000\",\"told\":true,\"kind\":\"ar\",\"count\":2,"
              "\"source\":\"simulated\"},{\"gpa\":\"0x1234567\",\"told\":false,\"kind\":\"ao\",\"count\":0,"
              "\"lost_with\":9,\"source\":\"kernel\"},{\"told\":true}],\"autostart_off\":true}");
  apply (idx, "{\"type\":\"migration\",\"qemu_id\":\"" ME "\",\"action\":\"receiving\",\"source\":\"src\","
              "\"pages\":[{\"gpa\":\"0x5000\",\"told\":true}],\"autostart_off\":false}");
  apply (idx, "{\"type\":\"migration\",\"qemu_id\":\"" OTHER "\",\"action\":\"receiving\",\"source\":\"s\","
              "\"pages\":[{\"gpa\":\"0x5000\"}]}");
  apply (idx, "{\"type\":\"migration\",\"qemu_id\":\"" OTHER "\",\"action\":\"received\",\"pages\":[]}");
  apply (idx, "{\"type\":\"migration\",\"qemu_id\":\"b00t/1/1\",\"action\":\"receiving\",\"source\":\"s\","
              "\"pages\":[{\"gpa\":\"0x5000\"}]}");
  apply (idx, "{\"type\":\"vm-exit\",\"qemu_id\":\"b00t/1/1\"}");

  pages = vmce_poison_index_take_receiving (idx, ME, &source, &autostart_off);
  g_assert_nonnull (pages);
  g_assert_cmpstr (source, ==, "src");
  g_assert_true (autostart_off);
  g_assert_cmpuint (pages->len, ==, 3); /* the one without a gpa is left out */
  p = g_ptr_array_index (pages, 0);
  g_assert_cmphex (p->gpa, ==, 0x29a2000);
  g_assert_true (p->kind == VMCE_MCE_KIND_AR && p->count == 2 && p->simulated && vmce_poisoned_page_told (p));
  p = g_ptr_array_index (pages, 1);
  g_assert_cmphex (p->gpa, ==, 0x1234000); /* its page */
  g_assert_true (p->lost_with == 9 && !p->simulated && !vmce_poisoned_page_told (p));
  g_clear_pointer (&source, g_free);
  g_assert_null (vmce_poison_index_take_receiving (idx, ME, &source, &autostart_off)); /* taken */
  g_assert_null (vmce_poison_index_take_receiving (idx, OTHER, &source, &autostart_off));
  g_assert_null (vmce_poison_index_take_receiving (idx, "b00t/1/1", &source, &autostart_off));
  g_assert_false (autostart_off);
}

/* A host error whose machine check waits in the queue: its page is in the
 * set at once, bad on the host and untold (count 0), and its record adds
 * the count; a record of one the migration took ("migrated") keeps the
 * page as a journal replay reads it */
static void
test_set_pending (void)
{
  g_autoptr(GHashTable) set = vmce_poison_set_new ();
  g_autoptr(VmcePoisonIndex) idx = vmce_poison_index_new ();
  g_autoptr(GHashTable) pages = NULL;
  VmceMceEvent *ev = vmce_mce_event_new ();
  VmcePoisonedPage *p;

  ev->source = "simulated"; /* (a static string, as the forwarder sets it) */
  ev->have_gpa = TRUE;
  ev->gpa = 0x29a2123;
  ev->hva = 0x7f0000002123;
  ev->kind = VMCE_MCE_KIND_AO;
  ev->result = VMCE_RESULT_PENDING;
  p = vmce_poison_set_add_pending (set, ev);
  g_assert_nonnull (p);
  g_assert_true (p->gpa == 0x29a2000 && p->hva == 0x7f0000002000 && p->host_poisoned && p->count == 0);
  g_assert_null (vmce_poison_set_add_pending (set, ev)); /* known already */
  ev->result = VMCE_RESULT_INJECTED;
  p = vmce_poison_set_add_event (set, ev);
  g_assert_true (p->count == 1 && p->result == VMCE_RESULT_INJECTED);
  /* a machine check with no host side is no pending page */
  ev->source = "inject";
  ev->gpa = 0x5000;
  g_assert_null (vmce_poison_set_add_pending (set, ev));
  vmce_mce_event_free (ev);

  g_assert_cmpstr (vmce_result_to_string (VMCE_RESULT_MIGRATED), ==, "migrated");
  apply (idx, error_record (ME, "0x29a2000", "simulated", "migrated"));
  pages = take (idx, ME, NULL);
  g_assert_nonnull (pages);
  p = vmce_poison_set_lookup (pages, 0x29a2000);
  g_assert_true (p != NULL && p->result == VMCE_RESULT_MIGRATED);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/poison-index/records", test_index_records);
  g_test_add_func ("/poison-index/huge-page-loss", test_index_huge_page_loss);
  g_test_add_func ("/poison-index/huge-page-salvage", test_index_salvage);
  g_test_add_func ("/poison-index/other-process", test_index_other_process);
  g_test_add_func ("/poison-index/keep", test_index_keep);
  g_test_add_func ("/poison-index/load", test_index_load);
  g_test_add_func ("/poison-index/receiving", test_index_receiving);
  g_test_add_func ("/poison-set/pending", test_set_pending);
  return g_test_run ();
}
