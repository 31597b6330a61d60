/*
 * A scripted vmce guest agent for unit tests: stands where the host end of
 * a VM's agent port (QEMU's chardev socket) would, and answers each request
 * line as it is told.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>

typedef enum {
  FAKE_AGENT_ANSWER,  /* {"return": {"request": LINE}} */
  FAKE_AGENT_ERROR,   /* {"error": {"class": "NotFound", "desc": "no such victim"}} */
  FAKE_AGENT_SILENT,  /* nothing: a guest whose agent does not run */
  FAKE_AGENT_GARBAGE, /* a line that is not JSON */
  FAKE_AGENT_CLOSE,   /* hangs up */
} FakeAgentMode;

typedef struct _FakeAgent FakeAgent;

/* Listens on @path; every request, on any connection, gets @mode, after
 * @delay_ms (0: at once) */
FakeAgent *fake_agent_new (const gchar *path, FakeAgentMode mode, guint delay_ms);
void fake_agent_free (FakeAgent *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FakeAgent, fake_agent_free)

void fake_agent_set_mode (FakeAgent *self, FakeAgentMode mode);
/* connections accepted so far; the most requests it had read and not
 * answered yet at one time */
guint fake_agent_get_n_connections (FakeAgent *self);
guint fake_agent_get_max_waiting (FakeAgent *self);
/* the requests, in the order they came (NULL-terminated, not owned) */
const gchar *const *fake_agent_get_requests (FakeAgent *self);
