/*
 * vmced's error domain.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>

#include "error.h"

G_DEFINE_QUARK (vmce-error-quark, vmce_error)

static const gchar *const vmce_error_classes[] = {
  [VMCE_ERROR_GENERIC] = "GenericError",
  [VMCE_ERROR_COMMAND_NOT_FOUND] = "CommandNotFound",
  [VMCE_ERROR_INVALID_PARAMETER] = "InvalidParameter",
  [VMCE_ERROR_NOT_FOUND] = "NotFound",
  [VMCE_ERROR_BUSY] = "Busy",
  [VMCE_ERROR_TIMEOUT] = "Timeout",
  [VMCE_ERROR_NOT_READY] = "NotReady",
  [VMCE_ERROR_NOT_SUPPORTED] = "NotSupported",
};

const gchar *
vmce_error_code_to_class (VmceErrorCode code)
{
  if ((guint) code < G_N_ELEMENTS (vmce_error_classes))
    return vmce_error_classes[code];
  return vmce_error_classes[VMCE_ERROR_GENERIC];
}

static VmceErrorCode
vmce_error_code_from_io (gint code)
{
  switch (code) {
  case G_IO_ERROR_NOT_FOUND:
    return VMCE_ERROR_NOT_FOUND;
  case G_IO_ERROR_INVALID_ARGUMENT:
    return VMCE_ERROR_INVALID_PARAMETER;
  case G_IO_ERROR_TIMED_OUT:
    return VMCE_ERROR_TIMEOUT;
  case G_IO_ERROR_BUSY:
  case G_IO_ERROR_EXISTS:
    return VMCE_ERROR_BUSY;
  case G_IO_ERROR_NOT_SUPPORTED:
    return VMCE_ERROR_NOT_SUPPORTED;
  default:
    return VMCE_ERROR_GENERIC;
  }
}

const gchar *
vmce_error_class (const GError *error)
{
  if (error->domain == VMCE_ERROR)
    return vmce_error_code_to_class ((VmceErrorCode) error->code);
  if (error->domain == G_IO_ERROR)
    return vmce_error_code_to_class (vmce_error_code_from_io (error->code));
  return vmce_error_code_to_class (VMCE_ERROR_GENERIC);
}
