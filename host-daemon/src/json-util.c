/*
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-json"

#include <gio/gio.h>
#include <errno.h>
#include <string.h>

#include "json-util.h"

gchar *
vmce_hex (guint64 value)
{
  return g_strdup_printf ("0x%" G_GINT64_MODIFIER "x", value);
}

void
vmce_json_builder_add_hex (JsonBuilder *builder, const gchar *member, guint64 value)
{
  g_autofree gchar *str = vmce_hex (value);

  json_builder_set_member_name (builder, member);
  json_builder_add_string_value (builder, str);
}

void
vmce_json_builder_add_string (JsonBuilder *builder, const gchar *member, const gchar *value)
{
  json_builder_set_member_name (builder, member);
  if (value != NULL)
    json_builder_add_string_value (builder, value);
  else
    json_builder_add_null_value (builder);
}

void
vmce_json_builder_add_int (JsonBuilder *builder, const gchar *member, gint64 value)
{
  json_builder_set_member_name (builder, member);
  json_builder_add_int_value (builder, value);
}

void
vmce_json_builder_add_bool (JsonBuilder *builder, const gchar *member, gboolean value)
{
  json_builder_set_member_name (builder, member);
  json_builder_add_boolean_value (builder, value);
}

gboolean
vmce_parse_u64 (const gchar *str, guint64 *value, GError **error)
{
  const gchar *digits = str;
  guint base = 10;
  gchar *end = NULL;
  guint64 v;

  if (g_str_has_prefix (str, "0x") || g_str_has_prefix (str, "0X")) {
    digits = str + 2;
    base = 16;
  }
  /* g_ascii_strtoull() takes signs and spaces, which are not addresses */
  if (*digits == '\0' || !g_ascii_isxdigit (*digits)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "'%s' is not a number", str);
    return FALSE;
  }
  errno = 0;
  v = g_ascii_strtoull (digits, &end, base);
  if (errno == ERANGE) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "'%s' is out of range", str);
    return FALSE;
  }
  if (*end != '\0') {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "'%s' is not a number", str);
    return FALSE;
  }
  *value = v;
  return TRUE;
}

gboolean
vmce_json_object_get_u64_opt (JsonObject *obj,
                              const gchar *member,
                              guint64 *value,
                              gboolean *present,
                              GError **error)
{
  JsonNode *node = json_object_get_member (obj, member);

  if (present != NULL)
    *present = FALSE;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING) {
    if (!vmce_parse_u64 (json_node_get_string (node), value, error)) {
      g_prefix_error (error, "'%s': ", member);
      return FALSE;
    }
  } else if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_INT64) {
    gint64 v = json_node_get_int (node);
    if (v < 0) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "'%s' must not be negative", member);
      return FALSE;
    }
    *value = (guint64) v;
  } else {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "'%s' must be a number or a \"0x...\" string", member);
    return FALSE;
  }
  if (present != NULL)
    *present = TRUE;
  return TRUE;
}

gboolean
vmce_json_object_get_u64 (JsonObject *obj, const gchar *member, guint64 *value, GError **error)
{
  gboolean present = FALSE;

  if (!vmce_json_object_get_u64_opt (obj, member, value, &present, error))
    return FALSE;
  if (!present) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "'%s' is missing", member);
    return FALSE;
  }
  return TRUE;
}

const gchar *
vmce_json_object_get_string_opt (JsonObject *obj, const gchar *member)
{
  JsonNode *node = json_object_get_member (obj, member);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

gchar *
vmce_json_to_line (JsonNode *node)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();

  json_generator_set_root (gen, node);
  return json_generator_to_data (gen, NULL);
}

JsonNode *
vmce_json_parse_object (const gchar *data, gssize len, const gchar *what, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  JsonNode *root;

  if (!json_parser_load_from_data (parser, data, len, error)) {
    g_prefix_error (error, "%s sent invalid JSON: ", what);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "%s sent JSON that is not an object", what);
    return NULL;
  }
  return json_node_ref (root);
}
