/*
 * What the guest's kernel said of an error told through GHES (see
 * guest-answer.h).
 *
 * An x86 guest's machine check either reaches memory_failure() or panics
 * the guest, and QEMU sees a panic; an Arm64 guest's GHES driver can
 * instead refuse the CPER record vmced wrote and carry on as if nothing had
 * happened, saying so only in its log (drivers/acpi/apei/ghes.c,
 * ghes_do_memory_failure(): "Invalid address in generic error data" for an
 * address outside the guest's memory map on 6.1, memory_failure()'s "memory
 * outside kernel control" on 7.3; "Failed to read error status block" for
 * a block it cannot parse). QEMU's answer to the injection is
 * success either way: only the guest can say the record was refused.
 * So once the injection is acknowledged, the guest's log is read through
 * its vmce agent (the agent's kmsg command), in the main loop, a few
 * times: the guest handles the record in its own time (an SEA's
 * memory_failure() runs in a kworker on Linux 6.1).
 *
 * Which lines are this error's: those that name its page (memory_failure()
 * prints the pfn in each line, GHES the physical address), read from the
 * sequence number the VM's last read ended at, so an earlier error's lines
 * are not taken again. A reset of the guest starts its log again from 0.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-guest-answer"

#include <string.h>

#include "agent-client.h"
#include "guest-answer.h"
#include "json-util.h"
#include "page.h"

/* before each read; the last one's answer is the record's, whatever it says */
static const guint vmce_guest_answer_waits_ms[] = { 200, 400, 800, 1600, 3200, 0 };
#define VMCE_GUEST_ANSWER_TIMEOUT_MS 5000

GQuark vmce_guest_answer_quark (void);
G_DEFINE_QUARK (vmce-guest-answer, vmce_guest_answer)

/* A VM's: where its log was last read to, and the lookups waiting. Outlives
 * the VM's layer data while a read is under way (vm NULL then) */
typedef struct {
  gatomicrefcount ref;
  VmceVm *vm; /* not a reference: the session holds this state */
  guint64 since;
  guint boot;         /* the guest's resets seen: a read from before one moves no cursor */
  GHashTable *timers; /* VmceGuestQuery waiting for its next read -> NULL */
} VmceGuestAnswerState;

typedef struct {
  VmceGuestAnswerState *state; /* a reference */
  guint64 seq;
  guint64 gpa;
  gchar *path;
  guint64 since;
  guint boot;
  guint tries;
  gint64 start_us;
  guint timer;
} VmceGuestQuery;

const gchar *
vmce_guest_answer_kind_to_string (VmceGuestAnswerKind kind)
{
  switch (kind) {
  case VMCE_GUEST_ANSWER_HANDLED:
    return "handled";
  case VMCE_GUEST_ANSWER_REJECTED:
    return "rejected";
  case VMCE_GUEST_ANSWER_SILENT:
    break;
  }
  return "silent";
}

/* The address a line gives after @label (hex, as the kernel prints it),
 * or G_MAXUINT64 */
static guint64
vmce_guest_line_address (const gchar *line, const gchar *label)
{
  const gchar *at = strstr (line, label);

  if (at == NULL)
    return G_MAXUINT64;
  return g_ascii_strtoull (at + strlen (label), NULL, 16);
}

VmceGuestAnswerKind
vmce_guest_answer_judge (const gchar *const *lines, guint n_lines, guint64 gpa, GPtrArray *kept)
{
  /* mm/memory-failure.c's pr_fmt and "%#lx: " */
  g_autofree gchar *pfn_prefix = g_strdup_printf ("Memory failure: %#" G_GINT64_MODIFIER "x: ",
                                                  gpa >> VMCE_PAGE_SHIFT);
  VmceGuestAnswerKind kind = VMCE_GUEST_ANSWER_SILENT;

  for (guint i = 0; i < n_lines; i++) {
    const gchar *line = lines[i];
    gboolean ours = FALSE;

    if (strstr (line, pfn_prefix) != NULL) {
      /* 7.3 leaves a page with no struct page to memory_failure(), which
       * refuses it so, where 6.1's GHES refused it itself (below) */
      kind = strstr (line, "memory outside kernel control") != NULL ? VMCE_GUEST_ANSWER_REJECTED
                                                                      : VMCE_GUEST_ANSWER_HANDLED;
      ours = TRUE;
    } else if (vmce_guest_line_address (line, "Invalid address in generic error data: ") >> VMCE_PAGE_SHIFT ==
               gpa >> VMCE_PAGE_SHIFT) {
      /* (cper.c prints the record before ghes.c refuses it) */
      if (kind == VMCE_GUEST_ANSWER_SILENT)
        kind = VMCE_GUEST_ANSWER_REJECTED;
      ours = TRUE;
    } else if (strstr (line, "GHES: Failed to read error status block") != NULL) {
      /* names no address: a block the guest could not parse at all */
      if (kind == VMCE_GUEST_ANSWER_SILENT)
        kind = VMCE_GUEST_ANSWER_REJECTED;
      ours = TRUE;
    } else if (vmce_guest_line_address (line, "physical_address: ") >> VMCE_PAGE_SHIFT ==
               gpa >> VMCE_PAGE_SHIFT) {
      /* the record as the guest read it: context, no verdict */
      ours = TRUE;
    }
    if (ours && kept != NULL && kept->len < VMCE_GUEST_ANSWER_MAX_LINES)
      g_ptr_array_add (kept, g_strdup (line));
  }
  return kind;
}

