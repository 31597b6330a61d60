/*
 * vmced's control socket: line-delimited JSON in the style of QMP.
 *
 *   S: {"vmced": {"version": "0.1.0", "pid": 1234}, "capabilities": ["events"]}
 *   C: {"execute": "query-vms", "id": 1}
 *   S: {"return": [...], "id": 1}
 *   C: {"execute": "subscribe"}
 *   S: {"event": "MEMORY_ERROR", "data": {...}, "timestamp": {"seconds": .., "microseconds": ..}}
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "error.h"

typedef struct _VmceControl VmceControl;
typedef struct _VmceControlRequest VmceControlRequest;

/* Answer with vmce_control_request_return() or _error(), now or later */
typedef void (*VmceControlHandler) (VmceControlRequest *req, JsonObject *args, gpointer user_data);

/* Listens on @path (mode 0600); a stale socket is replaced, a live one is
 * an error: another vmced is running */
VmceControl *vmce_control_new (const gchar *path, GError **error);
void vmce_control_free (VmceControl *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceControl, vmce_control_free)

/* For tests: serve one already connected socket */
void vmce_control_add_connection (VmceControl *self, GSocket *socket);
VmceControl *vmce_control_new_unbound (void);

void vmce_control_add_command (VmceControl *self,
                               const gchar *name,
                               VmceControlHandler handler,
                               gpointer user_data);
/* Sends an event to every subscribed client */
void vmce_control_broadcast (VmceControl *self, const gchar *event, JsonNode *data);

/* @ret: not taken; NULL means {} */
void vmce_control_request_return (VmceControlRequest *req, JsonNode *ret);
void vmce_control_request_error (VmceControlRequest *req,
                                 VmceErrorCode code,
                                 const gchar *format,
                                 ...) G_GNUC_PRINTF (3, 4);
/* @error's class: vmce_error_class() */
void vmce_control_request_error_literal (VmceControlRequest *req, const GError *error);
/* The client gets events from now on */
void vmce_control_request_subscribe (VmceControlRequest *req);
