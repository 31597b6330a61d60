/*
 * What vmced is: the VMs it watches, its journal, its control socket.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "config.h"
#include "control.h"
#include "mce-event.h"
#include "metrics-export.h"
#include "vm.h"

typedef struct _VmceDaemon VmceDaemon;

typedef struct {
  const gchar *socket_path;
  const gchar *journal_path;
  guint inject_gap_ms;
  VmceMigrationPolicy migration; /* unless vmced.conf says otherwise for a domain */
  VmceHugepagePolicy hugepage;   /* the same */
} VmceDaemonOptions;

VmceDaemon *vmce_daemon_new (const VmceDaemonOptions *options, GError **error);
/* Its control socket, for the commands (commands.c) to be registered on */
VmceControl *vmce_daemon_get_control (VmceDaemon *self);
/* Lets every QEMU go and writes the journal out */
void vmce_daemon_shutdown (VmceDaemon *self);
void vmce_daemon_free (VmceDaemon *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceDaemon, vmce_daemon_free)

void vmce_daemon_attach_async (VmceDaemon *self,
                               pid_t pid,
                               const gchar *qmp_path,
                               const gchar *name,
                               const gchar *agent_path,
                               VmcePolicy policy,
                               GAsyncReadyCallback callback,
                               gpointer user_data);
/* A libvirt domain: what libvirt-watch.c found out about it */
typedef struct {
  gchar *name;
  gchar *uuid;
  pid_t pid;
  gchar *agent_path; /* NULL: no vmce agent channel */
} VmceDomainInfo;

/* Attaches with QMP on @qmp_socket, kept up by @monitor (freed with the vm) */
void vmce_daemon_attach_domain_async (VmceDaemon *self,
                                      const VmceDomainInfo *domain,
                                      GSocket *qmp_socket,
                                      gpointer monitor,
                                      GDestroyNotify monitor_free,
                                      VmcePolicy policy,
                                      GAsyncReadyCallback callback,
                                      gpointer user_data);
/* A QMP socket vmced connected itself (attach-watch.c's probe: the
 * greeting unread), @qmp_path where it lives; @name NULL: QEMU's own */
void vmce_daemon_attach_socket_async (VmceDaemon *self,
                                      pid_t pid,
                                      GSocket *qmp_socket,
                                      const gchar *qmp_path,
                                      const gchar *name,
                                      const gchar *agent_path,
                                      VmcePolicy policy,
                                      GAsyncReadyCallback callback,
                                      gpointer user_data);
VmceVm *vmce_daemon_attach_finish (VmceDaemon *self, GAsyncResult *res, GError **error);
/* An attach that failed before there was a session (a socket that is not
 * a free QMP monitor; @pid 0 if unknown): an attach-failed record and the
 * one line, led by @who (what asked), @error naming the socket */
void vmce_daemon_attach_failed (VmceDaemon *self, pid_t pid, const gchar *who, const GError *error);

/* By name, or by pid given as a decimal string */
VmceVm *vmce_daemon_lookup_vm (VmceDaemon *self, const gchar *name_or_pid, GError **error);
GPtrArray *vmce_daemon_get_vms (VmceDaemon *self);
void vmce_daemon_remove_vm (VmceDaemon *self, VmceVm *vm);
/* A vm goes: its poisoned pages are kept for when it is attached again
 * (or forgotten, if its QEMU @exited) */
void vmce_daemon_keep_poisoned (VmceDaemon *self, VmceVm *vm, gboolean exited);

/* Numbers the event, journals it, tells subscribers; returns its JSON */
JsonNode *vmce_daemon_emit_event (VmceDaemon *self, VmceMceEvent *ev);
/* Journals a record that is not a memory error and tells subscribers */
void vmce_daemon_emit_record (VmceDaemon *self, const gchar *event, JsonNode *record);
/* Newest last; @vm NULL for all; @host_pfn: only the records about that
 * host page (memory errors, host-page records), -1 for all; @limit 0 for
 * all kept */
JsonNode *vmce_daemon_get_recent (VmceDaemon *self, const gchar *vm, gint64 host_pfn, guint limit);

/* vmced.conf, for per-domain settings of VMs attached from now on (not
 * owned; NULL for none) */
void vmce_daemon_set_config (VmceDaemon *self, const VmceConfig *config);
/* The libvirt URI vmced watches (libvirt mode), said in its status */
void vmce_daemon_set_libvirt_uri (VmceDaemon *self, const gchar *uri);
JsonNode *vmce_daemon_status_to_json (VmceDaemon *self);

/* Where its metrics go (taken; made with vmce_daemon_render_metrics and
 * the daemon): told of each change, freed with the daemon */
void vmce_daemon_set_metrics_export (VmceDaemon *self, VmceMetricsExport *export);
/* Its metrics now (a VmceMetricsRenderFunc, metrics-export.h: @user_data
 * is the daemon) */
GBytes *vmce_daemon_render_metrics (VmceMetricsFormat format, gpointer user_data);
