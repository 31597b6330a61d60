/*
 * A QMP client on the GLib main loop.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#define VMCE_QMP_ERROR (vmce_qmp_error_quark ())
typedef enum {
  VMCE_QMP_ERROR_COMMAND,  /* QEMU answered with an error */
  VMCE_QMP_ERROR_CLOSED,   /* the connection is gone */
  VMCE_QMP_ERROR_TIMEOUT,  /* no answer in time */
  VMCE_QMP_ERROR_PROTOCOL, /* the peer does not speak QMP */
} VmceQmpError;
GQuark vmce_qmp_error_quark (void);

#define VMCE_TYPE_QMP_CLIENT (vmce_qmp_client_get_type ())
G_DECLARE_FINAL_TYPE (VmceQmpClient, vmce_qmp_client, VMCE, QMP_CLIENT, GObject)

/* @socket: connected stream socket; @name: for messages, e.g. the socket path */
VmceQmpClient *vmce_qmp_client_new (GSocket *socket, const gchar *name);
VmceQmpClient *vmce_qmp_client_connect (const gchar *path, GError **error);

void vmce_qmp_client_set_timeout (VmceQmpClient *self, guint timeout_ms);
gboolean vmce_qmp_client_is_open (VmceQmpClient *self);
/* Whether QEMU has sent something not read yet (an event, say): what it
 * sent before a thread of it stopped is there by the time vmced sees the
 * stop */
gboolean vmce_qmp_client_has_input (VmceQmpClient *self);
/* The greeting's "QMP" object; NULL before the handshake */
JsonObject *vmce_qmp_client_get_greeting (VmceQmpClient *self);

/* Reads the greeting and leaves capabilities negotiation mode */
void vmce_qmp_client_handshake_async (VmceQmpClient *self,
                                      GCancellable *cancellable,
                                      GAsyncReadyCallback callback,
                                      gpointer user_data);
gboolean vmce_qmp_client_handshake_finish (VmceQmpClient *self,
                                           GAsyncResult *res,
                                           GError **error);

/* @arguments: an object node or NULL; not taken */
void vmce_qmp_client_execute_async (VmceQmpClient *self,
                                    const gchar *command,
                                    JsonNode *arguments,
                                    GCancellable *cancellable,
                                    GAsyncReadyCallback callback,
                                    gpointer user_data);
/* Returns the "return" member; @reply_time_us: monotonic time the answer
 * was read, for latency figures (may be NULL) */
JsonNode *vmce_qmp_client_execute_finish (VmceQmpClient *self,
                                          GAsyncResult *res,
                                          gint64 *reply_time_us,
                                          GError **error);

/* human-monitor-command: returns the text HMP printed */
void vmce_qmp_client_hmp_async (VmceQmpClient *self,
                                const gchar *command_line,
                                GCancellable *cancellable,
                                GAsyncReadyCallback callback,
                                gpointer user_data);
gchar *vmce_qmp_client_hmp_finish (VmceQmpClient *self,
                                   GAsyncResult *res,
                                   gint64 *reply_time_us,
                                   GError **error);

/* Fails what is pending with @reason (or "closed") and emits "closed" */
void vmce_qmp_client_close (VmceQmpClient *self, const GError *reason);
