/*
 * One memory error as vmced saw and handled it.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-event"

#include <signal.h>

#include "json-util.h"
#include "mce-event.h"

VmceMceEvent *
vmce_mce_event_new (void)
{
  VmceMceEvent *ev = g_new0 (VmceMceEvent, 1);

  ev->latency_us = -1;
  ev->to_monitor_us = -1;
  ev->queued_us = -1;
  ev->held_us = -1;
  return ev;
}

void
vmce_mce_event_free (VmceMceEvent *ev)
{
  if (ev == NULL)
    return;
  g_free (ev->vm);
  g_free (ev->uuid);
  g_free (ev->thread);
  g_free (ev->qemu_id);
  g_free (ev->block);
  g_free (ev->via);
  g_free (ev->cper);
  g_free (ev->handled_by);
  g_free (ev->detail);
  g_clear_pointer (&ev->qemu_event, json_node_unref);
  g_free (ev);
}

const gchar *
vmce_result_to_string (VmceResult result)
{
  switch (result) {
  case VMCE_RESULT_PENDING:
    return "pending";
  case VMCE_RESULT_INJECTED:
    return "injected";
  case VMCE_RESULT_COALESCED:
    return "coalesced";
  case VMCE_RESULT_PASSED:
    return "passed";
  case VMCE_RESULT_FAILED:
    return "failed";
  case VMCE_RESULT_IGNORED:
    return "ignored";
  case VMCE_RESULT_REFUSED:
    return "refused";
  case VMCE_RESULT_STOPPED:
    return "stopped";
  case VMCE_RESULT_MIGRATED:
    return "migrated";
  }
  return "unknown";
}

const gchar *
vmce_si_code_to_string (int si_code)
{
  switch (si_code) {
  case BUS_MCEERR_AO:
    return "BUS_MCEERR_AO";
  case BUS_MCEERR_AR:
    return "BUS_MCEERR_AR";
  case BUS_ADRALN:
    return "BUS_ADRALN";
  case BUS_ADRERR:
    return "BUS_ADRERR";
  case BUS_OBJERR:
    return "BUS_OBJERR";
  }
  return "unknown";
}

gchar *
vmce_format_time (gint64 time_us)
{
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc (time_us / G_USEC_PER_SEC);
  g_autofree gchar *secs = NULL;

  if (dt == NULL)
    return g_strdup ("invalid");
  secs = g_date_time_format (dt, "%Y-%m-%dT%H:%M:%S");
  return g_strdup_printf ("%s.%06" G_GINT64_FORMAT "Z", secs, time_us % G_USEC_PER_SEC);
}

/* null when the value is unknown, so a reader tells "none" from 0 */
static void
vmce_mce_event_add_int_or_null (JsonBuilder *b, const gchar *name, gboolean known, gint64 value)
{
  json_builder_set_member_name (b, name);
  if (known)
    json_builder_add_int_value (b, value);
  else
    json_builder_add_null_value (b);
}

/* which VM, process and thread the error hit, and when */
static void
vmce_mce_event_add_origin (JsonBuilder *b, const VmceMceEvent *ev)
{
  g_autofree gchar *time = vmce_format_time (ev->time_us);

  vmce_json_builder_add_string (b, "type", "memory-error");
  vmce_json_builder_add_int (b, "seq", (gint64) ev->seq);
  vmce_json_builder_add_string (b, "time", time);
  vmce_json_builder_add_string (b, "vm", ev->vm);
  if (ev->uuid != NULL)
    vmce_json_builder_add_string (b, "uuid", ev->uuid);
  vmce_json_builder_add_int (b, "pid", ev->pid);
  if (ev->qemu_id != NULL)
    vmce_json_builder_add_string (b, "qemu_id", ev->qemu_id);
  vmce_mce_event_add_int_or_null (b, "tid", ev->tid > 0, ev->tid);
  vmce_json_builder_add_string (b, "thread", ev->thread);
  vmce_json_builder_add_string (b, "source", ev->source);
  /* a page of a lost huge page: the record of the error that showed it */
  if (ev->about_seq != 0)
    vmce_json_builder_add_int (b, "about_seq", (gint64) ev->about_seq);
}

/* The host page, which the host's own records (rasdaemon, the kernel's
 * log, EDAC on real hardware) name: an integer, as a pfn fits in 55 bits.
 * Only for an error a signal brought: an injection has no host page */
static void
vmce_mce_event_add_host_pfn (JsonBuilder *b, const VmceMceEvent *ev)
{
  if (ev->host_pfn.from == VMCE_HOST_PFN_UNKNOWN)
    return;
  vmce_mce_event_add_int_or_null (b, "host_pfn", ev->host_pfn.from != VMCE_HOST_PFN_NONE,
                                  (gint64) ev->host_pfn.pfn);
  vmce_json_builder_add_string (b, "host_pfn_from", vmce_host_pfn_from_to_string (ev->host_pfn.from));
  if (ev->host_pfn.from == VMCE_HOST_PFN_NONE)
    vmce_json_builder_add_string (b, "host_pfn_why", ev->host_pfn.why);
}

