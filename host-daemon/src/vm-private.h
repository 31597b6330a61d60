/*
 * The session's own state, for vm.c and vm-json.c only: everything else
 * goes through vm.h's getters, and the layers above keep their per-VM
 * state as layer data (vmce_vm_set_layer_data()), which the session holds
 * for them unseen.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include "vm.h"

struct _VmceVm {
  gint ref_count;
  const VmceVmHandler *handler;
  gpointer handler_data;
  gchar *name;
  pid_t pid;
  gchar *qemu_id; /* the process for good: vmce_proc_identity() */
  gchar *qmp_path;
  gchar *agent_path;
  /* a libvirt domain: its UUID, and the monitor reached through libvirt
   * (qmp_path is then NULL) */
  gchar *uuid;
  GSocket *qmp_socket;
  gpointer monitor_owner;
  GDestroyNotify monitor_owner_free;
  VmceVmState state;
  gchar *detach_reason;
  gint64 attached_time_us;
  guint64 n_events; /* memory errors reported (vmce_vm_emit_event()) */

  VmceQmpClient *qmp;
  VmcePtraceWatch *watch;
  VmceRamLayout *layout;
  gboolean layout_refreshing;
  gboolean layout_refresh_again;
  GPtrArray *layout_waiters;   /* for the next refresh: VmceLayoutWaiter */
  GPtrArray *layout_inflight;  /* for the refresh under way */
  guint layout_wait_source;    /* bounds how long they wait */
  GArray *vcpus; /* of VmceVcpu */
  VmceCpuModel cpu_model;
  gboolean kvm;
  gboolean qmp_inject_mce; /* QEMU has inject-mce (qemu-patches/) */
  gboolean qmp_ram_layout; /* and query-ram-layout */
  /* query-version: what the QEMU is (the journal's attach record says it) */
  gchar *qemu_version;  /* "10.0.2" */
  gchar *qemu_package;  /* "Debian 1:10.0.2+ds-2+deb13u1~bpo12+1", or NULL */
  GHashTable *layout_said; /* what of QEMU's mtree output was skipped and said (once) */
  gchar host_vendor[13];
  VmcePolicy policy;
  GTask *attach_task;
  gboolean running;  /* the guest runs (query-status, STOP, RESUME) */
  gboolean incoming; /* a migration's destination, loading its state */

  /* what the guest was told about, and which host pages are bad, by
   * guest page (poison-set.h) */
  GHashTable *poisoned; /* gpa -> VmcePoisonedPage */
  gchar *poisoned_from; /* where that set came from, for vmcectl vm */
  VmceRomBlobs *roms;   /* ROM blobs in RAM, which QEMU rewrites at reset */

  /* the forwarder's, the simulator's and the guards' own (GQuark -> data) */
  GData *layer_data;
};
