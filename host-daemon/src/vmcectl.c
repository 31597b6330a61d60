/*
 * vmcectl: talk to vmced.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmcectl"

#include <gio/gio.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-connect.h"
#include "json-util.h"

static gboolean opt_json = FALSE;

static JsonNode *
vmcectl_call (VmceCtlConn *c, const gchar *command, JsonObject *args, GError **error)
{
  return vmce_ctl_conn_call (c, command, args, error);
}

static void
vmcectl_print_json (JsonNode *node)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autofree gchar *text = NULL;

  json_generator_set_pretty (gen, TRUE);
  json_generator_set_root (gen, node);
  text = json_generator_to_data (gen, NULL);
  g_print ("%s\n", text);
}

static const gchar *
vmcectl_str (JsonObject *obj, const gchar *member)
{
  const gchar *s = vmce_json_object_get_string_opt (obj, member);
  return s != NULL ? s : "-";
}

/* A reset record: the poisoned pages replaced before the guest ran again */
static void
vmcectl_print_reset (JsonObject *ev)
{
  JsonArray *pages = json_object_get_array_member (ev, "pages");

  g_print ("%s  reset    vm %s (%s): %" G_GINT64_FORMAT " poisoned page(s) replaced, %"
           G_GINT64_FORMAT " usable already, %" G_GINT64_FORMAT " failed; vCPUs held %"
           G_GINT64_FORMAT " us%s\n",
           vmcectl_str (ev, "time"), vmcectl_str (ev, "vm"), vmcectl_str (ev, "reason"),
           json_object_get_int_member_with_default (ev, "replaced", 0),
           json_object_get_int_member_with_default (ev, "usable", 0),
           json_object_get_int_member_with_default (ev, "failed", 0),
           json_object_get_int_member_with_default (ev, "held_us", 0),
           json_object_get_boolean_member_with_default (ev, "vm_paused", FALSE) ? "; VM paused"
                                                                               : "");
  for (guint i = 0; pages != NULL && i < json_array_get_length (pages); i++) {
    JsonObject *p = json_array_get_object_element (pages, i);
    g_print ("  GPA %s  %s  %s: %s\n", vmcectl_str (p, "gpa"), vmcectl_str (p, "result"),
             vmcectl_str (p, "backing"),
             vmce_json_object_get_string_opt (p, "how") ?: vmcectl_str (p, "detail"));
  }
}

/* A page-replaced or migration record: one line about one page */
static void
vmcectl_print_page_record (JsonObject *ev, const gchar *type)
{
  JsonNode *page = json_object_get_member (ev, "page");
  const gchar *detail = vmce_json_object_get_string_opt (ev, "detail");

  if (detail == NULL && page != NULL && JSON_NODE_HOLDS_OBJECT (page))
    detail = vmce_json_object_get_string_opt (json_node_get_object (page), "detail");
  g_print ("%s  %-8s vm %s%s%s: %s\n", vmcectl_str (ev, "time"),
           g_strcmp0 (type, "migration") == 0 ? vmcectl_str (ev, "action") : "replaced",
           vmcectl_str (ev, "vm"), json_object_has_member (ev, "gpa") ? " GPA " : "",
           json_object_has_member (ev, "gpa") ? vmcectl_str (ev, "gpa") : "",
           detail != NULL ? detail : "-");
}

static void
vmcectl_print_huge_page_loss (JsonObject *ev)
{
  g_print ("%s  lost     vm %s: a %" G_GINT64_FORMAT " KiB host page at HVA %s (%s), %" G_GINT64_FORMAT
           " guest page(s); hugepage %s: %" G_GINT64_FORMAT " more to tell%s%s\n",
           vmcectl_str (ev, "time"), vmcectl_str (ev, "vm"),
           json_object_get_int_member_with_default (ev, "size", 0) / 1024, vmcectl_str (ev, "hva"),
           vmcectl_str (ev, "source"), json_object_get_int_member_with_default (ev, "pages", 0),
           vmcectl_str (ev, "policy"), json_object_get_int_member_with_default (ev, "told", 0),
           vmce_json_object_get_string_opt (ev, "detail") ? ": " : "",
           vmce_json_object_get_string_opt (ev, "detail") ?: "");
}

static void
vmcectl_print_huge_page_salvage (JsonObject *ev)
{
  JsonNode *lost = json_object_get_member (ev, "lost");
  guint n_lost = lost != NULL && JSON_NODE_HOLDS_ARRAY (lost) ? json_array_get_length (json_node_get_array (lost)) : 0;

  if (json_object_has_member (ev, "fallback")) {
    g_print ("%s  salvage  vm %s: the host page at HVA %s not salvaged: %s; handled as %s, %" G_GINT64_FORMAT
             " more to tell\n",
             vmcectl_str (ev, "time"), vmcectl_str (ev, "vm"), vmcectl_str (ev, "hva"), vmcectl_str (ev, "detail"),
             vmcectl_str (ev, "fallback"), json_object_get_int_member_with_default (ev, "told", 0));
    return;
  }
  g_print ("%s  salvage  vm %s: the %" G_GINT64_FORMAT " KiB host page at HVA %s salvaged in %.1f ms: %"
           G_GINT64_FORMAT " KiB kept, %u page(s) lost (%s), %" G_GINT64_FORMAT " more told\n",
           vmcectl_str (ev, "time"), vmcectl_str (ev, "vm"), json_object_get_int_member_with_default (ev, "size", 0) / 1024,
           vmcectl_str (ev, "hva"), json_object_get_int_member_with_default (ev, "us", 0) / 1000.0,
           json_object_get_int_member_with_default (ev, "bytes", 0) / 1024, n_lost, vmcectl_str (ev, "mark"),
           json_object_get_int_member_with_default (ev, "told", 0));
}

/* Any other record (attach, detach, vm-exit, ...): its type, its vm and why */
static void
vmcectl_print_other_record (JsonObject *ev, const gchar *type)
{
  JsonNode *vm = json_object_get_member (ev, "vm");
  const gchar *name = vm != NULL && JSON_NODE_HOLDS_OBJECT (vm)
                          ? vmcectl_str (json_node_get_object (vm), "name")
                          : vmcectl_str (ev, "vm");

  g_print ("%s  %-8s vm %s%s%s\n", vmcectl_str (ev, "time"), type, name,
           json_object_has_member (ev, "reason") && vmce_json_object_get_string_opt (ev, "reason")
               ? ": "
               : "",
           vmce_json_object_get_string_opt (ev, "reason") ?: "");
}

/* A memory error's outcome: who handled it, how fast, what it took */
static void
vmcectl_print_result (JsonObject *ev)
{
  JsonNode *latency = json_object_get_member (ev, "latency_us");

  g_print ("  result      %s by %s", vmcectl_str (ev, "result"), vmcectl_str (ev, "handled_by"));
  if (latency != NULL && JSON_NODE_HOLDS_VALUE (latency))
    g_print (", acknowledged %" G_GINT64_FORMAT " us after the signal-stop",
             json_node_get_int (latency));
  if (json_object_get_int_member_with_default (ev, "repeats", 0) > 0)
    g_print (", %" G_GINT64_FORMAT " repeat(s) coalesced",
             json_object_get_int_member_with_default (ev, "repeats", 0));
  if (json_object_get_int_member_with_default (ev, "busy", 0) > 0 ||
      json_object_get_int_member_with_default (ev, "dropped", 0) > 0)
    g_print (", sent again %" G_GINT64_FORMAT " time(s) (QEMU busy %" G_GINT64_FORMAT
             ", dropped as too early %" G_GINT64_FORMAT ")",
             json_object_get_int_member_with_default (ev, "busy", 0) +
                 json_object_get_int_member_with_default (ev, "dropped", 0),
             json_object_get_int_member_with_default (ev, "busy", 0),
             json_object_get_int_member_with_default (ev, "dropped", 0));
  g_print ("\n");
}

/* The host page: what the host's own records (rasdaemon, the kernel's log)
 * name it by */
static void
vmcectl_print_host_pfn (JsonObject *ev)
{
  JsonNode *pfn = json_object_get_member (ev, "host_pfn");

  if (pfn == NULL)
    return;
  if (JSON_NODE_HOLDS_VALUE (pfn))
    g_print ("  host page   pfn 0x%" G_GINT64_MODIFIER "x (from its %s)\n", (guint64) json_node_get_int (pfn),
             g_strcmp0 (vmcectl_str (ev, "host_pfn_from"), "present") == 0 ? "mapping" : "hwpoison entry");
  else
    g_print ("  host page   unknown: %s\n", vmcectl_str (ev, "host_pfn_why"));
}

