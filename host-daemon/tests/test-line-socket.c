/*
 * The line socket under the QMP client and the control socket: lines split
 * and joined as they come, CR LF, an over-long line, the peer closing, and
 * an owner that frees the socket from inside its own on_line callback (a
 * failed attach drops the monitor while its reply is being handed out).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "line-socket.h"

typedef struct {
  VmceLineSocket *sock;
  GPtrArray *lines;
  gboolean closed;
  gboolean free_on_first_line;
  gchar *error;
  int peer;
} Fixture;

static void
on_line (VmceLineSocket *sock, const gchar *line, gsize len, gint64 time_us, gpointer user_data)
{
  Fixture *fx = user_data;

  g_ptr_array_add (fx->lines, g_strndup (line, len));
  if (fx->free_on_first_line)
    g_clear_pointer (&fx->sock, vmce_line_socket_free);
}

static void
on_closed (VmceLineSocket *sock, const GError *error, gpointer user_data)
{
  Fixture *fx = user_data;

  fx->closed = TRUE;
  fx->error = error != NULL ? g_strdup (error->message) : NULL;
}

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  int sv[2];
  g_autoptr(GError) error = NULL;
  GSocket *socket;

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  socket = g_socket_new_from_fd (sv[0], &error);
  g_assert_no_error (error);
  g_socket_set_blocking (socket, FALSE);
  fx->lines = g_ptr_array_new_with_free_func (g_free);
  fx->sock = vmce_line_socket_new (socket, 64, on_line, on_closed, fx);
  g_object_unref (socket);
  fx->peer = sv[1];
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  g_clear_pointer (&fx->sock, vmce_line_socket_free);
  g_ptr_array_unref (fx->lines);
  g_free (fx->error);
  if (fx->peer >= 0)
    close (fx->peer);
}

static void
peer_says (Fixture *fx, const gchar *text)
{
  g_assert_cmpint (write (fx->peer, text, strlen (text)), ==, (gssize) strlen (text));
}

static void
iterate_until (Fixture *fx, guint n_lines)
{
  for (guint i = 0; i < 1000 && fx->lines->len < n_lines && !fx->closed; i++)
    g_main_context_iteration (NULL, FALSE);
}

static void
test_lines (Fixture *fx, gconstpointer data)
{
  peer_says (fx, "one\r\ntw");
  iterate_until (fx, 1);
  peer_says (fx, "o\n\nthree\n");
  iterate_until (fx, 3);
  g_assert_cmpuint (fx->lines->len, ==, 3);
  g_assert_cmpstr (g_ptr_array_index (fx->lines, 0), ==, "one");
  g_assert_cmpstr (g_ptr_array_index (fx->lines, 1), ==, "two");
  g_assert_cmpstr (g_ptr_array_index (fx->lines, 2), ==, "three");
  vmce_line_socket_send (fx->sock, "answer");
  {
    gchar buf[16] = { 0 };
    g_assert_cmpint (read (fx->peer, buf, sizeof buf - 1), ==, 7);
    g_assert_cmpstr (buf, ==, "answer\n");
  }
}

static void
test_too_long (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *text = g_strnfill (100, 'x');

  peer_says (fx, text);
  iterate_until (fx, 1);
  g_assert_true (fx->closed);
  g_assert_nonnull (strstr (fx->error, "without a newline"));
  g_assert_true (vmce_line_socket_is_closed (fx->sock));
}

static void
test_peer_closes (Fixture *fx, gconstpointer data)
{
  close (fx->peer);
  fx->peer = -1;
  iterate_until (fx, 1);
  g_assert_true (fx->closed);
  g_assert_null (fx->error);
}

/* three lines in one read; the owner frees the socket at the first: the
 * others are not handed out, and nothing touches the freed socket */
static void
test_freed_in_callback (Fixture *fx, gconstpointer data)
{
  fx->free_on_first_line = TRUE;
  peer_says (fx, "first\nsecond\nthird\n");
  for (guint i = 0; i < 100 && fx->sock != NULL; i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_null (fx->sock);
  g_assert_cmpuint (fx->lines->len, ==, 1);
  g_assert_false (fx->closed);
  /* and the main loop goes on without it */
  for (guint i = 0; i < 10; i++)
    g_main_context_iteration (NULL, FALSE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/line-socket/lines", Fixture, NULL, fixture_setup, test_lines, fixture_teardown);
  g_test_add ("/line-socket/too-long", Fixture, NULL, fixture_setup, test_too_long,
              fixture_teardown);
  g_test_add ("/line-socket/peer-closes", Fixture, NULL, fixture_setup, test_peer_closes,
              fixture_teardown);
  g_test_add ("/line-socket/freed-in-callback", Fixture, NULL, fixture_setup,
              test_freed_in_callback, fixture_teardown);
  return g_test_run ();
}
