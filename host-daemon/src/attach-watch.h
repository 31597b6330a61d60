/*
 * [attach]: QEMU monitor sockets found by pattern, at start and as they
 * appear in their directory, each probed for QMP's greeting before vmced
 * attaches through it.
 *
 * QEMU serves one client per monitor socket: a second connection waits in
 * the kernel's backlog, greeted only once the first client leaves, and
 * then owns the monitor. So a probe never waits in that queue behind
 * another client: no greeting within a short time while QEMU has accepted
 * a connection, and it closes its own, saying the socket is held by
 * another client. A QEMU that has accepted none is still starting (it
 * accepts once its main loop runs, after the machine is built): the probe
 * is first in its queue, and waits on for its greeting.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <sys/types.h>

#include <gio/gio.h>

#define VMCE_ATTACH_GREETING_MS 1000
/* how long a QEMU that accepts no connection may take to start */
#define VMCE_ATTACH_STARTUP_MS 60000

/* Connects to @path and waits up to @greeting_ms for QMP's greeting (up to
 * @startup_ms while the server has accepted no connection), read with
 * MSG_PEEK so that the QMP client reads it again. Errors (VMCE_ERROR): BUSY
 * held by another client (no greeting in time, or its queue full);
 * INVALID_PARAMETER not a socket, or not QMP (something else said, or the
 * connection closed); NOT_FOUND no such file, or nothing listens; TIMEOUT
 * no connection accepted in @startup_ms */
void vmce_attach_probe_async (const gchar *path,
                              guint greeting_ms,
                              guint startup_ms,
                              GAsyncReadyCallback callback,
                              gpointer user_data);
/* The connected socket, the greeting unread; @pid: the peer's process
 * (SO_PEERCRED: the QEMU that listens) */
GSocket *vmce_attach_probe_finish (GAsyncResult *res, pid_t *pid, GError **error);

/* A socket found and probed: @socket (not taken; ref it to keep it) and
 * @pid, or @error (pid 0 if the probe got no peer) */
typedef void (*VmceAttachFound) (const gchar *path,
                                 GSocket *socket,
                                 pid_t pid,
                                 const GError *error,
                                 gpointer user_data);

typedef struct _VmceAttachWatch VmceAttachWatch;

/* @patterns: absolute paths whose last part may hold fnmatch(3) wildcards.
 * Each match there now is probed, and each one created later in its
 * directory (a directory that does not exist is made, 0700): @found is
 * called once per probe. A pattern that matches nothing is said once. */
VmceAttachWatch *vmce_attach_watch_new (const gchar *const *patterns,
                                        guint greeting_ms,
                                        guint startup_ms,
                                        VmceAttachFound found,
                                        gpointer user_data,
                                        GError **error);
void vmce_attach_watch_free (VmceAttachWatch *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceAttachWatch, vmce_attach_watch_free)
