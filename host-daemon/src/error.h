/*
 * vmced's error domain: one code per class of the control protocol, so that
 * what a client reads is what the code that failed meant.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

#define VMCE_ERROR (vmce_error_quark ())
GQuark vmce_error_quark (void);

typedef enum {
  VMCE_ERROR_GENERIC,           /* GenericError */
  VMCE_ERROR_COMMAND_NOT_FOUND, /* CommandNotFound: no such command */
  VMCE_ERROR_INVALID_PARAMETER, /* InvalidParameter: an argument is wrong */
  VMCE_ERROR_NOT_FOUND,         /* NotFound: no such vm, process or page */
  VMCE_ERROR_BUSY,              /* Busy: watched already, traced by someone else */
  VMCE_ERROR_TIMEOUT,           /* Timeout: what was waited for did not come */
  VMCE_ERROR_NOT_READY,         /* NotReady: the vm is being attached or let go */
  VMCE_ERROR_NOT_SUPPORTED,     /* NotSupported: this vm (or QEMU) cannot do it */
} VmceErrorCode;

/* The control protocol's class of @error. Adapters below the daemon speak
 * GIO's domain (a socket, a process, a file); their codes are mapped here,
 * in one place. */
const gchar *vmce_error_class (const GError *error);
const gchar *vmce_error_code_to_class (VmceErrorCode code);