/* the SIGBUS, and where the error is in QEMU's memory and the guest's */
static void
vmce_mce_event_add_address (JsonBuilder *b, const VmceMceEvent *ev)
{
  if (ev->si_code != 0) {
    vmce_json_builder_add_string (b, "si_code", vmce_si_code_to_string (ev->si_code));
    vmce_json_builder_add_hex (b, "hva", ev->hva);
    vmce_json_builder_add_int (b, "lsb", ev->lsb);
  } else {
    vmce_json_builder_add_string (b, "si_code", NULL);
    if (ev->hva != 0)
      vmce_json_builder_add_hex (b, "hva", ev->hva);
    else
      vmce_json_builder_add_string (b, "hva", NULL);
    vmce_json_builder_add_string (b, "lsb", NULL);
  }
  vmce_mce_event_add_host_pfn (b, ev);
  if (ev->have_gpa) {
    vmce_json_builder_add_hex (b, "gpa", ev->gpa);
    vmce_json_builder_add_string (b, "block", ev->block);
    vmce_json_builder_add_hex (b, "block_offset", ev->block_offset);
  } else {
    vmce_json_builder_add_string (b, "gpa", NULL);
    vmce_json_builder_add_string (b, "block", ev->block);
  }
}

/* the machine check the guest was given, or null for both members */
static void
vmce_mce_event_add_mce (JsonBuilder *b, const VmceMceEvent *ev)
{
  vmce_mce_event_add_int_or_null (b, "vcpu", ev->have_mce || g_strcmp0 (ev->path, "sea") == 0,
                                  ev->have_mce ? ev->mce.cpu : ev->sea_vcpu);
  json_builder_set_member_name (b, "mce");
  if (!ev->have_mce) {
    json_builder_add_null_value (b);
    return;
  }
  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "kind", vmce_mce_kind_to_mce_name (ev->kind, ev->style));
  vmce_json_builder_add_string (b, "style", vmce_mce_style_to_string (ev->style));
  vmce_json_builder_add_int (b, "bank", ev->mce.bank);
  vmce_json_builder_add_hex (b, "status", ev->mce.status);
  vmce_json_builder_add_hex (b, "mcg_status", ev->mce.mcg_status);
  vmce_json_builder_add_hex (b, "addr", ev->mce.addr);
  vmce_json_builder_add_hex (b, "misc", ev->mce.misc);
  json_builder_set_member_name (b, "broadcast");
  json_builder_add_boolean_value (b, ev->mce.broadcast);
  json_builder_end_object (b);
}

/* what vmced did about it, and how long that took */
static void
vmce_mce_event_add_outcome (JsonBuilder *b, const VmceMceEvent *ev)
{
  vmce_json_builder_add_string (b, "policy", ev->policy);
  vmce_json_builder_add_string (b, "via", ev->via);
  /* an Arm64 guest's: which way it went, and the record (x86 records stay
   * as they were) */
  if (ev->path != NULL) {
    vmce_json_builder_add_string (b, "path", ev->path);
    vmce_json_builder_add_string (b, "cper", ev->cper);
  }
  vmce_json_builder_add_string (b, "handled_by", ev->handled_by);
  vmce_json_builder_add_string (b, "result", vmce_result_to_string (ev->result));
  vmce_json_builder_add_string (b, "detail", ev->detail);
  /* where the time to the answer went: vmced's (to the monitor), then QEMU's */
  vmce_mce_event_add_int_or_null (b, "to_monitor_us", ev->to_monitor_us >= 0, ev->to_monitor_us);
  vmce_mce_event_add_int_or_null (b, "queued_us", ev->queued_us >= 0, ev->queued_us);
  vmce_mce_event_add_int_or_null (b, "latency_us", ev->latency_us >= 0, ev->latency_us);
  vmce_mce_event_add_int_or_null (b, "held_us", ev->held_us >= 0, ev->held_us);
  vmce_json_builder_add_int (b, "repeats", ev->repeats);
  /* sent again because the guest was still in its handler for another */
  vmce_json_builder_add_int (b, "busy", ev->busy);
  vmce_json_builder_add_int (b, "dropped", ev->dropped);
}

JsonNode *
vmce_mce_event_to_json (const VmceMceEvent *ev)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  vmce_mce_event_add_origin (b, ev);
  vmce_mce_event_add_address (b, ev);
  vmce_mce_event_add_mce (b, ev);
  vmce_mce_event_add_outcome (b, ev);
  if (ev->qemu_event != NULL) {
    json_builder_set_member_name (b, "qemu_event");
    json_builder_add_value (b, json_node_copy (ev->qemu_event));
  }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