static void
vmcectl_print_memory_error (JsonObject *ev)
{
  JsonNode *mce = json_object_get_member (ev, "mce");

  g_print ("%s  vm %s: %s %s at HVA %s (thread %s%s)\n", vmcectl_str (ev, "time"),
           vmcectl_str (ev, "vm"), vmcectl_str (ev, "source"), vmcectl_str (ev, "si_code"),
           vmcectl_str (ev, "hva"), vmcectl_str (ev, "thread"),
           json_object_get_int_member_with_default (ev, "tid", 0) ? "" : ", no signal");
  g_print ("  guest page  GPA %s (RAM block %s, offset %s)\n", vmcectl_str (ev, "gpa"),
           vmcectl_str (ev, "block"), vmcectl_str (ev, "block_offset"));
  if (mce != NULL && JSON_NODE_HOLDS_OBJECT (mce)) {
    JsonObject *m = json_node_get_object (mce);
    g_print ("  machine check  %s on vCPU %" G_GINT64_FORMAT ": bank %" G_GINT64_FORMAT
             " status %s mcg_status %s addr %s misc %s%s\n",
             vmcectl_str (m, "kind"), json_object_get_int_member_with_default (ev, "vcpu", 0),
             json_object_get_int_member_with_default (m, "bank", 0), vmcectl_str (m, "status"),
             vmcectl_str (m, "mcg_status"), vmcectl_str (m, "addr"), vmcectl_str (m, "misc"),
             json_object_get_boolean_member_with_default (m, "broadcast", FALSE)
                 ? " (broadcast)"
                 : "");
  }
  /* an Arm64 guest: no machine check, a GHES record */
  if (vmce_json_object_get_string_opt (ev, "path") != NULL)
    g_print ("  ghes        path %s%s\n", vmcectl_str (ev, "path"),
             vmce_json_object_get_string_opt (ev, "cper") != NULL ? ", CPER memory error record sent" : "");
  vmcectl_print_result (ev);
  vmcectl_print_host_pfn (ev);
  if (vmce_json_object_get_string_opt (ev, "detail") != NULL)
    g_print ("  note        %s\n", vmcectl_str (ev, "detail"));
}

/* rasdaemon's row for a host page, or why there is none, in one phrase */
static gchar *
vmcectl_rasdaemon_phrase (JsonObject *host_page)
{
  JsonNode *row = host_page != NULL ? json_object_get_member (host_page, "rasdaemon") : NULL;

  if (host_page == NULL)
    return g_strdup ("not looked up (yet)");
  if (row == NULL || !JSON_NODE_HOLDS_OBJECT (row))
    return g_strdup_printf ("none: %s", vmcectl_str (host_page, "detail"));
  JsonObject *r = json_node_get_object (row);
  return g_strdup_printf ("%s: %s, at %s (its row %" G_GINT64_FORMAT ")", vmcectl_str (r, "page_type"),
                          vmcectl_str (r, "action_result"), vmcectl_str (r, "timestamp"),
                          json_object_get_int_member_with_default (r, "id", 0));
}

/* What the host's rasdaemon said of an error's host page (a host-page record) */
static void
vmcectl_print_host_page (JsonObject *ev)
{
  g_autofree gchar *ras = vmcectl_rasdaemon_phrase (ev);

  g_print ("%s  host-page vm %s: pfn 0x%" G_GINT64_MODIFIER "x of error %" G_GINT64_FORMAT ": rasdaemon %s\n",
           vmcectl_str (ev, "time"), vmcectl_str (ev, "vm"),
           (guint64) json_object_get_int_member_with_default (ev, "host_pfn", 0),
           json_object_get_int_member_with_default (ev, "about_seq", 0), ras);
}

/* What the guest's kernel said of an error told through GHES (a
 * guest-answer record): the verdict, then the line that gave it */
static void
vmcectl_print_guest_answer (JsonObject *ev)
{
  JsonArray *lines = json_object_has_member (ev, "lines") ? json_object_get_array_member (ev, "lines") : NULL;
  guint n = lines != NULL ? json_array_get_length (lines) : 0;
  const gchar *detail = vmce_json_object_get_string_opt (ev, "detail");

  g_print ("%s  guest-answer vm %s: error %" G_GINT64_FORMAT " at GPA %s (%s): the guest %s%s%s\n",
           vmcectl_str (ev, "time"), vmcectl_str (ev, "vm"),
           json_object_get_int_member_with_default (ev, "about_seq", 0), vmcectl_str (ev, "gpa"),
           vmcectl_str (ev, "path"), vmcectl_str (ev, "answer"), n > 0 || detail != NULL ? ": " : "",
           n > 0 ? json_array_get_string_element (lines, n - 1) : detail != NULL ? detail : "");
}

/* One journal record, as a person reads it */
static void
vmcectl_print_event (JsonObject *ev)
{
  const gchar *type = vmcectl_str (ev, "type");

  if (g_strcmp0 (type, "reset") == 0)
    vmcectl_print_reset (ev);
  else if (g_strcmp0 (type, "page-replaced") == 0 || g_strcmp0 (type, "migration") == 0)
    vmcectl_print_page_record (ev, type);
  else if (g_strcmp0 (type, "huge-page-loss") == 0)
    vmcectl_print_huge_page_loss (ev);
  else if (g_strcmp0 (type, "huge-page-salvage") == 0)
    vmcectl_print_huge_page_salvage (ev);
  else if (g_strcmp0 (type, "host-page") == 0)
    vmcectl_print_host_page (ev);
  else if (g_strcmp0 (type, "guest-answer") == 0)
    vmcectl_print_guest_answer (ev);
  else if (g_strcmp0 (type, "memory-error") != 0)
    vmcectl_print_other_record (ev, type);
  else
    vmcectl_print_memory_error (ev);
}

/* The vCPUs vmced holds itself (forward.c: a TCG vCPU stuck in a load of a
 * page vmced cannot give back), or NULL */
static JsonObject *
vmcectl_paused_by_vmced (JsonObject *vm)
{
  JsonNode *node = json_object_get_member (vm, "paused_by_vmced");

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* One VM in one line, from its counts (query-status gives no lists) */
static void
vmcectl_print_vm_line (JsonObject *vm)
{
  JsonObject *n = json_object_has_member (vm, "counts") ? json_object_get_object_member (vm, "counts") : NULL;
  JsonObject *hp = json_object_has_member (vm, "hugepage") ? json_object_get_object_member (vm, "hugepage")
                                                          : NULL;
  gint64 untold = n != NULL ? json_object_get_int_member_with_default (n, "untold", 0) : 0;
  gint64 losses = hp != NULL ? json_object_get_int_member_with_default (hp, "losses", 0) : 0;

  g_print ("%-16s pid %-8" G_GINT64_FORMAT " %-9s %s  policy %s  %" G_GINT64_FORMAT
           " vCPU(s)  %" G_GINT64_FORMAT " events  %" G_GINT64_FORMAT " poisoned page(s)",
           vmcectl_str (vm, "name"), json_object_get_int_member_with_default (vm, "pid", 0),
           vmcectl_str (vm, "state"), vmcectl_str (vm, "accel"), vmcectl_str (vm, "policy"),
           n != NULL ? json_object_get_int_member_with_default (n, "vcpus", 0) : 0,
           json_object_get_int_member_with_default (vm, "events", 0),
           n != NULL ? json_object_get_int_member_with_default (n, "poisoned", 0) : 0);
  if (untold > 0)
    g_print (" (%" G_GINT64_FORMAT " not told yet)", untold);
  if (losses > 0)
    g_print (", %" G_GINT64_FORMAT " huge page(s) lost", losses);
  if (vmcectl_paused_by_vmced (vm) != NULL)
    g_print (", paused by vmced");
  g_print ("\n");
}

/* --- commands -------------------------------------------------------------- */

typedef int (*VmcectlCommandFunc) (VmceCtlConn *c, int argc, char **argv);

static gboolean
vmcectl_parse (const gchar *usage, GOptionEntry *entries, int *argc, char ***argv)
{
  g_autoptr(GOptionContext) ctx = g_option_context_new (usage);
  g_autoptr(GError) error = NULL;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, argc, argv, &error)) {
    g_printerr ("vmcectl: error: %s\n", error->message);
    return FALSE;
  }
  return TRUE;
}

static int
vmcectl_fail (GError *error)
{
  g_printerr ("vmcectl: error: %s\n", error->message);
  g_error_free (error);
  return EXIT_FAILURE;
}

static GOptionEntry vmcectl_no_options[] = { { NULL } };