static VmceGuestAnswerState *
vmce_guest_answer_state_ref (VmceGuestAnswerState *st)
{
  g_atomic_ref_count_inc (&st->ref);
  return st;
}

static void
vmce_guest_answer_state_unref (VmceGuestAnswerState *st)
{
  if (!g_atomic_ref_count_dec (&st->ref))
    return;
  g_hash_table_unref (st->timers);
  g_free (st);
}

static void
vmce_guest_query_free (VmceGuestQuery *q)
{
  if (q->timer != 0)
    g_source_remove (q->timer);
  vmce_guest_answer_state_unref (q->state);
  g_free (q->path);
  g_free (q);
}

static VmceGuestAnswerState *
vmce_guest_answer_state_new (void)
{
  VmceGuestAnswerState *st = g_new0 (VmceGuestAnswerState, 1);

  g_atomic_ref_count_init (&st->ref);
  st->timers = g_hash_table_new_full (NULL, NULL, (GDestroyNotify) vmce_guest_query_free, NULL);
  return st;
}

/* The session lets go of the state: nothing is recorded after */
static void
vmce_guest_answer_state_drop (VmceGuestAnswerState *st)
{
  st->vm = NULL;
  g_hash_table_remove_all (st->timers);
  vmce_guest_answer_state_unref (st);
}

static JsonNode *
vmce_guest_answer_record (VmceGuestQuery *q, VmceGuestAnswerKind kind, GPtrArray *kept, const gchar *detail)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  vmce_vm_begin_record (q->state->vm, b, "guest-answer");
  vmce_json_builder_add_int (b, "about_seq", (gint64) q->seq);
  vmce_json_builder_add_hex (b, "gpa", q->gpa);
  vmce_json_builder_add_string (b, "path", q->path);
  vmce_json_builder_add_string (b, "answer", vmce_guest_answer_kind_to_string (kind));
  json_builder_set_member_name (b, "lines");
  json_builder_begin_array (b);
  for (guint i = 0; kept != NULL && i < kept->len; i++)
    json_builder_add_string_value (b, g_ptr_array_index (kept, i));
  json_builder_end_array (b);
  vmce_json_builder_add_string (b, "detail", detail);
  vmce_json_builder_add_int (b, "waited_ms", (g_get_monotonic_time () - q->start_us) / 1000);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* The texts of an agent's kmsg answer, and its next sequence number */
static GPtrArray *
vmce_guest_kmsg_lines (JsonNode *answer, guint64 *next)
{
  JsonObject *obj = JSON_NODE_HOLDS_OBJECT (answer) ? json_node_get_object (answer) : NULL;
  JsonArray *lines = obj != NULL && json_object_has_member (obj, "lines")
                         ? json_object_get_array_member (obj, "lines")
                         : NULL;
  GPtrArray *texts = g_ptr_array_new ();

  *next = obj != NULL ? (guint64) json_object_get_int_member_with_default (obj, "next", 0) : 0;
  for (guint i = 0; lines != NULL && i < json_array_get_length (lines); i++) {
    JsonObject *line = json_array_get_object_element (lines, i);
    const gchar *text = line != NULL ? vmce_json_object_get_string_opt (line, "text") : NULL;

    if (text != NULL)
      g_ptr_array_add (texts, (gpointer) text);
  }
  return texts;
}

static void vmce_guest_query_wait (VmceGuestQuery *q);

/* Is the guest done with the error: its memory_failure() said how it
 * ended, or GHES refused the record */
