/*
 * A VM's vmce guest agent, reached through the host end of its port (a
 * Unix socket QEMU serves): one request line, one answer line.
 *
 * vmced relays `vmcectl guest` and `vmcectl poison --guest-pid` through
 * it, so that the socket is opened on the host the VM runs on, whichever
 * host vmcectl runs on. QEMU serves one client per socket: requests to one
 * agent go one at a time, each on a connection of its own (the port is
 * free between them for anyone else), and none waits longer than its
 * timeout. Nothing blocks the main loop.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

typedef struct _VmceAgentClient VmceAgentClient;

/* @path: the socket; @who: what errors call the agent ("the guest agent
 * of vm web1") */
VmceAgentClient *vmce_agent_client_new (const gchar *path, const gchar *who);
VmceAgentClient *vmce_agent_client_ref (VmceAgentClient *self);
/* Requests under way or queued go on: each holds the client */
void vmce_agent_client_unref (VmceAgentClient *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceAgentClient, vmce_agent_client_unref)

const gchar *vmce_agent_client_get_path (VmceAgentClient *self);

/* Sends @request (COMMAND [KEY=VALUE...], one line without its newline)
 * once the requests before it are answered, and waits at most @timeout_ms
 * for the answer. The result is the answer's "return" member. Errors (G_IO_ERROR,
 * naming the agent and the socket): the socket's own (NOT_FOUND: no such
 * file; CONNECTION_REFUSED: nobody listens), WOULD_BLOCK (QEMU's backlog is
 * full: other clients wait for it), TIMED_OUT (no answer in time: the
 * guest has no agent running, or another client holds the port),
 * CONNECTION_CLOSED, INVALID_DATA (an answer that is not one), and the
 * agent's own error answers: NOT_FOUND, INVALID_ARGUMENT, NOT_SUPPORTED
 * for its classes of those names (and CommandNotFound), FAILED for the
 * others */
void vmce_agent_client_request_async (VmceAgentClient *self,
                                      const gchar *request,
                                      guint timeout_ms,
                                      GAsyncReadyCallback callback,
                                      gpointer user_data);
JsonNode *vmce_agent_client_request_finish (GAsyncResult *res, GError **error);
