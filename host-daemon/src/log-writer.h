/*
 * How vmced's log lines reach the operator: under systemd, to journald with
 * their priority and fields; elsewhere, one plain line each on stderr.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

/* The kinds of line an operator alerts on, each with a MESSAGE_ID of its
 * own (`journalctl MESSAGE_ID=...`); the catalogue is in vmced(8) and
 * docs/operator.md, and never changes for a kind once shipped */
typedef enum {
  VMCE_LOG_FORWARDED,         /* a memory error told to the guest */
  VMCE_LOG_NOT_INJECTED,      /* vmced tried and could not */
  VMCE_LOG_REFUSED,           /* not told: the guest could not recover from it */
  VMCE_LOG_PAUSED,            /* the VM paused (policy stop, a page the guest keeps reading) */
  VMCE_LOG_PASSED,            /* left to QEMU, as without vmced */
  VMCE_LOG_IGNORED,           /* dropped on purpose (policy ignore-ao) */
  VMCE_LOG_HUGE_PAGE_LOSS,    /* a huge page of guest RAM lost */
  VMCE_LOG_MIGRATION_REFUSED, /* a migration cancelled: poisoned pages */
  VMCE_LOG_ATTACH_FAILED,     /* a QEMU vmced could not watch */
  VMCE_LOG_KIND_COUNT,
} VmceLogKind;

const gchar *vmce_log_kind_message_id (VmceLogKind kind);
const gchar *vmce_log_kind_to_string (VmceLogKind kind);
/* The syslog priority its lines take (3 err, 4 warning, 5 notice) */
gint vmce_log_kind_priority (VmceLogKind kind);

/* The writer vmced installs, once (g_log_set_writer_func() takes one) */
void vmce_log_writer_install (void);
/* Debug lines too (vmced --verbose) */
void vmce_log_set_verbose (gboolean verbose);
GLogWriterOutput vmce_log_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                                  gpointer user_data);

/* Text for stderr: "vmced: warning: MESSAGE", the prefix as the syslog
 * @priority says (3 error, 4 warning); with @priority_prefix the "<N>" that
 * a journald stream reads as the line's priority. Pure, for the tests. */
gchar *vmce_log_format_line (gint priority, const gchar *domain, const gchar *message, gboolean priority_prefix);
/* The syslog priority of a GLib level, as journald takes it (3 to 7); a
 * line's VMCE_PRIORITY field, where it has one, goes before it */
gint vmce_log_level_priority (GLogLevelFlags level);

/* One line of @kind about @vm (NULL: none) with the journal fields
 * VMCE_VM, VMCE_GPA (when @gpa is not NULL), VMCE_SEQ (when @seq is not
 * 0), at the level the kind takes */
void vmce_log_record (VmceLogKind kind,
                      const gchar *vm,
                      const guint64 *gpa,
                      guint64 seq,
                      const gchar *format,
                      ...) G_GNUC_PRINTF (5, 6);

/* A line at priority err, "vmced: error: ..." on a terminal: what stops
 * vmced (a GLib warning with VMCE_PRIORITY 3: g_critical() is for
 * programming errors, and G_DEBUG=fatal-criticals aborts on it) */
void vmce_log_error (const gchar *format, ...) G_GNUC_PRINTF (1, 2);
