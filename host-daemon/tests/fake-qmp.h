/*
 * A scripted QMP peer for unit tests: stands where QEMU's monitor would.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>

typedef struct _FakeQmp FakeQmp;

/* One end of a socketpair is the fake monitor, @client gets the other */
FakeQmp *fake_qmp_new (GSocket **client);
/* The fake monitor listens on @path and serves the first client; what is
 * sent before that client connects waits for it */
FakeQmp *fake_qmp_new_listening (const gchar *path);
void fake_qmp_free (FakeQmp *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FakeQmp, fake_qmp_free)

/* Sends @line (and a newline) as the monitor */
void fake_qmp_send (FakeQmp *self, const gchar *line);
void fake_qmp_send_greeting (FakeQmp *self);
/* The next request must execute @command. The answer is @reply:
 *   "{...}", "\"text\""...  a JSON value sent as {"return": ..., "id": ...}
 *   "error:DESC"            {"error": {"class": "GenericError", "desc": DESC}}
 *   "raw:LINE"              LINE as it is (garbage, events first, ...)
 *   NULL                    no answer at all */
void fake_qmp_expect (FakeQmp *self, const gchar *command, const gchar *reply);
gboolean fake_qmp_script_done (FakeQmp *self);
/* Forgets what the script still expects */
void fake_qmp_clear_script (FakeQmp *self);
guint fake_qmp_get_n_requests (FakeQmp *self);
/* the last request's "arguments", as JSON text, or NULL */
const gchar *fake_qmp_get_last_arguments (FakeQmp *self);
/* The monitor hangs up */
void fake_qmp_hang_up (FakeQmp *self);

/* Iterates the default main context until @cond or 5 s */
#define fake_qmp_wait(cond)                                                     \
  G_STMT_START                                                                  \
  {                                                                             \
    gint64 _deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;            \
    while (!(cond) && g_get_monotonic_time () < _deadline)                      \
      g_main_context_iteration (NULL, TRUE);                                    \
  }                                                                             \
  G_STMT_END