static gboolean
vmce_guest_answer_final (VmceGuestAnswerKind kind, GPtrArray *kept)
{
  if (kind == VMCE_GUEST_ANSWER_REJECTED)
    return TRUE;
  for (guint i = 0; kind == VMCE_GUEST_ANSWER_HANDLED && i < kept->len; i++) {
    const gchar *line = g_ptr_array_index (kept, i);

    if (strstr (line, "recovery action for") != NULL || strstr (line, "already hardware poisoned") != NULL)
      return TRUE;
  }
  return FALSE;
}

static void
vmce_guest_answer_read_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceGuestQuery *q = user_data;
  VmceGuestAnswerState *st = q->state;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) answer = vmce_agent_client_request_finish (res, &error);
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) texts = NULL;
  g_autoptr(JsonNode) record = NULL;
  VmceGuestAnswerKind kind = VMCE_GUEST_ANSWER_SILENT;
  guint64 next = 0;

  if (st->vm == NULL) {
    vmce_guest_query_free (q);
    return;
  }
  if (answer != NULL) {
    texts = vmce_guest_kmsg_lines (answer, &next);
    kind = vmce_guest_answer_judge ((const gchar *const *) texts->pdata, texts->len, q->gpa, kept);
    if (q->boot == st->boot)
      st->since = MAX (st->since, next);
    if (!vmce_guest_answer_final (kind, kept) && vmce_guest_answer_waits_ms[q->tries] != 0) {
      vmce_guest_query_wait (q);
      return;
    }
  }
  if (answer == NULL)
    g_prefix_error (&error, "the guest's kernel log could not be read: ");
  record = vmce_guest_answer_record (q, kind, kept, error != NULL ? error->message : NULL);
  g_debug ("vm %s: error %" G_GUINT64_FORMAT ": the guest's answer: %s", vmce_vm_get_name (st->vm), q->seq,
           vmce_guest_answer_kind_to_string (kind));
  vmce_vm_emit_record (st->vm, "GUEST_ANSWER", record);
  vmce_guest_query_free (q);
}

static gboolean
vmce_guest_query_read_cb (gpointer user_data)
{
  VmceGuestQuery *q = user_data;
  VmceGuestAnswerState *st = q->state;
  g_autofree gchar *request = g_strdup_printf ("kmsg since=%" G_GUINT64_FORMAT, q->since);

  q->timer = 0;
  q->tries++;
  /* in flight: the answer's callback owns it now */
  g_hash_table_steal (st->timers, q);
  vmce_agent_client_request_async (vmce_vm_get_agent (st->vm), request, VMCE_GUEST_ANSWER_TIMEOUT_MS,
                                   vmce_guest_answer_read_cb, q);
  return G_SOURCE_REMOVE;
}

static void
vmce_guest_query_wait (VmceGuestQuery *q)
{
  q->timer = g_timeout_add (vmce_guest_answer_waits_ms[q->tries], vmce_guest_query_read_cb, q);
  g_hash_table_add (q->state->timers, q);
}

static VmceGuestAnswerState *
vmce_guest_answer_state (VmceVm *vm)
{
  VmceGuestAnswerState *st = vmce_vm_ensure_layer_data (vm, vmce_guest_answer_quark (),
                                                        (VmceLayerNewFunc) vmce_guest_answer_state_new,
                                                        (GDestroyNotify) vmce_guest_answer_state_drop);

  st->vm = vm;
  return st;
}

void
vmce_guest_answer_on_event (VmceVm *vm, const VmceMceEvent *ev)
{
  VmceGuestAnswerState *st;
  VmceGuestQuery *q;

  if (ev->result != VMCE_RESULT_INJECTED || !ev->have_gpa || ev->path == NULL ||
      g_strcmp0 (ev->path, "refused") == 0 || vmce_vm_get_agent (vm) == NULL)
    return;
  st = vmce_guest_answer_state (vm);
  q = g_new0 (VmceGuestQuery, 1);
  q->state = vmce_guest_answer_state_ref (st);
  q->seq = ev->seq;
  q->gpa = ev->gpa;
  q->path = g_strdup (ev->path);
  q->since = st->since;
  q->boot = st->boot;
  q->start_us = g_get_monotonic_time ();
  vmce_guest_query_wait (q);
}

void
vmce_guest_answer_on_reset (VmceVm *vm)
{
  VmceGuestAnswerState *st = vmce_vm_get_layer_data (vm, vmce_guest_answer_quark ());

  /* the guest's next boot numbers its log from 0 again */
  if (st != NULL) {
    st->since = 0;
    st->boot++;
  }
}