static int
vmcectl_cmd_status (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonNode) ret = NULL;
  JsonObject *st, *journal;
  JsonArray *vms;

  if (!vmcectl_parse ("- vmced, its journal and the VMs it watches", vmcectl_no_options, &argc,
                      &argv))
    return EXIT_FAILURE;
  ret = vmcectl_call (c, "query-status", NULL, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  if (opt_json) {
    vmcectl_print_json (ret);
    return EXIT_SUCCESS;
  }
  st = json_node_get_object (ret);
  journal = json_object_get_object_member (st, "journal");
  vms = json_object_get_array_member (st, "vms");
  g_print ("vmced %s, pid %" G_GINT64_FORMAT ", up %" G_GINT64_FORMAT " s, RSS %" G_GINT64_FORMAT
           " kB\n",
           vmcectl_str (st, "version"), json_object_get_int_member (st, "pid"),
           json_object_get_int_member (st, "uptime_s"), json_object_get_int_member (st, "rss_kb"));
  g_print ("%s%s, migration with poisoned memory: %s\n",
           vmce_json_object_get_string_opt (st, "libvirt") != NULL ? "libvirt " : "direct mode (no libvirt)",
           vmce_json_object_get_string_opt (st, "libvirt") ?: "", vmcectl_str (st, "migration"));
  g_print ("journal %s: %" G_GINT64_FORMAT " record(s), %" G_GINT64_FORMAT " on disk%s%s\n",
           vmcectl_str (journal, "path"), json_object_get_int_member (journal, "records"),
           json_object_get_int_member (journal, "synced"),
           vmce_json_object_get_string_opt (journal, "error") ? "; journal degraded: " : "",
           vmce_json_object_get_string_opt (journal, "error") ?: "");
  g_print ("%u vm(s)\n", json_array_get_length (vms));
  for (guint i = 0; i < json_array_get_length (vms); i++)
    vmcectl_print_vm_line (json_array_get_object_element (vms, i));
  return EXIT_SUCCESS;
}

/* which QEMU, and how vmced talks to it */
static void
vmcectl_print_vm_qemu (JsonObject *vm)
{
  JsonObject *qemu = json_object_has_member (vm, "qemu") ? json_object_get_object_member (vm, "qemu")
                                                        : NULL;
  JsonArray *skipped = json_object_has_member (vm, "layout_skipped")
                           ? json_object_get_array_member (vm, "layout_skipped")
                           : NULL;

  if (qemu != NULL)
    g_print ("  QEMU %s%s%s%s: machine checks through %s\n", vmcectl_str (qemu, "version"),
             vmce_json_object_get_string_opt (qemu, "package") != NULL ? " (" : "",
             vmce_json_object_get_string_opt (qemu, "package") ?: "",
             vmce_json_object_get_string_opt (qemu, "package") != NULL ? ")" : "",
             vmcectl_str (vm, "inject"));
  for (guint i = 0; skipped != NULL && i < json_array_get_length (skipped); i++)
    g_print ("  RAM layout: skipped %s\n", json_array_get_string_element (skipped, i));
}

static void
vmcectl_print_vm_cpus (JsonObject *vm)
{
  JsonArray *arr;

  arr = json_object_get_array_member (vm, "vcpus");
  for (guint i = 0; i < json_array_get_length (arr); i++) {
    JsonObject *v = json_array_get_object_element (arr, i);
    g_print ("  vCPU %" G_GINT64_FORMAT ": thread %" G_GINT64_FORMAT "\n",
             json_object_get_int_member (v, "index"), json_object_get_int_member (v, "thread_id"));
  }
  if (json_object_has_member (vm, "cpu")) {
    JsonObject *cpu = json_object_get_object_member (vm, "cpu");
    g_print ("  guest CPU: %s family %" G_GINT64_FORMAT " model %" G_GINT64_FORMAT
             ", MCG_SER_P %s, SUCCOR %s: recovers from %s errors (host CPU %s)\n",
             vmcectl_str (cpu, "vendor"), json_object_get_int_member (cpu, "family"),
             json_object_get_int_member (cpu, "model"),
             json_object_get_boolean_member_with_default (cpu, "ser_p", FALSE) ? "yes" : "no",
             json_object_get_boolean_member_with_default (cpu, "succor", FALSE) ? "yes" : "no",
             g_strcmp0 (vmcectl_str (cpu, "recovery"), "none") == 0 ? "no"
                                                                 : vmcectl_str (cpu, "recovery"),
             vmcectl_str (vm, "host_vendor"));
  }
}

static void
vmcectl_print_vm_layout (JsonObject *vm)
{
  JsonArray *arr;

  g_print ("  RAM layout (guest physical -> block, host virtual), from %s:\n",
           vmcectl_str (vm, "layout_via"));
  arr = json_object_get_array_member (vm, "layout");
  for (guint i = 0; arr != NULL && i < json_array_get_length (arr); i++) {
    JsonObject *r = json_array_get_object_element (arr, i);
    guint64 gpa = 0, size = 0;
    (void) vmce_parse_u64 (vmcectl_str (r, "gpa"), &gpa, NULL);
    (void) vmce_parse_u64 (vmcectl_str (r, "size"), &size, NULL);
    g_print ("    0x%012" G_GINT64_MODIFIER "x-0x%012" G_GINT64_MODIFIER "x  %-12s +%-12s %s%s\n",
             gpa, gpa + size - 1, vmcectl_str (r, "block"), vmcectl_str (r, "offset"),
             vmcectl_str (r, "hva"),
             json_object_get_boolean_member_with_default (r, "rom", FALSE) ? "  (rom)" : "");
  }
}

static void
vmcectl_print_vm_poisoned (JsonObject *vm)
{
  JsonArray *arr;

  if (json_object_has_member (vm, "migration")) {
    JsonObject *mig = json_object_get_object_member (vm, "migration");
    g_print ("  migration: %s with poisoned memory; last status %s%s\n",
             g_strcmp0 (vmcectl_str (mig, "policy"), "refuse") == 0 ? "refused"
                                                                    : "allowed, pages zeroed",
             vmcectl_str (mig, "status"),
             json_object_get_boolean_member_with_default (mig, "incoming", FALSE)
                 ? " (a destination, loading)"
                 : "");
  }
  if (vmcectl_paused_by_vmced (vm) != NULL) {
    JsonObject *paused = vmcectl_paused_by_vmced (vm);
    g_print ("  paused by vmced since %s: %s\n", vmcectl_str (paused, "since"), vmcectl_str (paused, "why"));
  }
  if (json_object_has_member (vm, "hugepage")) {
    JsonObject *hp = json_object_get_object_member (vm, "hugepage");
    const gchar *policy = vmcectl_str (hp, "policy");
    JsonArray *salvaged = json_object_has_member (vm, "salvaged") ? json_object_get_array_member (vm, "salvaged")
                                                                  : NULL;

    g_print ("  a lost huge page: %s; %" G_GINT64_FORMAT " lost so far\n",
             g_strcmp0 (policy, "all") == 0       ? "tell the guest every page of it"
             : g_strcmp0 (policy, "salvage") == 0 ? "salvage it (keep its healthy 4 KiB pieces, tell the raw page)"
                                                  : "tell the guest the page hit",
             json_object_get_int_member_with_default (hp, "losses", 0));
    for (guint i = 0; salvaged != NULL && i < json_array_get_length (salvaged); i++) {
      JsonObject *r = json_array_get_object_element (salvaged, i);
      g_print ("  salvaged: %" G_GINT64_FORMAT " KiB at HVA %s, %" G_GINT64_FORMAT " page(s) lost; %s, was %s "
               "(it costs TLB reach)\n",
               json_object_get_int_member_with_default (r, "size", 0) / 1024, vmcectl_str (r, "hva"),
               json_object_get_int_member_with_default (r, "lost_pages", 0), vmcectl_str (r, "now"),
               vmcectl_str (r, "was"));
    }
  }
  arr = json_object_get_array_member (vm, "poisoned");
  g_print ("  poisoned guest pages: %u (%s)\n", json_array_get_length (arr),
           vmcectl_str (vm, "poisoned_from"));
  for (guint i = 0; i < json_array_get_length (arr); i++) {
    JsonObject *p = json_array_get_object_element (arr, i);
    g_print ("    GPA %s  HVA %s  %s  %s  %s  %s%s\n", vmcectl_str (p, "gpa"),
             vmcectl_str (p, "hva"), vmcectl_str (p, "kind"), vmcectl_str (p, "source"),
             vmcectl_str (p, "result"), vmcectl_str (p, "time"),
             json_object_get_boolean_member_with_default (p, "restored", FALSE)
                 ? "  (from the journal)"
                 : "");
  }
}

/* What being QEMU's tracer cost it: each stop (a signal, a clone, vmced's
 * own interrupt) was a wait for vmced */
