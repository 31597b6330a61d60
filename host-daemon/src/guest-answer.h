/*
 * What the guest's kernel said of an error vmced told it through ACPI GHES
 * (an Arm64 guest): its log lines about the error's address, read through
 * the VM's vmce guest agent off the signal path, and journaled as a
 * "guest-answer" record tied to the memory error.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

#include "mce-event.h"
#include "vm.h"

typedef enum {
  VMCE_GUEST_ANSWER_SILENT,   /* nothing about the address (yet) */
  VMCE_GUEST_ANSWER_HANDLED,  /* memory_failure() took the page */
  VMCE_GUEST_ANSWER_REJECTED, /* GHES refused the record */
} VmceGuestAnswerKind;

const gchar *vmce_guest_answer_kind_to_string (VmceGuestAnswerKind kind);

/* Pure: what @lines (the guest's kernel log, oldest first) say of an error
 * at guest physical address @gpa. The lines that tell it are added to
 * @kept (at most VMCE_GUEST_ANSWER_MAX_LINES) */
#define VMCE_GUEST_ANSWER_MAX_LINES 16
VmceGuestAnswerKind vmce_guest_answer_judge (const gchar *const *lines, guint n_lines, guint64 gpa,
                                             GPtrArray *kept);

/* @ev was told to the guest of @vm through GHES: its kernel log is read a
 * few times (waits of VMCE_GUEST_ANSWER_WAITS_MS) until it says what it
 * did, and a "guest-answer" record journaled (GUEST_ANSWER). Nothing for
 * an error not told that way, or a VM with no guest agent */
void vmce_guest_answer_on_event (VmceVm *vm, const VmceMceEvent *ev);
/* The guest of @vm was reset: its log starts again */
void vmce_guest_answer_on_reset (VmceVm *vm);
