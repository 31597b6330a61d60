/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The report files vmce-victim and vmce-pages write in REPORT_DIR, each
 * one JSON object renamed into place whole, and how the agent passes them
 * on in its answers.
 */
#ifndef VMCE_AGENT_REPORTS_H
#define VMCE_AGENT_REPORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "jsonbuf.h"

#define REPORT_DIR "/run/vmce"

/* Appends the file's one JSON object, or null when there is none (yet). */
bool add_report(struct buf *out, const char *path);
/* REPORT_DIR/pages-PID SUFFIX: what vmce-pages' process PID reports. */
void report_path(char *path, size_t size, pid_t pid, const char *suffix);
/* The SIGBUS records DIR/pages-PID-TID.json of the processes PIDS, by name. */
void add_sigbus_records(struct buf *out, const pid_t *pids, int npids);

#endif
