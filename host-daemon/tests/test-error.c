/*
 * One error domain, one class each, and GIO's codes from the adapters
 * mapped in one place.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>

#include "error.h"

static void
test_error_classes (void)
{
  static const struct {
    VmceErrorCode code;
    const gchar *klass;
  } table[] = {
    { VMCE_ERROR_GENERIC, "GenericError" },
    { VMCE_ERROR_COMMAND_NOT_FOUND, "CommandNotFound" },
    { VMCE_ERROR_INVALID_PARAMETER, "InvalidParameter" },
    { VMCE_ERROR_NOT_FOUND, "NotFound" },
    { VMCE_ERROR_BUSY, "Busy" },
    { VMCE_ERROR_TIMEOUT, "Timeout" },
    { VMCE_ERROR_NOT_READY, "NotReady" },
    { VMCE_ERROR_NOT_SUPPORTED, "NotSupported" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (table); i++) {
    g_autoptr(GError) error = g_error_new_literal (VMCE_ERROR, table[i].code, "x");

    g_assert_cmpstr (vmce_error_class (error), ==, table[i].klass);
  }
  g_assert_cmpstr (vmce_error_code_to_class (VMCE_ERROR_NOT_SUPPORTED + 1), ==, "GenericError");
}

static void
test_error_from_adapters (void)
{
  static const struct {
    GQuark domain;
    gint code;
    const gchar *klass;
  } table[] = {
    { 0, G_IO_ERROR_NOT_FOUND, "NotFound" },              /* no process with pid */
    { 0, G_IO_ERROR_EXISTS, "Busy" },                     /* pid already watched */
    { 0, G_IO_ERROR_BUSY, "Busy" },
    { 0, G_IO_ERROR_TIMED_OUT, "Timeout" },               /* the monitor did not answer */
    { 0, G_IO_ERROR_INVALID_ARGUMENT, "InvalidParameter" },
    { 0, G_IO_ERROR_INVALID_DATA, "GenericError" },       /* QEMU's answer, not the client's */
    { 0, G_IO_ERROR_PERMISSION_DENIED, "GenericError" },
    { 1, 0, "GenericError" },                             /* another domain */
  };

  for (guint i = 0; i < G_N_ELEMENTS (table); i++) {
    GQuark domain = table[i].domain == 0 ? G_IO_ERROR : G_FILE_ERROR;
    g_autoptr(GError) error = g_error_new_literal (domain, table[i].code, "x");

    g_assert_cmpstr (vmce_error_class (error), ==, table[i].klass);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/error/classes", test_error_classes);
  g_test_add_func ("/error/from-adapters", test_error_from_adapters);
  return g_test_run ();
}
