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

/* One number of /proc/@pid/status ("Tgid", "TracerPid", "VmRSS" in kB);
 * @pid 0 is vmced itself. Fails with G_IO_ERROR_NOT_FOUND when there is no
 * such process, G_IO_ERROR_INVALID_DATA when it has no such field. */
gboolean vmce_proc_status_number (pid_t pid, const gchar *field, gint64 *value, GError **error);

/* Whether @pid is a process that has not exited: FALSE when there is no
 * such process, and for a zombie (exited, its parent has not reaped it:
 * a killed QEMU until libvirtd gets to it) */
gboolean vmce_proc_is_alive (pid_t pid);

/* Whether @signo is pending for thread @tid of @pid (its own or its
 * process's pending set); FALSE too if the thread is gone */
gboolean vmce_proc_signal_pending (pid_t pid, pid_t tid, int signo);