static void
vmcectl_print_vm_stops (JsonObject *vm)
{
  JsonArray *arr = json_object_get_array_member (vm, "stops");
  gdouble secs = (gdouble) json_object_get_int_member_with_default (vm, "attached_ms", 0) / 1000;

  if (arr == NULL || json_array_get_length (arr) == 0) {
    g_print ("  ptrace stops: none since attach\n");
    return;
  }
  g_print ("  ptrace stops since attach (%.0f s; each a wait for vmced):\n", secs);
  for (guint i = 0; i < json_array_get_length (arr); i++) {
    JsonObject *st = json_array_get_object_element (arr, i);
    gint64 n = json_object_get_int_member (st, "count");
    gint64 us = json_object_get_int_member_with_default (st, "stopped_us", 0);
    g_print ("    %-6s %-10s %10" G_GINT64_FORMAT "  %.1f/s, stopped %.3f ms in all\n",
             vmcectl_str (st, "thread"), vmcectl_str (st, "stop"), n, secs > 0 ? (gdouble) n / secs : 0.0,
             (gdouble) us / 1000);
  }
}

static int
vmcectl_cmd_vm (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;
  JsonObject *vm;

  if (!vmcectl_parse ("VM - vCPUs, RAM layout and poisoned pages of one VM", vmcectl_no_options,
                      &argc, &argv))
    return EXIT_FAILURE;
  if (argc != 2) {
    g_printerr ("vmcectl: error: usage: vmcectl vm VM\n");
    return EXIT_FAILURE;
  }
  json_object_set_string_member (args, "vm", argv[1]);
  ret = vmcectl_call (c, "query-vm", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  if (opt_json) {
    vmcectl_print_json (ret);
    return EXIT_SUCCESS;
  }
  vm = json_node_get_object (ret);
  vmcectl_print_vm_line (vm);
  vmcectl_print_vm_qemu (vm);
  vmcectl_print_vm_cpus (vm);
  vmcectl_print_vm_layout (vm);
  vmcectl_print_vm_poisoned (vm);
  vmcectl_print_vm_stops (vm);
  return EXIT_SUCCESS;
}

/* The host-page record about memory error @seq among @records, or NULL */
static JsonNode *
vmcectl_find_host_page (JsonArray *records, gint64 seq)
{
  for (guint i = 0; i < json_array_get_length (records); i++) {
    JsonObject *r = json_array_get_object_element (records, i);
    if (g_strcmp0 (vmcectl_str (r, "type"), "host-page") == 0 &&
        json_object_get_int_member_with_default (r, "about_seq", 0) == seq)
      return json_array_get_element (records, i);
  }
  return NULL;
}

/* Who was hit by host page @pfn: each memory error on it with what the
 * host's rasdaemon recorded for it; --json: the error's record with the
 * host-page record as its "host_page" (null: none yet) */
static int
vmcectl_events_by_pfn (VmceCtlConn *c, const gchar *vm, const gchar *pfn_arg, gint limit)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;
  JsonArray *records;
  guint64 pfn;
  guint n = 0;

  if (!vmce_parse_u64 (pfn_arg, &pfn, &error)) {
    g_prefix_error (&error, "--pfn: ");
    return vmcectl_fail (error);
  }
  if (vm != NULL)
    json_object_set_string_member (args, "vm", vm);
  json_object_set_int_member (args, "pfn", (gint64) MIN (pfn, (guint64) G_MAXINT64));
  json_object_set_int_member (args, "limit", MAX (limit, 0));
  ret = vmcectl_call (c, "query-events", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  records = json_node_get_array (ret);
  for (guint i = 0; i < json_array_get_length (records); i++) {
    JsonObject *ev = json_array_get_object_element (records, i);
    JsonNode *host_page;
    g_autofree gchar *ras = NULL;

    if (g_strcmp0 (vmcectl_str (ev, "type"), "memory-error") != 0)
      continue;
    n++;
    host_page = vmcectl_find_host_page (records, json_object_get_int_member_with_default (ev, "seq", 0));
    if (opt_json) {
      g_autoptr(JsonNode) joined = json_node_copy (json_array_get_element (records, i));
      g_autofree gchar *line = NULL;

      json_object_set_member (json_node_get_object (joined), "host_page",
                              host_page != NULL ? json_node_copy (host_page) : json_node_new (JSON_NODE_NULL));
      line = vmce_json_to_line (joined);
      g_print ("%s\n", line);
      continue;
    }
    ras = vmcectl_rasdaemon_phrase (host_page != NULL ? json_node_get_object (host_page) : NULL);
    g_print ("%s  vm %s: GPA %s, HVA %s, %s %s, %s (error %" G_GINT64_FORMAT ")\n  rasdaemon: %s\n",
             vmcectl_str (ev, "time"), vmcectl_str (ev, "vm"), vmcectl_str (ev, "gpa"), vmcectl_str (ev, "hva"),
             vmcectl_str (ev, "source"), vmcectl_str (ev, "si_code"), vmcectl_str (ev, "result"),
             json_object_get_int_member_with_default (ev, "seq", 0), ras);
  }
  if (n == 0 && !opt_json)
    g_print ("no error on host page 0x%" G_GINT64_MODIFIER "x among vmced's recent records\n", pfn);
  return EXIT_SUCCESS;
}

static int
vmcectl_cmd_events (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *vm = NULL;
  g_autofree gchar *pfn = NULL;
  gboolean follow = FALSE;
  gint limit = -1;
  GOptionEntry entries[] = {
    { "vm", 0, 0, G_OPTION_ARG_STRING, &vm, "Only this VM", "VM" },
    { "limit", 'n', 0, G_OPTION_ARG_INT, &limit, "How many past records (default 20, with --pfn all; 0: all)",
      "N" },
    { "follow", 'f', 0, G_OPTION_ARG_NONE, &follow, "Then wait for new ones", NULL },
    { "pfn", 0, 0, G_OPTION_ARG_STRING, &pfn,
      "Who was hit by this host page (decimal or 0x hex): each error on it, with rasdaemon's record", "PFN" },
    { NULL },
  };

  if (!vmcectl_parse ("- recent journal records", entries, &argc, &argv))
    return EXIT_FAILURE;
  if (pfn != NULL && follow) {
    g_printerr ("vmcectl: error: --pfn answers from the records vmced keeps; not with --follow\n");
    return EXIT_FAILURE;
  }
  if (pfn != NULL)
    return vmcectl_events_by_pfn (c, vm, pfn, limit < 0 ? 0 : limit);
  if (limit < 0)
    limit = 20;
  if (vm != NULL)
    json_object_set_string_member (args, "vm", vm);
  json_object_set_int_member (args, "limit", MAX (limit, 0));
  if (follow) {
    /* subscribe first so that nothing falls between the two */
    g_autoptr(JsonNode) sub = vmcectl_call (c, "subscribe", NULL, &error);
    if (sub == NULL)
      return vmcectl_fail (error);
  }
  ret = vmcectl_call (c, "query-events", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  for (guint i = 0; i < json_array_get_length (json_node_get_array (ret)); i++) {
    JsonNode *ev = json_array_get_element (json_node_get_array (ret), i);
    if (opt_json) {
      g_autofree gchar *line = vmce_json_to_line (ev);
      g_print ("%s\n", line);
    } else {
      vmcectl_print_event (json_node_get_object (ev));
    }
  }
  while (follow) {
    g_autoptr(JsonNode) data = vmce_ctl_conn_read_event (c, &error);

    if (data == NULL)
      return vmcectl_fail (error);
    if (vm != NULL) {
      const gchar *name = vmce_json_object_get_string_opt (json_node_get_object (data), "vm");
      if (name != NULL && g_strcmp0 (name, vm) != 0)
        continue;
    }
    if (opt_json) {
      g_autofree gchar *line = vmce_json_to_line (data);
      g_print ("%s\n", line);
    } else {
      vmcectl_print_event (json_node_get_object (data));
    }
  }
  return EXIT_SUCCESS;
}

/* A path for vmced to open (attach's --qmp and --agent): vmced opens it,
 * from its own working directory, on its own host. A relative one is this
 * shell's, made whole here; over ssh it would mean nothing there */
static gchar *
vmcectl_path_for_vmced (VmceCtlConn *c, const gchar *option, const gchar *path, GError **error)
{
  if (g_path_is_absolute (path))
    return g_strdup (path);
  if (vmce_ctl_conn_is_remote (c)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "%s %s: vmced on %s opens it: give the whole path there", option, path,
                 vmce_ctl_conn_get_label (c));
    return NULL;
  }
  return g_canonicalize_filename (path, NULL);
}

static int
vmcectl_cmd_attach (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *qmp = NULL, *name = NULL, *agent = NULL, *policy = NULL, *path = NULL;
  gint pid = 0;
  GOptionEntry entries[] = {
    { "pid", 'p', 0, G_OPTION_ARG_INT, &pid,
      "QEMU's process id (default: the one serving --qmp, its greeting awaited as [attach] does)", "PID" },
    { "policy", 0, 0, G_OPTION_ARG_STRING, &policy,
      "forward (default), ignore-ao, pass, stop or force", "POLICY" },
    { "qmp", 'q', 0, G_OPTION_ARG_FILENAME, &qmp, "Its QMP socket (on vmced's host)", "PATH" },
    { "name", 'n', 0, G_OPTION_ARG_STRING, &name, "Name (default: QEMU's -name)", "NAME" },
    { "agent", 'a', 0, G_OPTION_ARG_FILENAME, &agent, "Its vmce guest agent socket (on vmced's host)",
      "PATH" },
    { NULL },
  };

  if (!vmcectl_parse ("- watch a running QEMU", entries, &argc, &argv))
    return EXIT_FAILURE;
  if (pid < 0 || qmp == NULL) {
    g_printerr ("vmcectl: error: attach needs --qmp (and --pid, or vmced takes the socket's own)\n");
    return EXIT_FAILURE;
  }
  if (pid > 0)
    json_object_set_int_member (args, "pid", pid);
  path = vmcectl_path_for_vmced (c, "--qmp", qmp, &error);
  if (path == NULL)
    return vmcectl_fail (error);
  json_object_set_string_member (args, "qmp", path);
  if (name != NULL)
    json_object_set_string_member (args, "name", name);
  if (agent != NULL) {
    g_free (path);
    path = vmcectl_path_for_vmced (c, "--agent", agent, &error);
    if (path == NULL)
      return vmcectl_fail (error);
    json_object_set_string_member (args, "agent", path);
  }
  if (policy != NULL)
    json_object_set_string_member (args, "policy", policy);
  ret = vmcectl_call (c, "attach", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  if (opt_json)
    vmcectl_print_json (ret);
  else
    vmcectl_print_vm_line (json_node_get_object (ret));
  return EXIT_SUCCESS;
}

static int
vmcectl_cmd_detach (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;

  if (!vmcectl_parse ("VM - stop watching a VM", vmcectl_no_options, &argc, &argv))
    return EXIT_FAILURE;
  if (argc != 2) {
    g_printerr ("vmcectl: error: usage: vmcectl detach VM\n");
    return EXIT_FAILURE;
  }
  json_object_set_string_member (args, "vm", argv[1]);
  ret = vmcectl_call (c, "detach", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  return EXIT_SUCCESS;
}

static int
vmcectl_cmd_policy (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;

  g_autofree gchar *migration = NULL;
  g_autofree gchar *hugepage = NULL;
  GOptionEntry entries[] = {
    { "migration", 0, 0, G_OPTION_ARG_STRING, &migration,
      "A migration of the VM while it has poisoned memory: carry or refuse", "POLICY" },
    { "hugepage", 0, 0, G_OPTION_ARG_STRING, &hugepage,
      "A huge page of its RAM lost on the host: salvage its healthy pieces (salvage), tell the "
      "guest the page hit (one) or every page of it (all)", "POLICY" },
    { NULL },
  };

  if (!vmcectl_parse ("VM [POLICY] - what vmced does with the VM's memory errors: forward, "
                      "ignore-ao, pass, stop or force",
                      entries, &argc, &argv))
    return EXIT_FAILURE;
  if (argc != 3 && !(argc == 2 && (migration != NULL || hugepage != NULL))) {
    g_printerr ("vmcectl: error: usage: vmcectl policy VM [forward|ignore-ao|pass|stop|force] "
                "[--migration carry|refuse] [--hugepage salvage|one|all]\n");
    return EXIT_FAILURE;
  }
  json_object_set_string_member (args, "vm", argv[1]);
  if (argc == 3)
    json_object_set_string_member (args, "policy", argv[2]);
  if (migration != NULL)
    json_object_set_string_member (args, "migration", migration);
  if (hugepage != NULL)
    json_object_set_string_member (args, "hugepage", hugepage);
  ret = vmcectl_call (c, "set-policy", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  return EXIT_SUCCESS;
}

/* One request to the VM's vmce guest agent, the answer's "return" member.
 * vmced asks it: the agent's socket is on the VM's host, which need not be
 * this one (--connect) */
static JsonNode *
vmcectl_guest_call (VmceCtlConn *c, const gchar *vm, const gchar *request, GError **error)
{
  g_autoptr(JsonObject) args = json_object_new ();

  json_object_set_string_member (args, "vm", vm);
  json_object_set_string_member (args, "request", request);
  return vmcectl_call (c, "guest", args, error);
}

/* The guest agent's answer to "translate": the guest process's page */
static gboolean
vmcectl_guest_va_to_gpa (VmceCtlConn *c,
                         const gchar *vm,
                         gint guest_pid,
                         const gchar *guest_va,
                         guint64 *gpa,
                         GError **error)
{
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *request = NULL;
  guint64 va = 0;

  if (!vmce_parse_u64 (guest_va, &va, error)) {
    g_prefix_error (error, "--guest-va: ");
    return FALSE;
  }
  request = g_strdup_printf ("translate pid=%d va=0x%" G_GINT64_MODIFIER "x", guest_pid, va);
  ret = vmcectl_guest_call (c, vm, request, error);
  if (ret == NULL)
    return FALSE;
  if (!JSON_NODE_HOLDS_OBJECT (ret) ||
      !json_object_get_boolean_member_with_default (json_node_get_object (ret), "present", FALSE)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "guest process %d has no page at 0x%" G_GINT64_MODIFIER "x", guest_pid, va);
    return FALSE;
  }
  return vmce_json_object_get_u64 (json_node_get_object (ret), "gpa", gpa, error);
}

/* vmcectl guest VM COMMAND [KEY=VALUE...]: for scripts, the answer as
 * KEY=VALUE lines (nested values as JSON), or as JSON with --json */
static int
vmcectl_cmd_guest (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *request = NULL;

  if (argc < 3 || c == NULL) {
    g_print ("Usage: vmcectl guest VM COMMAND [KEY=VALUE...]\n"
             "Sends one request to the VM's vmce guest agent, through vmced on the VM's host\n"
             "(images/README.md lists them: victim-start mode=idle, victim-status pid=P,\n"
             "sysctl name=N value=V, ...).\n");
    return c == NULL ? EXIT_SUCCESS : EXIT_FAILURE;
  }
  for (int i = 2; i < argc; i++) {
    if (strchr (argv[i], '\n') != NULL || (i > 2 && strchr (argv[i], '=') == NULL)) {
      g_printerr ("vmcectl: error: guest: '%s' is not KEY=VALUE\n", argv[i]);
      return EXIT_FAILURE;
    }
  }
  request = g_strjoinv (" ", argv + 2);
  ret = vmcectl_guest_call (c, argv[1], request, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  if (opt_json || !JSON_NODE_HOLDS_OBJECT (ret)) {
    g_autofree gchar *text = json_to_string (ret, opt_json);
    g_print ("%s\n", text);
    return EXIT_SUCCESS;
  }
  {
    JsonObject *obj = json_node_get_object (ret);
    g_autoptr(GList) members = json_object_get_members (obj);
    for (GList *l = members; l != NULL; l = l->next) {
      JsonNode *v = json_object_get_member (obj, l->data);
      g_autofree gchar *text = JSON_NODE_HOLDS_VALUE (v) &&
                                   json_node_get_value_type (v) == G_TYPE_STRING
                                 ? g_strdup (json_node_get_string (v))
                                 : json_to_string (v, FALSE);
      g_print ("%s=%s\n", (const gchar *) l->data, text);
    }
  }
  return EXIT_SUCCESS;
}

/* vmcectl poison's and inject's options */
typedef struct {
  gchar *gpa, *hva, *kind, *trigger, *guest_va, *huge;
  gint guest_pid, cpu, timeout;
} VmcectlInjectOptions;

static void
vmcectl_inject_options_clear (VmcectlInjectOptions *o)
{
  g_free (o->gpa);
  g_free (o->hva);
  g_free (o->kind);
  g_free (o->trigger);
  g_free (o->guest_va);
  g_free (o->huge);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VmcectlInjectOptions, vmcectl_inject_options_clear)

/* Where the error goes, into @args: a GPA, an HVA (poison only), or the
 * page of a guest process, which its guest agent translates. FALSE: said
 * why */
static gboolean
vmcectl_inject_where (VmceCtlConn *c, const gchar *vm, const VmcectlInjectOptions *o, gboolean poison,
                      JsonObject *args)
{
  GError *error = NULL;
  guint64 addr = 0;
  g_autofree gchar *hex = NULL;

  if (o->guest_pid <= 0 && o->guest_va == NULL) {
    if (o->gpa != NULL) {
      json_object_set_string_member (args, "gpa", o->gpa);
    } else if (o->hva != NULL && poison) {
      json_object_set_string_member (args, "hva", o->hva);
    } else {
      g_printerr ("vmcectl: error: say where: --gpa ADDR%s\n",
                  poison ? ", --hva ADDR or --guest-pid PID --guest-va ADDR" : "");
      return FALSE;
    }
    return TRUE;
  }
  if (o->guest_pid <= 0 || o->guest_va == NULL) {
    g_printerr ("vmcectl: error: --guest-pid and --guest-va go together\n");
    return FALSE;
  }
  if (!vmcectl_guest_va_to_gpa (c, vm, o->guest_pid, o->guest_va, &addr, &error)) {
    vmcectl_fail (error);
    return FALSE;
  }
  hex = vmce_hex (addr);
  if (!opt_json)
    g_print ("guest process %d, VA %s: GPA %s\n", o->guest_pid, o->guest_va, hex);
  json_object_set_string_member (args, "gpa", hex);
  return TRUE;
}

/* How, into @args: the kind, when the signal comes, the vCPU, a whole huge
 * page, how long to wait. FALSE: said why */
static gboolean
vmcectl_inject_how (const VmcectlInjectOptions *o, gboolean poison, JsonObject *args)
{
  if (o->kind != NULL)
    json_object_set_string_member (args, "kind", o->kind);
  if (o->trigger != NULL)
    json_object_set_string_member (args, "trigger", o->trigger);
  if (o->cpu >= 0)
    json_object_set_int_member (args, "cpu", o->cpu);
  if (o->huge != NULL && (!poison || (g_strcmp0 (o->huge, "2M") != 0 && g_strcmp0 (o->huge, "1G") != 0))) {
    g_printerr ("vmcectl: error: %s\n", poison ? "--huge-page must be 2M or 1G"
                                              : "--huge-page is for poison: inject has no host side");
    return FALSE;
  }
  if (o->huge != NULL)
    json_object_set_int_member (args, "lsb", g_strcmp0 (o->huge, "2M") == 0 ? 21 : 30);
  if (poison)
    json_object_set_int_member (args, "timeout-ms", (gint64) MAX (o->timeout, 1) * 1000);
  return TRUE;
}

static int
vmcectl_cmd_poison_or_inject (VmceCtlConn *c, int argc, char **argv, gboolean poison)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;
  g_auto(VmcectlInjectOptions) o = { .cpu = -1, .timeout = 30 };
  GOptionEntry entries[] = {
    { "gpa", 'g', 0, G_OPTION_ARG_STRING, &o.gpa, "Guest physical address", "ADDR" },
    { "hva", 0, 0, G_OPTION_ARG_STRING, &o.hva, "Host virtual address in QEMU (poison)", "ADDR" },
    { "guest-pid", 0, 0, G_OPTION_ARG_INT, &o.guest_pid,
      "Guest process whose page to poison (with --guest-va; needs the guest agent)", "PID" },
    { "guest-va", 0, 0, G_OPTION_ARG_STRING, &o.guest_va, "Its virtual address", "ADDR" },
    { "kind", 'k', 0, G_OPTION_ARG_STRING, &o.kind,
      "ao (found, not consumed; default) or ar (consumed)", "KIND" },
    { "trigger", 't', 0, G_OPTION_ARG_STRING, &o.trigger,
      "poison: when the signal comes: auto, access (AR when a thread touches the page) or now",
      "WHEN" },
    { "cpu", 'c', 0, G_OPTION_ARG_INT, &o.cpu, "vCPU for AR (default: 0)", "N" },
    { "huge-page", 0, 0, G_OPTION_ARG_STRING, &o.huge,
      "poison: the host loses the whole huge page (2M or 1G) around the address, as the kernel "
      "does with a hugetlbfs page: all of it taken away, SIGBUS with si_addr_lsb 21 or 30",
      "SIZE" },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &o.timeout, "Seconds to wait for the error (default 30)",
      "S" },
    { NULL },
  };

  if (!vmcectl_parse (poison ? "VM - simulate a host memory error on a guest page"
                             : "VM - inject a machine check into the guest (no host side)",
                      entries, &argc, &argv))
    return EXIT_FAILURE;
  if (argc != 2) {
    g_printerr ("vmcectl: error: name the vm: vmcectl %s VM --gpa ADDR\n",
                poison ? "poison" : "inject");
    return EXIT_FAILURE;
  }
  json_object_set_string_member (args, "vm", argv[1]);
  if (!vmcectl_inject_where (c, argv[1], &o, poison, args) || !vmcectl_inject_how (&o, poison, args))
    return EXIT_FAILURE;
  ret = vmcectl_call (c, poison ? "poison" : "inject", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  if (opt_json) {
    vmcectl_print_json (ret);
  } else {
    vmcectl_print_event (json_node_get_object (ret));
  }
  return g_strcmp0 (vmcectl_str (json_node_get_object (ret), "result"), "injected") == 0
             ? EXIT_SUCCESS
             : EXIT_FAILURE;
}

static int
vmcectl_cmd_poison (VmceCtlConn *c, int argc, char **argv)
{
  return vmcectl_cmd_poison_or_inject (c, argc, argv, TRUE);
}

static int
vmcectl_cmd_inject (VmceCtlConn *c, int argc, char **argv)
{
  return vmcectl_cmd_poison_or_inject (c, argc, argv, FALSE);
}

static int
vmcectl_cmd_translate (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *gpa = NULL, *hva = NULL;
  GOptionEntry entries[] = {
    { "gpa", 'g', 0, G_OPTION_ARG_STRING, &gpa, "Guest physical address", "ADDR" },
    { "hva", 0, 0, G_OPTION_ARG_STRING, &hva, "Host virtual address", "ADDR" },
    { NULL },
  };
  JsonObject *r;

  if (!vmcectl_parse ("VM - translate between guest physical and QEMU's addresses", entries,
                      &argc, &argv))
    return EXIT_FAILURE;
  if (argc != 2 || (gpa == NULL) == (hva == NULL)) {
    g_printerr ("vmcectl: error: usage: vmcectl translate VM (--gpa ADDR | --hva ADDR)\n");
    return EXIT_FAILURE;
  }
  json_object_set_string_member (args, "vm", argv[1]);
  json_object_set_string_member (args, gpa != NULL ? "gpa" : "hva", gpa != NULL ? gpa : hva);
  ret = vmcectl_call (c, "translate", args, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  if (opt_json) {
    vmcectl_print_json (ret);
    return EXIT_SUCCESS;
  }
  r = json_node_get_object (ret);
  g_print ("GPA %s  HVA %s  block %s offset %s%s\n", vmcectl_str (r, "gpa"), vmcectl_str (r, "hva"),
           vmcectl_str (r, "block"), vmcectl_str (r, "offset"),
           json_object_get_boolean_member_with_default (r, "rom", FALSE) ? " (rom)" : "");
  return EXIT_SUCCESS;
}

/* The source's migration status, waited for until it has ended */
static const gchar *
vmcectl_migration_end (VmceCtlConn *c, const gchar *vm, gint timeout_s, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  static gchar status[32];

  while (g_get_monotonic_time () < deadline) {
    g_autoptr(JsonObject) args = json_object_new ();
    g_autoptr(JsonNode) ret = NULL;
    JsonObject *mig;
    const gchar *st;

    json_object_set_string_member (args, "vm", vm);
    ret = vmcectl_call (c, "query-vm", args, error);
    if (ret == NULL)
      return NULL;
    mig = json_object_get_object_member (json_node_get_object (ret), "migration");
    st = mig != NULL ? json_object_get_string_member_with_default (mig, "status", "none") : "none";
    if (g_strcmp0 (st, "completed") == 0 || g_strcmp0 (st, "failed") == 0 || g_strcmp0 (st, "cancelled") == 0) {
      g_strlcpy (status, st, sizeof status);
      return status;
    }
    g_usleep (100 * 1000);
  }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "the migration of vm %s has not ended after %d s", vm,
               timeout_s);
  return NULL;
}

static int
vmcectl_cmd_migrate (VmceCtlConn *c, int argc, char **argv)
{
  GError *error = NULL;
  g_autofree gchar *to_vm = NULL;
  g_autofree gchar *to = NULL;
  g_autofree gchar *where = NULL;
  g_autoptr(VmceCtlConn) dst = NULL;
  g_autoptr(JsonObject) args = json_object_new ();
  g_autoptr(JsonObject) expect = json_object_new ();
  g_autoptr(JsonObject) go = json_object_new ();
  g_autoptr(JsonNode) pages = NULL;
  g_autoptr(JsonNode) ret = NULL;
  const gchar *status;
  gint timeout = 600;
  gint64 n, t0;
  GOptionEntry entries[] = {
    { "to-vm", 0, 0, G_OPTION_ARG_STRING, &to_vm, "The destination QEMU, as its vmced names it (it waits "
      "with -incoming)", "NAME" },
    { "to", 0, 0, G_OPTION_ARG_STRING, &to, "Its vmced: a socket path or ssh://[user@]host (default: this "
      "vmced)", "TARGET" },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &timeout, "Seconds to wait for the migration (default 600)", "S" },
    { NULL },
  };

  if (!vmcectl_parse ("VM URI - live-migrate a VM to a QEMU another vmced watches, its poisoned pages "
                      "handed over first", entries, &argc, &argv))
    return EXIT_FAILURE;
  if (c == NULL)
    return EXIT_SUCCESS;
  if (argc != 3 || to_vm == NULL) {
    g_printerr ("vmcectl: error: usage: vmcectl migrate VM URI --to-vm NAME [--to TARGET]\n");
    return EXIT_FAILURE;
  }
  /* the destination's vmced takes the pages before anything moves: one
   * that cannot (no such VM, not loading, no vmced) refuses the lot */
  dst = to != NULL ? vmce_ctl_conn_open (to, &error) : NULL;
  if (to != NULL && dst == NULL)
    return vmcectl_fail (error);
  json_object_set_string_member (args, "vm", argv[1]);
  pages = vmcectl_call (c, "migration-pages", args, &error);
  if (pages == NULL)
    return vmcectl_fail (error);
  n = json_object_get_int_member_with_default (json_node_get_object (pages), "count", 0);
  json_object_set_string_member (expect, "vm", to_vm);
  json_object_set_string_member (expect, "pages",
                                 json_object_get_string_member (json_node_get_object (pages), "pages"));
  ret = vmcectl_call (dst != NULL ? dst : c, "migration-expect", expect, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  where = g_strdup_printf ("vm %s at %s", to_vm, to != NULL ? to : "this vmced");
  json_object_set_string_member (go, "vm", argv[1]);
  json_object_set_string_member (go, "uri", argv[2]);
  json_object_set_string_member (go, "to", where);
  json_object_set_int_member (go, "pages", n);
  t0 = g_get_monotonic_time ();
  g_clear_pointer (&ret, json_node_unref);
  ret = vmcectl_call (c, "migrate", go, &error);
  if (ret == NULL)
    return vmcectl_fail (error);
  status = vmcectl_migration_end (c, argv[1], timeout, &error);
  if (status == NULL)
    return vmcectl_fail (error);
  if (g_strcmp0 (status, "completed") != 0) {
    g_printerr ("vmcectl: error: the migration of vm %s to %s %s: it runs on where it was, its %" G_GINT64_FORMAT
                " poisoned page(s) as they were (its vmced's journal says why)\n",
                argv[1], where, status, n);
    return EXIT_FAILURE;
  }
  g_print ("vm %s: migrated to %s in %.1f s, %" G_GINT64_FORMAT " poisoned page(s) carried\n", argv[1], where,
           (g_get_monotonic_time () - t0) / 1e6, n);
  return EXIT_SUCCESS;
}

static const struct {
  const gchar *name;
  VmcectlCommandFunc func;
  const gchar *help;
} vmcectl_commands[] = {
  { "status", vmcectl_cmd_status, "vmced, its journal and the VMs it watches" },
  { "vm", vmcectl_cmd_vm, "VM: vCPUs, RAM layout and poisoned pages of one VM" },
  { "events", vmcectl_cmd_events, "[--vm VM] [-n N] [--follow | --pfn PFN]: journal records; who was hit by a "
    "host page" },
  { "attach", vmcectl_cmd_attach,
    "[--pid PID] --qmp PATH [--name NAME] [--agent PATH] [--policy POLICY]" },
  { "detach", vmcectl_cmd_detach, "VM: stop watching a VM" },
  { "policy", vmcectl_cmd_policy,
    "VM [forward|ignore-ao|pass|stop|force] [--migration carry|refuse] [--hugepage salvage|one|all]: what to "
    "do with its errors, with a migration while it has poisoned memory, and with a lost huge page" },
  { "poison", vmcectl_cmd_poison,
    "VM (--gpa|--hva ADDR | --guest-pid PID --guest-va ADDR) [--kind ao|ar]: "
    "simulate a host memory error" },
  { "inject", vmcectl_cmd_inject, "VM --gpa ADDR [--kind ao|ar] [--cpu N]: machine check only" },
  { "translate", vmcectl_cmd_translate, "VM (--gpa|--hva ADDR): where a page is" },
  { "guest", vmcectl_cmd_guest, "VM COMMAND [KEY=VALUE...]: ask the VM's vmce guest agent" },
  { "migrate", vmcectl_cmd_migrate,
    "VM URI --to-vm NAME [--to TARGET]: live-migrate it to a QEMU another vmced watches, its poisoned "
    "pages with it" },
};

static void
vmcectl_usage (void)
{
  g_print ("Usage: vmcectl [--connect TARGET]... [--socket PATH] [--json] COMMAND [ARGS]\n\nCommands:\n");
  for (guint i = 0; i < G_N_ELEMENTS (vmcectl_commands); i++)
    g_print ("  %-10s %s\n", vmcectl_commands[i].name, vmcectl_commands[i].help);
  g_print ("\n'vmcectl COMMAND --help' tells more. The vmced is the one at %s unless --socket or\n"
           "$VMCE_SOCKET says otherwise; --connect ssh://[user@]host[:port][?socket=PATH] reaches the\n"
           "vmced of another host over ssh (its vmcectl --stdio-bridge). status and events take\n"
           "several --connect: one line per record, with the host first, merged by time.\n",
           VMCE_CTL_DEFAULT_SOCKET);
}

/* --- several hosts --------------------------------------------------------- */

/* With several hosts every line printed starts with its host's name */
static const gchar *vmcectl_host = NULL;
static int vmcectl_host_width = 0;
static gboolean vmcectl_line_start = TRUE;

static void
vmcectl_print_with_host (const gchar *text)
{
  for (const gchar *p = text; *p != '\0';) {
    const gchar *nl = strchr (p, '\n');
    gsize len = nl != NULL ? (gsize) (nl - p) + 1 : strlen (p);

    if (vmcectl_line_start && vmcectl_host != NULL)
      fprintf (stdout, "%-*s  ", vmcectl_host_width, vmcectl_host);
    fwrite (p, 1, len, stdout);
    vmcectl_line_start = nl != NULL;
    p += len;
  }
  fflush (stdout);
}

static void
vmcectl_print_host_event (const gchar *host, JsonNode *ev)
{
  if (opt_json) {
    g_autofree gchar *line = NULL;
    json_object_set_string_member (json_node_get_object (ev), "host", host);
    line = vmce_json_to_line (ev);
    g_print ("%s\n", line);
    return;
  }
  vmcectl_host = host;
  vmcectl_print_event (json_node_get_object (ev));
  vmcectl_host = NULL;
}

typedef struct {
  gchar *host;
  JsonNode *ev;
} VmcectlHostEvent;

static void
vmcectl_host_event_free (VmcectlHostEvent *he)
{
  json_node_unref (he->ev);
  g_free (he);
}

static gint
vmcectl_host_event_cmp (gconstpointer a, gconstpointer b)
{
  JsonObject *x = json_node_get_object ((*(VmcectlHostEvent *const *) a)->ev);
  JsonObject *y = json_node_get_object ((*(VmcectlHostEvent *const *) b)->ev);

  /* the journal's times are UTC, ISO 8601, to the microsecond: as strings
   * they sort as times */
  return g_strcmp0 (vmce_json_object_get_string_opt (x, "time"), vmce_json_object_get_string_opt (y, "time"));
}

typedef struct {
  VmceCtlConn *conn;
  const gchar *vm;
  guint *live;
  int *rc;
} VmcectlFollow;

static void
vmcectl_follow_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmcectlFollow *f = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ev = vmce_ctl_conn_read_event_finish (f->conn, res, &error);
  const gchar *name;

  if (ev == NULL) {
    /* one host gone: say so, follow the others */
    g_printerr ("vmcectl: error: %s\n", error->message);
    *f->rc = EXIT_FAILURE;
    (*f->live)--;
    return;
  }
  name = vmce_json_object_get_string_opt (json_node_get_object (ev), "vm");
  if (f->vm == NULL || name == NULL || g_strcmp0 (name, f->vm) == 0)
    vmcectl_print_host_event (vmce_ctl_conn_get_label (f->conn), ev);
  vmce_ctl_conn_read_event_async (f->conn, NULL, vmcectl_follow_cb, f);
}
/* vmcectl events over several hosts: their records merged by time, then
 * (--follow) each new one as it comes, the host first. A host that cannot
 * be reached, or goes, is one error line; the others go on. */
static int
vmcectl_events_hosts (GPtrArray *targets, int argc, char **argv)
{
  g_autoptr(GPtrArray) conns = g_ptr_array_new_with_free_func ((GDestroyNotify) vmce_ctl_conn_free);
  g_autoptr(GPtrArray) past = g_ptr_array_new_with_free_func ((GDestroyNotify) vmcectl_host_event_free);
  g_autofree VmcectlFollow *follows = NULL;
  g_autofree gchar *vm = NULL;
  gboolean follow = FALSE;
  gint limit = 20;
  guint live = 0;
  int rc = EXIT_SUCCESS;
  GOptionEntry entries[] = {
    { "vm", 0, 0, G_OPTION_ARG_STRING, &vm, "Only this VM", "VM" },
    { "limit", 'n', 0, G_OPTION_ARG_INT, &limit, "How many past records per host (default 20, 0: all)",
      "N" },
    { "follow", 'f', 0, G_OPTION_ARG_NONE, &follow, "Then wait for new ones", NULL },
    { NULL },
  };

  if (!vmcectl_parse ("- recent journal records of several hosts, merged by time", entries, &argc, &argv))
    return EXIT_FAILURE;
  for (guint i = 0; i < targets->len; i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) args = json_object_new ();
    g_autoptr(VmceCtlConn) c = vmce_ctl_conn_open (g_ptr_array_index (targets, i), &error);
    g_autoptr(JsonNode) sub = NULL;
    g_autoptr(JsonNode) ret = NULL;
    JsonArray *arr;

    if (c != NULL && follow)
      sub = vmcectl_call (c, "subscribe", NULL, &error);
    if (vm != NULL)
      json_object_set_string_member (args, "vm", vm);
    json_object_set_int_member (args, "limit", MAX (limit, 0));
    if (c != NULL && (!follow || sub != NULL))
      ret = vmcectl_call (c, "query-events", args, &error);
    if (ret == NULL || !JSON_NODE_HOLDS_ARRAY (ret)) {
      /* the connection's errors and a far vmced's answers name the host already */
      if (error != NULL)
        g_printerr ("vmcectl: error: %s\n", error->message);
      else
        g_printerr ("vmcectl: error: %s: no records\n", vmce_ctl_conn_get_label (c));
      rc = EXIT_FAILURE;
      continue;
    }
    arr = json_node_get_array (ret);
    for (guint j = 0; j < json_array_get_length (arr); j++) {
      VmcectlHostEvent *he = g_new0 (VmcectlHostEvent, 1);
      he->host = (gchar *) vmce_ctl_conn_get_label (c);
      he->ev = json_node_ref (json_array_get_element (arr, j));
      g_ptr_array_add (past, he);
    }
    g_ptr_array_add (conns, g_steal_pointer (&c));
  }
  g_ptr_array_sort (past, vmcectl_host_event_cmp);
  for (guint i = 0; i < past->len; i++) {
    VmcectlHostEvent *he = g_ptr_array_index (past, i);
    vmcectl_print_host_event (he->host, he->ev);
  }
  if (!follow || conns->len == 0)
    return conns->len == 0 ? EXIT_FAILURE : rc;
  follows = g_new0 (VmcectlFollow, conns->len);
  for (guint i = 0; i < conns->len; i++) {
    follows[i] = (VmcectlFollow) { g_ptr_array_index (conns, i), vm, &live, &rc };
    live++;
    vmce_ctl_conn_read_event_async (follows[i].conn, NULL, vmcectl_follow_cb, &follows[i]);
  }
  while (live > 0)
    g_main_context_iteration (NULL, TRUE);
  return rc;
}

/* vmcectl status of several hosts, one after the other */
static int
vmcectl_status_hosts (GPtrArray *targets, int argc, char **argv)
{
  int rc = EXIT_SUCCESS;

  for (guint i = 0; i < targets->len; i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(VmceCtlConn) c = vmce_ctl_conn_open (g_ptr_array_index (targets, i), &error);
    g_auto(GStrv) args = g_strdupv (argv);

    if (c == NULL) {
      g_printerr ("vmcectl: error: %s\n", error->message);
      rc = EXIT_FAILURE;
      continue;
    }
    vmcectl_host = vmce_ctl_conn_get_label (c);
    if (vmcectl_cmd_status (c, argc, args) != EXIT_SUCCESS)
      rc = EXIT_FAILURE;
    vmcectl_host = NULL;
  }
  return rc;
}

/* What comes before the command */
typedef struct {
  GPtrArray *targets; /* of --connect TARGET, not owned */
  const gchar *socket;
  gboolean version, bridge, help;
} VmcectlGlobals;

/* Reads the options before the command, up to --help; returns the
 * command's index in @argv, or -1 on an unknown option (said) */
static int
vmcectl_parse_globals (int argc, char **argv, VmcectlGlobals *g)
{
  int i;

  for (i = 1; i < argc && argv[i][0] == '-'; i++) {
    if (g_strcmp0 (argv[i], "--json") == 0) {
      opt_json = TRUE;
    } else if (g_strcmp0 (argv[i], "--socket") == 0 && i + 1 < argc) {
      g->socket = argv[++i];
    } else if (g_str_has_prefix (argv[i], "--socket=")) {
      g->socket = argv[i] + strlen ("--socket=");
    } else if (g_strcmp0 (argv[i], "--connect") == 0 && i + 1 < argc) {
      g_ptr_array_add (g->targets, argv[++i]);
    } else if (g_str_has_prefix (argv[i], "--connect=")) {
      g_ptr_array_add (g->targets, argv[i] + strlen ("--connect="));
    } else if (g_strcmp0 (argv[i], "--stdio-bridge") == 0) {
      g->bridge = TRUE;
    } else if (g_strcmp0 (argv[i], "--version") == 0) {
      g->version = TRUE;
    } else if (g_strcmp0 (argv[i], "--help") == 0 || g_strcmp0 (argv[i], "-h") == 0) {
      g->help = TRUE;
      return i;
    } else {
      g_printerr ("vmcectl: error: unknown option %s (try --help)\n", argv[i]);
      return -1;
    }
  }
  return i;
}

/* status and events over several hosts, every line led by its host */
static int
vmcectl_run_on_hosts (GPtrArray *targets, VmcectlCommandFunc func, int argc, char **argv)
{
  for (guint t = 0; t < targets->len; t++) {
    g_autofree gchar *label = vmce_ctl_target_label (g_ptr_array_index (targets, t));
    vmcectl_host_width = MAX (vmcectl_host_width, (int) strlen (label));
  }
  if (!opt_json)
    g_set_print_handler (vmcectl_print_with_host);
  if (func == vmcectl_cmd_events)
    return vmcectl_events_hosts (targets, argc, argv);
  if (func == vmcectl_cmd_status)
    return vmcectl_status_hosts (targets, argc, argv);
  g_printerr ("vmcectl: error: %s takes one --connect (status and events take several)\n", argv[0]);
  return EXIT_FAILURE;
}

/* @argv[0] is the command */
static int
vmcectl_run_command (GPtrArray *targets, int argc, char **argv)
{
  g_autoptr(VmceCtlConn) c = NULL;
  GError *error = NULL;

  for (guint j = 0; j < G_N_ELEMENTS (vmcectl_commands); j++) {
    if (g_strcmp0 (argv[0], vmcectl_commands[j].name) != 0)
      continue;
    /* let the command's own --help work without vmced */
    for (int k = 1; k < argc; k++) {
      if (g_strcmp0 (argv[k], "--help") == 0 || g_strcmp0 (argv[k], "-h") == 0)
        return vmcectl_commands[j].func (NULL, argc, argv);
    }
    if (targets->len > 1)
      return vmcectl_run_on_hosts (targets, vmcectl_commands[j].func, argc, argv);
    c = vmce_ctl_conn_open (g_ptr_array_index (targets, 0), &error);
    if (c == NULL)
      return vmcectl_fail (error);
    return vmcectl_commands[j].func (c, argc, argv);
  }
  g_printerr ("vmcectl: error: unknown command %s (try --help)\n", argv[0]);
  return EXIT_FAILURE;
}

int
main (int argc, char **argv)
{
  g_autoptr(GPtrArray) targets = g_ptr_array_new ();
  VmcectlGlobals g = { .targets = targets };
  GError *error = NULL;
  int i;

  setlocale (LC_ALL, "");
  /* global options come before the command */
  i = vmcectl_parse_globals (argc, argv, &g);
  if (i < 0)
    return EXIT_FAILURE;
  if (g.help) {
    vmcectl_usage ();
    return EXIT_SUCCESS;
  }
  if (g.version) {
    g_print ("vmcectl %s\n", PACKAGE_VERSION);
    return EXIT_SUCCESS;
  }
  if (g.socket == NULL)
    g.socket = g_getenv ("VMCE_SOCKET");
  if (g.bridge) {
    /* the far end of --connect ssh://: ssh's standard input and output
     * joined to this host's vmced */
    if (!vmce_ctl_bridge_stdio (g.socket, &error))
      return vmcectl_fail (error);
    return EXIT_SUCCESS;
  }
  if (targets->len == 0)
    g_ptr_array_add (targets, (gpointer) (g.socket != NULL ? g.socket : VMCE_CTL_DEFAULT_SOCKET));
  if (i >= argc) {
    vmcectl_usage ();
    return EXIT_FAILURE;
  }
  return vmcectl_run_command (targets, argc - i, argv + i);
}
