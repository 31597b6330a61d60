/*
 * One memory error as vmced saw and handled it: the journal's main record.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>
#include <sys/types.h>

#include "host-pfn.h"
#include "mce-encode.h"

typedef enum {
  VMCE_RESULT_PENDING,
  VMCE_RESULT_INJECTED,  /* the guest got its machine check */
  VMCE_RESULT_COALESCED, /* a repeat of an error being injected */
  VMCE_RESULT_PASSED,    /* the signal went to QEMU unchanged */
  VMCE_RESULT_FAILED,    /* vmced tried and could not */
  VMCE_RESULT_IGNORED,   /* dropped on purpose (policy ignore-ao) */
  VMCE_RESULT_REFUSED,   /* not injected: the guest could not recover */
  VMCE_RESULT_STOPPED,   /* the VM was paused instead */
  VMCE_RESULT_MIGRATED,  /* not here: the guest had left for a migration's destination, which tells it */
} VmceResult;

typedef struct {
  guint64 seq;
  gint64 time_us; /* wall clock at the signal-stop */
  gint64 stop_us; /* monotonic, at the signal-stop */
  gchar *vm;
  gchar *uuid; /* a libvirt domain's, else NULL */
  pid_t pid;
  gchar *qemu_id; /* the QEMU process for good (proc-info.h) */
  pid_t tid;
  gchar *thread; /* "main", "vcpu N", or the thread's name */
  int si_code;
  guint64 hva;
  guint lsb;
  /* "kernel", "simulated" (vmcectl poison), "inject" (no signal),
   * "huge-page" (no signal: a page of a lost huge page, hugepage-loss.c)
   * or "migration" (no signal: a page a migration brought, told on its
   * destination, migration-incoming.c) */
  const gchar *source;
  guint64 request_id;  /* the vmcectl request it answers, 0 if none */
  guint64 about_seq;   /* source "huge-page": the error that showed the loss */
  /* the host page: looked up at the signal-stop for a signal's error */
  VmceHostPfn host_pfn;
  gboolean have_gpa;
  guint64 gpa;
  gchar *block;
  guint64 block_offset;
  VmceMceKind kind;
  VmceMceStyle style;
  const gchar *policy;
  gboolean have_mce;
  VmceMce mce;
  gchar *via;        /* "hmp" or "qmp" (inject-mce, qemu-patches/) */
  /* an Arm64 guest (no machine check: have_mce FALSE): how it was told,
   * "ghes-qmp", "sea" or "refused" (decision.h), and the CPER record sent,
   * in base64 as the command took it; NULL for an x86 guest */
  const gchar *path;
  gchar *cper;
  guint sea_vcpu;    /* path "sea": the vCPU that takes the abort */
  gchar *handled_by; /* "vmced" or "qemu" */
  VmceResult result;
  gchar *detail; /* why it failed or was passed on; what was done */
  gint64 to_monitor_us; /* signal-stop to the machine check written to the monitor */
  gint64 queued_us;  /* of that, waiting in the forwarder's queue: an injection in flight, the gap */
  gint64 latency_us; /* signal-stop to the monitor's answer */
  gint64 held_us;    /* signal-stop to the thread running again */
  guint repeats; /* coalesced repeats of this error */
  guint busy;    /* inject-mce refused it so often: a machine check still in progress */
  guint dropped; /* QEMU's vCPU dropped it so often as too early (MEMORY_FAILURE "ignore") */
  JsonNode *qemu_event; /* QEMU's MEMORY_FAILURE event, if it sent one */
} VmceMceEvent;

VmceMceEvent *vmce_mce_event_new (void);
void vmce_mce_event_free (VmceMceEvent *ev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceMceEvent, vmce_mce_event_free)

const gchar *vmce_result_to_string (VmceResult result);
const gchar *vmce_si_code_to_string (int si_code);
/* "2026-12-03T11:40:30.123456Z" */
gchar *vmce_format_time (gint64 time_us);

JsonNode *vmce_mce_event_to_json (const VmceMceEvent *ev);
