/*
 * What /proc says about a process.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

/* Names one process for good: "BOOT-ID/PID/START" (the boot, the pid, its
 * start time in clock ticks since boot), so that a journal record of an
 * earlier process with the same pid never passes for this one */
gchar *vmce_proc_identity (pid_t pid, GError **error);
/* The pid in an identity, or 0 */
pid_t vmce_proc_identity_pid (const gchar *identity);
/* When the process of @identity started, wall clock (microseconds), or 0 */
gint64 vmce_proc_identity_start_time (const gchar *identity);
