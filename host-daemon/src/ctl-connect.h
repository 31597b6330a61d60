/*
 * ctl-connect: how vmcectl reaches a vmced, here or on another host.
 *
 * A target is a socket path (the local vmced), or ssh://[user@]host[:port]
 * [?socket=PATH&keyfile=FILE&no_verify=1&vmcectl=PATH]: then the unchanged
 * control protocol goes over ssh to `vmcectl --stdio-bridge` on that host,
 * which joins it to the vmced socket there, as libvirt reaches a remote
 * libvirtd with qemu+ssh:// and its own helper. No agent, no port: the
 * remote socket stays root-only, and ssh's keys are the access control.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#define VMCE_CTL_DEFAULT_SOCKET "/run/vmce/vmced.sock"

typedef struct _VmceCtlConn VmceCtlConn;

/* ssh's argv for an ssh:// target (@ssh: the ssh command and options of
 * the user's own, e.g. from $VMCE_SSH; NULL: "ssh"), or NULL with an
 * error naming what is wrong with the target */
gchar **vmce_ctl_ssh_argv (const gchar *target, const gchar *ssh, GError **error);
/* What a person calls this host: host[:port] of an ssh:// target, "local"
 * for a socket path */
gchar *vmce_ctl_target_label (const gchar *target);

/* Connects and reads vmced's greeting; a vmced of another version is
 * refused. Errors name the host. */
VmceCtlConn *vmce_ctl_conn_open (const gchar *target, GError **error);
/* Over a stream already open (tests, and the two transports) */
VmceCtlConn *vmce_ctl_conn_new_for_stream (GIOStream *stream,
                                           const gchar *label,
                                           GSubprocess *ssh,
                                           GError **error);
void vmce_ctl_conn_free (VmceCtlConn *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceCtlConn, vmce_ctl_conn_free)

const gchar *vmce_ctl_conn_get_label (VmceCtlConn *self);
/* vmced is on another host (ssh://): a path it opens is that host's */
gboolean vmce_ctl_conn_is_remote (VmceCtlConn *self);
/* vmced's greeting: {"version", "pid"} */
JsonObject *vmce_ctl_conn_get_vmced (VmceCtlConn *self);

/* Sends a command, returns its "return" member; events that come
 * meanwhile are kept for vmce_ctl_conn_read_event(). vmced's error answer
 * is the error, led by "on HOST: " when vmced is another host's (what it
 * names, a vm or a path, is there) */
JsonNode *vmce_ctl_conn_call (VmceCtlConn *self, const gchar *command, JsonObject *args, GError **error);
/* The next event's "data" (blocking), or NULL at the end or on error */
JsonNode *vmce_ctl_conn_read_event (VmceCtlConn *self, GError **error);
/* The same, from the main loop: @callback gets the event, or NULL with an
 * error; call again for the next */
void vmce_ctl_conn_read_event_async (VmceCtlConn *self,
                                     GCancellable *cancellable,
                                     GAsyncReadyCallback callback,
                                     gpointer user_data);
JsonNode *vmce_ctl_conn_read_event_finish (VmceCtlConn *self, GAsyncResult *res, GError **error);

/* The remote end: joins standard input and output to vmced's socket until
 * either side closes */
gboolean vmce_ctl_bridge_stdio (const gchar *socket_path, GError **error);
